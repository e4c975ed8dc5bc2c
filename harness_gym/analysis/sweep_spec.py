"""What a sweep runs: the spec, its harnesses (the design) and its cells.

A :class:`SweepSpec` names agents, tasks, a list of harnesses drawn from a harness space (a
design such as a balanced or covering subset, an enumeration, a sample, or the presets), seeds,
and whether to compute each cell's ceiling. Its :attr:`SweepSpec.id` is a hash of all that.
:meth:`SweepSpec.cells` lists the :class:`Cell` values a worker runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_gym.analysis.agent_spec import AgentSpec, parse_agent
from harness_gym.core.harness import Harness

#: ``--subset all`` refuses spaces with more points than this (override with ``max_harnesses``).
ALL_LIMIT = 5_000
SUBSET_FORMS = "balanced, balanced:N (first N points of the strength-2 covering array), all, sample:N"
_VERSION = 1


class SweepError(ValueError):
    """Bad sweep input (task, space, subset, seeds) or an output folder of another sweep."""


@dataclass(frozen=True)
class HarnessPoint:
    """One harness of a sweep: a short name, the harness, and the level of every factor."""

    name: str
    harness: Harness
    levels: Mapping[str, str]


@dataclass(frozen=True)
class Cell:
    """One episode to run: everything a worker needs, nothing it must look up."""

    index: int
    agent: AgentSpec
    task_id: str
    harness_name: str
    harness_id: str
    harness: Mapping[str, Any]
    levels: Mapping[str, str]
    seed: int

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.agent.name, self.task_id, self.harness_id, self.seed)


@dataclass(frozen=True)
class SweepSpec:
    """What a sweep runs. Build it with :meth:`build`; its cells with :meth:`cells`."""

    agents: tuple[AgentSpec, ...]
    tasks: tuple[str, ...]
    harnesses: tuple[HarnessPoint, ...]
    factors: tuple[str, ...]
    seeds: tuple[int, ...]
    ceiling: bool = True
    node_limit: int = 2_000
    space: Any = "default"
    subset: str = "balanced"

    @classmethod
    def build(
        cls,
        agents: str | Callable[..., Any] | Sequence[str | Callable[..., Any]],
        tasks: str | Sequence[str] = "all",
        space: Any = "default",
        subset: str | None = None,
        seeds: int | Sequence[int] = 5,
        first_seed: int = 0,
        ceiling: bool = True,
        node_limit: int = 2_000,
        max_harnesses: int = ALL_LIMIT,
    ) -> SweepSpec:
        """Resolve and validate every input; errors name the bad value and the valid ones.

        Args:
            agents: agent spec(s): see :mod:`harness_gym.analysis.agent_spec`.
            tasks: task ids, or ``"all"``.
            space: ``"default"`` (:data:`~harness_gym.core.space.DEFAULT_SPACE`), ``"presets"``,
                a YAML path, or a :class:`~harness_gym.core.space.HarnessSpace`.
            subset: ``balanced``, ``balanced:N``, ``all`` or ``sample:N`` (the presets take
                ``all`` only); default ``balanced`` (``all`` for the presets).
            seeds: a number of seeds (``first_seed``, ``first_seed + 1``, ...) or a list.
            ceiling: also compute each cell's ceiling (``ceiling`` column, for mismatch).
        """
        if isinstance(agents, str) or callable(agents):
            agents = [agents]  # type: ignore[list-item]
        parsed = tuple(parse_agent(a) for a in agents)  # type: ignore[union-attr]
        if not parsed:
            raise SweepError("a sweep needs at least one agent")
        names = [a.name for a in parsed]
        if len(set(names)) != len(names):
            raise SweepError(f"an agent appears twice: {names}")
        task_ids = resolve_tasks(tasks)
        points, factors, space_desc, subset = select_harnesses(space, subset, max_harnesses)
        if isinstance(seeds, int):
            if seeds < 1:
                raise SweepError(f"seeds must be at least 1, got {seeds}")
            seed_list = tuple(range(first_seed, first_seed + seeds))
        else:
            seed_list = tuple(int(s) for s in seeds)
            if not seed_list or len(set(seed_list)) != len(seed_list):
                raise SweepError(f"seeds must be a non-empty list of distinct integers, got {list(seeds)}")
        return cls(
            parsed, task_ids, tuple(points), factors, seed_list, ceiling, node_limit, space_desc, subset
        )

    @property
    def n_cells(self) -> int:
        return len(self.agents) * len(self.tasks) * len(self.harnesses) * len(self.seeds)

    def identity(self) -> dict[str, Any]:
        """What the id hashes: everything that determines the rows."""
        return {
            "version": _VERSION,
            "agents": [a.name for a in self.agents],
            "tasks": list(self.tasks),
            "harnesses": [[p.name, p.harness.id] for p in self.harnesses],
            "factors": list(self.factors),
            "seeds": list(self.seeds),
            "ceiling": self.ceiling,
            "node_limit": self.node_limit,
        }

    @property
    def id(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return "sw-" + hashlib.sha256(blob.encode()).hexdigest()[:12]

    def to_dict(self) -> dict[str, Any]:
        """The spec as stored in ``sweep.json``."""
        return {
            "sweep_id": self.id,
            **self.identity(),
            "space": self.space,
            "subset": self.subset,
            "n_cells": self.n_cells,
            "harness_specs": [
                {"name": p.name, "id": p.harness.id, "levels": dict(p.levels), "spec": p.harness.to_dict()}
                for p in self.harnesses
            ],
        }

    def cells(self) -> list[Cell]:
        """Every cell, in a fixed order: task, harness, seed, agent (index = position)."""
        out: list[Cell] = []
        for task in self.tasks:
            for point in self.harnesses:
                spec = point.harness.to_dict()
                for seed in self.seeds:
                    for agent in self.agents:
                        out.append(
                            Cell(
                                len(out), agent, task, point.name, point.harness.id, spec, point.levels, seed
                            )
                        )
        return out

    def describe(self) -> str:
        return (
            f"sweep {self.id}: agents {[a.name for a in self.agents]}, {len(self.tasks)} task(s), "
            f"{len(self.harnesses)} harness(es) ({self.subset} of {_space_label(self.space)}), "
            f"{len(self.seeds)} seed(s): {self.n_cells:,} cells"
        )


def _space_label(space: Any) -> str:
    return space if isinstance(space, str) else f"a {len(space.get('factors', {}))}-factor space"


def resolve_tasks(tasks: str | Sequence[str]) -> tuple[str, ...]:
    """Task ids (``"all"`` for every registered task); unknown ids are a clear error."""
    from harness_gym.core.registry import TASKS

    if isinstance(tasks, str):
        tasks = [tasks]
    names: list[str] = []
    for item in tasks:
        names.extend(t for t in str(item).split(",") if t)
    if not names:
        raise SweepError("no tasks given; pass task ids or 'all'")
    if "all" in names:
        return tuple(sorted(TASKS))
    unknown = [t for t in names if t not in TASKS]
    if unknown:
        raise SweepError(f"unknown task(s) {unknown}; registered tasks: {sorted(TASKS)} (or 'all')")
    return tuple(dict.fromkeys(names))


def resolve_space(space: Any) -> Any:
    """``"default"``, ``"presets"``, a YAML path or a HarnessSpace -> a HarnessSpace or ``"presets"``."""
    from harness_gym.core.space import DEFAULT_SPACE, HarnessSpace

    if isinstance(space, HarnessSpace):
        return space
    if space in (None, "default"):
        return DEFAULT_SPACE
    if space == "presets":
        return "presets"
    path = Path(space)
    if not path.is_file():
        raise SweepError(
            f"--space takes 'default', 'presets' or a YAML file; {str(space)!r} is neither (file not found)"
        )
    return HarnessSpace.from_yaml(path)


def select_harnesses(
    space: Any, subset: str | None = None, max_harnesses: int = ALL_LIMIT
) -> tuple[list[HarnessPoint], tuple[str, ...], Any, str]:
    """The harnesses a subset of a space names: (points, factor names, space record, subset)."""
    from harness_gym.core.presets import PRESETS
    from harness_gym.core.space import CoverageError, level_name

    resolved = resolve_space(space)
    if resolved == "presets":
        subset = subset or "all"
        if subset != "all":
            raise SweepError(f"--space presets is a fixed list of {len(PRESETS)} harnesses; use --subset all")
        harnesses = list(PRESETS.values())
        factors = tuple(
            f for f in Harness.factor_names() if len({level_name(getattr(h, f)) for h in harnesses}) > 1
        )
        points = [
            HarnessPoint(name, h, {f: level_name(getattr(h, f)) for f in factors})
            for name, h in PRESETS.items()
        ]
        return points, factors, "presets", subset
    subset = subset or "balanced"
    kind, _, arg = subset.partition(":")
    n: int | None = None
    if arg:
        try:
            n = int(arg)
        except ValueError:
            n = None
        if n is None or n < 1:
            raise SweepError(f"bad --subset {subset!r}: N must be a positive integer; forms: {SUBSET_FORMS}")
    if kind == "balanced":
        try:
            harnesses = resolved.balanced(2) if len(resolved.factors) >= 2 else list(resolved)
        except CoverageError as err:
            raise SweepError(str(err)) from None
        if n is not None:
            if n > len(harnesses):
                raise SweepError(
                    f"--subset {subset} asks for {n} points but the strength-2 covering array of this "
                    f"space has {len(harnesses)}; use --subset balanced or sample:{n}"
                )
            harnesses = harnesses[:n]
    elif kind == "all" and n is None:
        if resolved.size > max_harnesses:
            raise SweepError(
                f"--subset all would run {resolved.size:,} harnesses (limit {max_harnesses:,}); "
                "use balanced, balanced:N or sample:N, or raise --max-harnesses"
            )
        harnesses = list(resolved)
    elif kind == "sample" and n is not None:
        if n > resolved.size:
            raise SweepError(f"--subset {subset}: the space has only {resolved.size} points")
        harnesses = _unique_sample(resolved, n)
    else:
        raise SweepError(f"unknown --subset {subset!r}; forms: {SUBSET_FORMS}")
    width = max(2, len(str(len(harnesses) - 1)))
    points = [HarnessPoint(f"h{i:0{width}d}", h, resolved.levels_of(h)) for i, h in enumerate(harnesses)]
    return points, resolved.factor_names, resolved.to_dict(), subset


def _unique_sample(space: Any, n: int) -> list[Harness]:
    """The first ``n`` distinct points drawn with harness seed 0."""
    draws = 2 * n
    while True:
        unique = list(dict.fromkeys(space.sample(0, draws)))
        if len(unique) >= n or draws > 64 * n:
            return unique[:n]
        draws *= 2
