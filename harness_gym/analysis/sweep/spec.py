"""What a sweep runs: the spec, its harnesses (the design) and its cells.

A :class:`SweepSpec` names agents, tasks, a list of harnesses drawn from a harness space (a
design such as a balanced or covering subset, an enumeration, a sample, or the presets), seeds,
and whether to compute each cell's ceiling. Its :attr:`SweepSpec.id` is a hash of all that.
:meth:`SweepSpec.cells` lists the :class:`Cell` values a worker runs.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness_gym.analysis.agent_spec import AgentSpec, parse_agent
from harness_gym.core.harness import Harness

#: ``--subset all`` refuses spaces with more points than this (override with ``max_harnesses``).
ALL_LIMIT = 5_000
SUBSET_FORMS = (
    "balanced (orthogonal array), balanced:N (N level-balanced points), covering, covering:N (first N "
    "points of the strength-2 covering array), foldover (main effects clear of two-factor interactions: "
    "the fold-over of the orthogonal array, or a strength-3 array), all, sample:N, and BASE+flips or "
    "BASE+flips:next (BASE plus one-factor flips; flips = balanced+flips, flips:N = balanced:N+flips)"
)
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
    #: The seed of the design's construction (balanced, covering, foldover, sample).
    design_seed: int = 0
    #: Which design the harnesses form and how balanced it is (recorded in ``sweep.json``).
    design: Mapping[str, Any] | None = field(default=None, compare=False)

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
        design_seed: int = 0,
    ) -> SweepSpec:
        """Resolve and validate every input; errors name the bad value and the valid ones.

        Args:
            agents: agent spec(s): see :mod:`harness_gym.analysis.agent_spec`.
            tasks: task ids, or ``"all"``.
            space: ``"default"`` (:data:`~harness_gym.core.space.DEFAULT_SPACE`), ``"presets"``,
                a YAML path, or a :class:`~harness_gym.core.space.HarnessSpace`.
            subset: a design (:data:`SUBSET_FORMS`): ``balanced``, ``balanced:N``,
                ``covering``, ``covering:N``, ``all``, ``sample:N``, any of them ``+flips``
                (or ``+flips:next``), ``flips``, ``flips:N`` (the presets take ``all`` only);
                default ``balanced`` (``all`` for the presets).
            seeds: a number of seeds (``first_seed``, ``first_seed + 1``, ...) or a list.
            ceiling: also compute each cell's ceiling (``ceiling`` column, for mismatch).
            design_seed: the seed of the design's construction (another seed, another
                balanced / covering / fold-over array of the same size); recorded in ``sweep.json``.
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
        if isinstance(design_seed, bool) or not isinstance(design_seed, int) or design_seed < 0:
            raise SweepError(f"the design seed must be a non-negative integer, got {design_seed!r}")
        chosen = select_design(space, subset, max_harnesses, design_seed)
        if isinstance(seeds, int):
            if seeds < 1:
                raise SweepError(f"seeds must be at least 1, got {seeds}")
            seed_list = tuple(range(first_seed, first_seed + seeds))
        else:
            seed_list = tuple(int(s) for s in seeds)
            if not seed_list or len(set(seed_list)) != len(seed_list):
                raise SweepError(f"seeds must be a non-empty list of distinct integers, got {list(seeds)}")
        return cls(
            parsed,
            task_ids,
            tuple(chosen.points),
            chosen.factors,
            seed_list,
            ceiling,
            node_limit,
            chosen.space,
            chosen.subset,
            design_seed,
            chosen.design,
        )

    @property
    def n_cells(self) -> int:
        pairs = sum(self._applies(t, p) for t in self.tasks for p in self.harnesses)
        return len(self.agents) * pairs * len(self.seeds)

    def _applies(self, task: str, point: HarnessPoint) -> bool:
        """Over the presets, a task meets only the presets registered with it (a web
        convention that renames click is not run on a shell task)."""
        if self.space != "presets":
            return True
        from harness_gym.core.presets import PRESET_INFO, preset_applies
        from harness_gym.core.registry import get_task

        return point.name not in PRESET_INFO or preset_applies(point.name, get_task(task))

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
            "design_seed": self.design_seed,
            "design": dict(self.design) if self.design is not None else None,
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
                if not self._applies(task, point):
                    continue
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
    from harness_gym.core.registry import FAMILY_TASKS, TASKS

    if isinstance(tasks, str):
        tasks = [tasks]
    names: list[str] = []
    for item in tasks:
        if os.path.isdir(str(item)):  # a folder of Harbor task folders: its loadable tasks
            from harness_gym.envs.terminal.harbor import register_harbor_folder

            found, _ = register_harbor_folder(str(item))
            if not found:
                raise SweepError(
                    f"{item}: no Harbor task folder there loads (benchmarks/harbor_tasks.py {item} says why)"
                )
            names.extend(found)
            continue
        names.extend(t for t in str(item).split(",") if t)
    if not names:
        raise SweepError("no tasks given; pass task ids or 'all'")
    if "all" in names:
        return tuple(sorted(TASKS))
    unknown = [t for t in names if t not in TASKS and t not in FAMILY_TASKS]  # terminal ids too
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


@dataclass(frozen=True)
class Selection:
    """The harnesses a subset names, with the design record that ``sweep.json`` keeps."""

    points: list[HarnessPoint]
    factors: tuple[str, ...]
    space: Any
    subset: str
    design: dict[str, Any]


def select_harnesses(
    space: Any, subset: str | None = None, max_harnesses: int = ALL_LIMIT
) -> tuple[list[HarnessPoint], tuple[str, ...], Any, str]:
    """The harnesses a subset of a space names: (points, factor names, space record, subset)."""
    chosen = select_design(space, subset, max_harnesses)
    return chosen.points, chosen.factors, chosen.space, chosen.subset


def select_design(
    space: Any, subset: str | None = None, max_harnesses: int = ALL_LIMIT, design_seed: int = 0
) -> Selection:
    """The harnesses of a subset (a design) of a space, and the record of that design
    (``design_seed`` seeds its construction and is recorded in it)."""
    from harness_gym.core.presets import PRESETS
    from harness_gym.core.space import level_name

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
        design = {"kind": "presets", "construction": "the named presets", "n": len(points)}
        return Selection(points, factors, "presets", subset, design)
    if subset is not None and (
        not subset
        or any(ch.isspace() for ch in subset)
        or any(not p or p.endswith(":") for p in subset.split("+"))
    ):  # '', ' balanced', 'balanced: 2', 'balanced:', 'balanced:2+' would pass as something else
        raise SweepError(
            f"bad --subset {subset!r}: write a form without spaces or empty parts; forms: {SUBSET_FORMS}"
        )
    subset = subset or "balanced"
    base_form, plus, flip_form = subset.partition("+")
    if not plus and base_form.partition(":")[0] == "flips":
        _, _, n_text = base_form.partition(":")
        base_form, flip_form = ("balanced:" + n_text) if n_text else "balanced", "flips"
    mode = None
    if flip_form:
        mode = {"flips": "all", "flips:all": "all", "flips:next": "next"}.get(flip_form)
        if mode is None:
            raise SweepError(
                f"unknown --subset {subset!r}: after '+' comes flips or flips:next; forms: {SUBSET_FORMS}"
            )
    base = _base_design(resolved, subset, base_form, max_harnesses, design_seed)
    record: dict[str, Any] = {**_design_record(base), "seed": design_seed}
    design = base
    if mode is not None:
        design = resolved.flips(base, mode)
        record = {**_design_record(design), "seed": design_seed, "mode": mode, "base": record}
    if len(design) > max_harnesses:
        raise SweepError(
            f"--subset {subset} would run {len(design):,} harnesses (limit {max_harnesses:,}); "
            "use a smaller design (balanced:N, covering, sample:N) or raise --max-harnesses"
        )
    harnesses = resolved.points(design)
    width = max(2, len(str(len(harnesses) - 1)))
    names = [f"h{i:0{width}d}" for i in range(len(harnesses))]
    points = [HarnessPoint(name, h, resolved.levels_of(h)) for name, h in zip(names, harnesses)]
    if mode is not None:
        record["flips"] = [[names[b], names[f], resolved.factor_names[c]] for b, f, c in design.flips]
    return Selection(points, resolved.factor_names, resolved.to_dict(), subset, record)


def _base_design(space: Any, subset: str, form: str, max_harnesses: int, seed: int = 0) -> Any:
    """The design a subset form without flips names (rows of level indices)."""
    from harness_gym.core.designs import Design, clear_design, full_factorial
    from harness_gym.core.space import CoverageError

    kind, _, arg = form.partition(":")
    n: int | None = None
    if arg:
        # ASCII digits only: int() also reads "2_0" as 20 and non-ASCII digits such as "٢".
        n = int(arg) if re.fullmatch(r"[0-9]+", arg, re.ASCII) else None
        if n is None or n < 1:
            raise SweepError(f"bad --subset {subset!r}: N must be a positive integer; forms: {SUBSET_FORMS}")
    counts = tuple(len(f.levels) for f in space.factors)
    try:
        strength = 2 if len(counts) >= 2 else 1
        if kind == "balanced":
            if n is None:
                return space.balanced_design(strength, seed=seed)
            if n > space.size:
                raise SweepError(f"--subset {subset}: the space has only {space.size} points")
            best = space.balanced_design(strength, seed=seed)
            return best if len(best) == n else space.balanced_design(strength, n, seed=seed)
        if kind == "foldover" and n is None:
            design = clear_design(counts, seed)
            if len(design) > max_harnesses:
                raise SweepError(
                    f"--subset foldover would run {len(design):,} harnesses (limit {max_harnesses:,}); "
                    "use balanced+flips, or raise --max-harnesses"
                )
            return design
        if kind == "covering":
            design = space.covering_design(2, seed=seed) if len(counts) >= 2 else None
            if design is None:
                return Design("full factorial", counts, full_factorial(counts), "every combination")
            if n is not None:
                if n > len(design):
                    raise SweepError(
                        f"--subset {subset} asks for {n} points but the strength-2 covering array of this "
                        f"space has {len(design)}; use --subset covering or sample:{n}"
                    )
                design = Design(design.kind, counts, design.rows[:n], design.construction + f", first {n}")
            return design
    except CoverageError as err:
        raise SweepError(str(err)) from None
    if kind == "all" and n is None:
        if space.size > max_harnesses:
            raise SweepError(
                f"--subset all would run {space.size:,} harnesses (limit {max_harnesses:,}); "
                "use balanced, balanced:N, covering or sample:N, or raise --max-harnesses"
            )
        return Design("full factorial", counts, full_factorial(counts), "every combination")
    if kind == "sample" and n is not None:
        if n > space.size:
            raise SweepError(f"--subset {subset}: the space has only {space.size} points")
        rows = [space.indices(h) for h in _unique_sample(space, n, seed)]
        return Design(
            "sample", counts, np.array(rows, dtype=np.int64).reshape(-1, len(counts)), f"seed {seed}"
        )
    raise SweepError(f"unknown --subset {subset!r}; forms: {SUBSET_FORMS}")


def _design_record(design: Any) -> dict[str, Any]:
    from harness_gym.core.designs import interaction_aliasing

    aliasing = interaction_aliasing(design.rows, design.counts) if len(design.counts) >= 3 else 0.0
    return {
        "kind": design.kind,
        "construction": design.construction,
        "n": len(design),
        "balance": design.balance().to_dict(),
        # 0: main effects clear of two-factor interactions; inf: main effects not estimable
        "interaction_aliasing": round(aliasing, 4) if math.isfinite(aliasing) else None,
    }


def _unique_sample(space: Any, n: int, seed: int = 0) -> list[Harness]:
    """The first ``n`` distinct points drawn with harness seed ``seed``."""
    draws = 2 * n
    while True:
        unique = list(dict.fromkeys(space.sample(seed, draws)))
        if len(unique) >= n or draws > 64 * n:
            return unique[:n]
        draws *= 2
