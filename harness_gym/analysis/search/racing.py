"""The search's dev stage: successive halving on paired dev seeds, then one-factor local search.

:class:`SearchState` holds what the search has seen (names, the incumbent, the trajectory,
the accepted improvements) and runs the dev stage: it races a pool of harnesses on dev-seed
prefixes (:meth:`SearchState.race`), applies the acceptance rule to each rung's winner
(:meth:`SearchState.consider`) and climbs by one-factor changes of the incumbent while the
budget lasts (:meth:`SearchState.run`). It never sees a test seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TextIO

from harness_gym.analysis.search.run import Evaluator
from harness_gym.analysis.search.spec import SearchSpec, rung_seed_counts
from harness_gym.analysis.search.stats import Score, paired_difference, score
from harness_gym.core.harness import Harness


class SearchState:
    """The search's state: names, the incumbent, the trajectory and accepted improvements."""

    def __init__(self, spec: SearchSpec, ev: Evaluator, log: TextIO | None) -> None:
        self.spec = spec
        self.ev = ev
        self.log = log
        self.names: dict[str, str] = {}
        self.harness: dict[str, Harness] = {}
        self.stage: dict[str, str] = {}
        self.depth: dict[str, int] = {}  # dev seeds each candidate was raced on
        self.incumbent: Harness | None = None
        self.trajectory: list[dict[str, Any]] = []
        self.improvements: list[dict[str, Any]] = []

    # -- bookkeeping -------------------------------------------------------------------------

    def add(self, harnesses: Sequence[Harness], stage: str) -> None:
        for h in harnesses:
            if h.id not in self.names:
                self.names[h.id] = "default" if h == self.spec.default else f"c{len(self.names):03d}"
                self.harness[h.id] = h
                self.stage[h.id] = stage

    def rows(self, h: Harness, seeds: Sequence[int]) -> dict[tuple[str, int], dict[str, Any]]:
        return {(t, s): self.ev.row(t, h.id, s) for t in self.spec.tasks for s in seeds}

    def score(self, h: Harness, seeds: Sequence[int]) -> Score:
        return score(list(self.rows(h, seeds).values()))

    def evaluate(self, harnesses: Sequence[Harness], seeds: Sequence[int]) -> None:
        self.ev.evaluate(harnesses, self.spec.tasks, seeds, self.spec.space.levels_of, self.names)

    def note(self, text: str) -> None:
        if self.log is not None:
            self.log.write(text + "\n")
            self.log.flush()

    # -- racing ------------------------------------------------------------------------------

    def race(self, pool: list[Harness], budget: int, stage: str) -> Harness:
        """Successive halving on dev-seed prefixes; returns the winner of the last rung."""
        dev = self.spec.dev_seeds
        counts = rung_seed_counts(len(dev), len(pool), len(self.spec.tasks), budget, self.spec.eta)
        alive = list(pool)
        start = self.ev.spent
        for rung, k in enumerate(counts):
            seeds = dev[:k]
            if self.ev.spent - start + self.ev.missing(alive, self.spec.tasks, seeds) > budget:
                break
            self.evaluate(alive, seeds)
            for h in alive:
                self.depth[h.id] = max(self.depth.get(h.id, 0), k)
            ranked = sorted(alive, key=lambda h: self.score(h, seeds).key(), reverse=True)
            self.consider(ranked[0], seeds, stage, rung)
            if len(alive) == 1 or rung == len(counts) - 1:
                alive = ranked[:1]
                break
            alive = ranked[: max(1, math.ceil(len(alive) / self.spec.eta))]
        return alive[0]

    def consider(self, best: Harness, seeds: Sequence[int], stage: str, rung: int) -> None:
        """The acceptance rule: ``best`` replaces the incumbent if it scores higher (success,
        then fewer steps, then fewer characters) on the dev seeds both have played."""
        inc = self.incumbent
        if inc is None:
            self.incumbent = best
        elif best != inc:
            shared = [s for s in seeds if all((t, inc.id, s) in self.ev.rows for t in self.spec.tasks)]
            if not shared:
                self.evaluate([inc], seeds)
                shared = list(seeds)
            new, old = self.score(best, shared), self.score(inc, shared)
            if new.key() > old.key():
                diff = paired_difference(self.rows(best, shared), self.rows(inc, shared))
                self.improvements.append(
                    {
                        "step": len(self.improvements) + 1,
                        "stage": stage,
                        "from": self.names[inc.id],
                        "to": self.names[best.id],
                        "from_id": inc.id,
                        "to_id": best.id,
                        "dev_seeds": len(shared),
                        "dev_success_from": old.success,
                        "dev_success_to": new.success,
                        "dev_difference": diff.mean,
                        "dev_steps_from": old.steps,
                        "dev_steps_to": new.steps,
                        "decided_by": _decided_by(new.key(), old.key()),
                        "episodes_spent": self.ev.spent,
                    }
                )
                self.incumbent = best
        cur = self.incumbent
        assert cur is not None
        s = self.score(cur, seeds if cur == best else self._deepest(cur))
        self.trajectory.append(
            {
                "episodes_spent": self.ev.spent,
                "stage": stage,
                "rung": rung,
                "dev_seeds": len(seeds),
                "incumbent": self.names[cur.id],
                "incumbent_id": cur.id,
                "dev_success": s.success,
                "dev_steps": s.steps,
            }
        )
        self.note(
            f"  {stage} rung {rung}: {len(seeds)} dev seed(s), {self.ev.spent:,} episodes spent; "
            f"incumbent {self.names[cur.id]} (dev success {s.success:.2f}, steps {s.steps:.1f})"
        )

    def _deepest(self, h: Harness) -> tuple[int, ...]:
        return self.spec.dev_seeds[: max(1, self.depth.get(h.id, 1))]

    # -- the two stages ---------------------------------------------------------------------

    def run(self) -> Harness:
        spec = self.spec
        pool = spec.initial_pool()
        self.add(pool, "racing")
        self.incumbent = spec.default  # every accepted improvement starts from the default
        first = (
            spec.budget
            if not spec.local
            else max(len(pool) * len(spec.tasks), int(spec.budget * (1 - spec.local_share)))
        )
        self.note(
            f"racing {len(pool)} harnesses on up to {len(spec.dev_seeds)} dev seeds ({first:,} episodes)"
        )
        self.race(pool, first, "racing")
        if spec.local:
            tried = {h.id for h in pool}
            while True:
                assert self.incumbent is not None
                left = spec.budget - self.ev.spent
                nbrs = [h for h in spec.neighbours(self.incumbent) if h.id not in tried]
                fit = left // len(spec.tasks)
                if not nbrs or fit < 1:
                    break
                nbrs = nbrs[:fit]
                tried |= {h.id for h in nbrs}
                self.add(nbrs, "local")
                before = self.incumbent
                self.note(f"local search: {len(nbrs)} one-factor change(s) of {self.names[before.id]}")
                # The incumbent is raced with its changes; its own episodes are already paid.
                self.race([before, *nbrs], left, "local")
                if self.incumbent == before:
                    break
        assert self.incumbent is not None
        return self.incumbent


def _decided_by(new: tuple[float, ...], old: tuple[float, ...]) -> str:
    """Which part of the key made the rule accept: success, steps or characters."""
    for name, a, b in zip(("success", "fewer steps", "fewer characters"), new, old):
        if a != b:
            return name
    return "tie"
