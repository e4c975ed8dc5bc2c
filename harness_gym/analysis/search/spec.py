"""What a harness search runs: one agent, tasks, a space, disjoint dev/test seeds, a budget.

A :class:`SearchSpec` is fixed before any episode runs: the dev seeds the search may look
at, the test seeds only the final table sees (disjoint from the dev seeds, checked here),
the budget in dev episodes, and how the starting pool is drawn (a strength-2 covering
design of the space, a few random points, the default harness and its one-factor changes).
Its :attr:`SearchSpec.id` hashes all of it, so a results folder resumes only the same search.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness_gym.analysis.agent_spec import AgentSpec, parse_agent
from harness_gym.analysis.sweep.spec import SweepError, resolve_space, resolve_tasks
from harness_gym.core.harness import Harness

_VERSION = 1
#: Where test seeds start when only counts are given (far from the dev seeds 0, 1, ...).
TEST_SEED_START = 100_000


class SearchError(SweepError):
    """Bad search input (space, seeds, budget) or a results folder of another search."""


@dataclass(frozen=True)
class SearchSpec:
    """Everything that decides a search's episodes. Build it with :meth:`build`."""

    agent: AgentSpec
    tasks: tuple[str, ...]
    space: Any  # a HarnessSpace
    default: Harness
    dev_seeds: tuple[int, ...]
    test_seeds: tuple[int, ...]
    budget: int
    eta: int = 2
    n_random: int = 8
    local: bool = True
    local_share: float = 0.3
    top_changes: int = 3
    random_seed: int = 0
    ceiling: bool = True
    node_limit: int = 2_000
    start: str = "covering"

    @classmethod
    def build(
        cls,
        agent: str | Callable[..., Any] | AgentSpec,
        tasks: str | Sequence[str] = "all",
        space: Any = "default",
        budget: int = 2_000,
        dev_seeds: int | Sequence[int] = 8,
        test_seeds: int | Sequence[int] = 20,
        default: Harness | None = None,
        eta: int = 2,
        n_random: int = 8,
        local: bool = True,
        local_share: float = 0.3,
        top_changes: int = 3,
        random_seed: int = 0,
        ceiling: bool = True,
        node_limit: int = 2_000,
        start: str = "covering",
    ) -> SearchSpec:
        """Resolve and check every input; errors name the bad value and what would do.

        Args:
            agent: one agent spec (:mod:`harness_gym.analysis.agent_spec`) or factory.
            tasks: task ids or ``"all"``.
            space: ``"default"``, a YAML path or a :class:`~harness_gym.core.space.HarnessSpace`.
            budget: dev episodes the search may spend (test episodes are not counted).
            dev_seeds, test_seeds: a count (dev: 0, 1, ...; test: from 100000) or a list;
                the two must not share a seed.
            default: the harness to compare against (default: the space's point nearest its
                base, i.e. every factor at the base's level when the factor has it).
            eta: successive-halving factor (keep the best 1/eta each rung).
            n_random: random points added to the covering design.
            local: after racing, climb by one-factor changes of the incumbent.
            local_share: the part of the budget kept for the local search.
            top_changes: how many of the default's best one-factor changes the final table shows.
            start: the design the pool starts from, any sweep ``--subset`` form
                (:data:`~harness_gym.analysis.sweep.spec.SUBSET_FORMS`): ``covering`` (default:
                every pair of levels at least once, few points), ``balanced`` (the orthogonal
                array), ``balanced:N`` (N level-balanced points), ``sample:N``, ...
        """
        from harness_gym.core.space import HarnessSpace

        parsed = parse_agent(agent)
        task_ids = resolve_tasks(tasks)
        resolved = resolve_space(space)
        if not isinstance(resolved, HarnessSpace):
            raise SearchError("a search needs a factorized space ('default' or a YAML file), not the presets")
        if not resolved.factors or resolved.size < 2:
            raise SearchError(
                f"the space is empty: it has {len(resolved.factors)} factor(s) and {resolved.size} point(s); "
                "a search needs at least one factor with two levels"
            )
        dev = _seeds(dev_seeds, 0, "dev")
        test = _seeds(test_seeds, TEST_SEED_START, "test")
        shared = sorted(set(dev) & set(test))
        if shared:
            raise SearchError(
                f"dev and test seeds overlap at {shared[:10]}; the test seeds must be unseen by the search"
            )
        if eta < 2:
            raise SearchError(f"eta must be at least 2, got {eta}")
        if n_random < 0 or top_changes < 0:
            raise SearchError("n_random and top_changes must be >= 0")
        if not 0.0 <= local_share < 1.0:
            raise SearchError(f"local_share must be in [0, 1), got {local_share}")
        spec = cls(
            parsed,
            task_ids,
            resolved,
            default if default is not None else nearest_point(resolved),
            dev,
            test,
            int(budget),
            eta,
            n_random,
            local,
            local_share,
            top_changes,
            random_seed,
            ceiling,
            node_limit,
            start,
        )
        pool = spec.initial_pool()
        need = len(pool) * len(task_ids)
        if budget < need:
            raise SearchError(
                f"a budget of {budget} dev episodes is less than one episode per candidate: the starting "
                f"pool has {len(pool)} harnesses x {len(task_ids)} task(s) = {need} episodes; raise --budget "
                f"to at least {need} (a few times more to race them), or use fewer --random points or tasks"
            )
        return spec

    # -- candidates ------------------------------------------------------------------------

    def neighbours(self, harness: Harness) -> list[Harness]:
        """Every one-factor change of ``harness`` within the space (factor order, level order)."""
        out: list[Harness] = []
        levels = self.space.levels_of(harness)
        for factor in self.space.factors:
            for value, name in zip(factor.levels, factor.level_names):
                if name != levels[factor.name]:
                    out.append(harness.replace(**{factor.name: value}))
        return out

    def initial_pool(self) -> list[Harness]:
        """The default, its one-factor changes, the start design and random points (no repeats)."""
        from harness_gym.analysis.sweep.spec import select_design

        space = self.space
        if self.start != "covering":
            design = [p.harness for p in select_design(space, self.start).points]
        elif len(space.factors) >= 2:
            design = space.covering(2, seed=self.random_seed)
        else:
            design = list(space)
        randoms = space.sample(self.random_seed + 1, max(self.n_random * 4, 1))
        picked = list(dict.fromkeys(randoms))[: self.n_random] if self.n_random else []
        return list(dict.fromkeys([self.default, *self.neighbours(self.default), *design, *picked]))

    # -- identity --------------------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        return {
            "version": _VERSION,
            "agent": self.agent.name,
            "tasks": list(self.tasks),
            "space": self.space.to_dict(),
            "default": self.default.to_dict(full=False),
            "dev_seeds": list(self.dev_seeds),
            "test_seeds": list(self.test_seeds),
            "budget": self.budget,
            "eta": self.eta,
            "n_random": self.n_random,
            "local": self.local,
            "local_share": self.local_share,
            "top_changes": self.top_changes,
            "random_seed": self.random_seed,
            "ceiling": self.ceiling,
            "node_limit": self.node_limit,
            "start": self.start,
        }

    @property
    def id(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return "se-" + hashlib.sha256(blob.encode()).hexdigest()[:12]

    def describe(self) -> str:
        return (
            f"search {self.id}: agent {self.agent.name}, {len(self.tasks)} task(s), "
            f"a {len(self.space.factors)}-factor space of {self.space.size:,} harnesses, starting pool "
            f"{len(self.initial_pool())}, budget {self.budget:,} dev episodes, {len(self.dev_seeds)} dev / "
            f"{len(self.test_seeds)} test seeds"
        )

    def exhaustive_cost(self) -> int:
        """Dev episodes that evaluating every point on every dev seed would take."""
        return self.space.size * len(self.tasks) * len(self.dev_seeds)


def nearest_point(space: Any) -> Harness:
    """The space's point closest to its base: each factor at the base's level if it has it."""
    from harness_gym.core.space import level_name

    indices = []
    for factor in space.factors:
        own = level_name(getattr(space.base, factor.name))
        indices.append(factor.level_names.index(own) if own in factor.level_names else 0)
    return space.point(indices)


def _seeds(seeds: int | Sequence[int], start: int, what: str) -> tuple[int, ...]:
    if isinstance(seeds, bool):
        raise SearchError(f"{what} seeds must be a count or a list of integers, got {seeds!r}")
    if isinstance(seeds, int):
        if seeds < 1:
            raise SearchError(f"{what} seeds must be at least 1, got {seeds}")
        return tuple(range(start, start + seeds))
    out = tuple(int(s) for s in seeds)
    if not out or len(set(out)) != len(out):
        raise SearchError(f"{what} seeds must be a non-empty list of distinct integers, got {list(seeds)}")
    return out


def rung_seed_counts(n_seeds: int, n_candidates: int, n_tasks: int, budget: int, eta: int) -> list[int]:
    """Seeds per candidate at each successive-halving rung, within ``budget`` episodes.

    Rung ``r`` races ``ceil(n / eta**r)`` candidates on the first ``k0 * eta**r`` dev seeds
    (capped at ``n_seeds``; a rung at the cap is the last). ``k0`` is the largest start that
    fits the budget; seeds a candidate already played are not paid again.
    """

    def plan(k0: int) -> tuple[list[int], int]:
        counts: list[int] = []
        alive, cost, k = n_candidates, 0, k0
        while True:
            k = min(n_seeds, k)
            cost += (k - (counts[-1] if counts else 0)) * alive * n_tasks
            counts.append(k)
            if alive == 1 or k == n_seeds:
                return counts, cost
            alive, k = max(1, math.ceil(alive / eta)), k * eta

    counts, cost = plan(1)
    while len(counts) > 1 and cost > budget:  # too many rungs even at one seed: drop the last
        last = counts.pop()
        cost -= (last - counts[-1]) * _alive(n_candidates, eta, len(counts)) * n_tasks
    best = counts
    for k0 in range(2, n_seeds + 1):
        counts, cost = plan(k0)
        if cost > budget:
            break
        best = counts
    return best


def _alive(n: int, eta: int, rung: int) -> int:
    """Candidates left at a rung: ``n`` halved (by ``eta``) ``rung`` times."""
    for _ in range(rung):
        n = max(1, math.ceil(n / eta))
    return n
