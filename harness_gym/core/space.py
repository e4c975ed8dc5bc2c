"""Harness spaces: a product of factors whose points are harnesses.

A :class:`HarnessSpace` varies some factors of a base harness over named levels. It
enumerates and samples its points (with a *harness seed*, separate from the task seed),
builds designs (:mod:`harness_gym.core.designs`): *balanced* subsets (orthogonal arrays: every
pair of levels of every two factors appears equally often, or a level-balanced near-orthogonal
fallback with its imbalance measured), *covering* subsets (every combination of levels of every
``t`` factors appears at least once, with no promise of balance) and one-factor *flips*;
splits into train and held-out parts by whole levels or by points, and saves and loads as YAML.
:data:`DEFAULT_SPACE` varies every factor whose levels keep the ceiling (presentation, interface
and the invalid-action policy).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness_gym.core.designs import Design, flips, near_orthogonal, orthogonal_array
from harness_gym.core.harness import Harness, HarnessSpecError, read_yaml


def level_name(level: Any) -> str:
    """A readable, stable name for a level value: ``"json"``, ``"0"``, ``"step+last_error"``."""
    if isinstance(level, (tuple, list)):
        return "+".join(map(str, level)) if level else "none"
    if level is None:
        return "default"
    return str(level)


@dataclass(frozen=True)
class Factor:
    """One axis of variation: a harness attribute and the levels it takes."""

    name: str
    levels: tuple[Any, ...]

    def __post_init__(self) -> None:
        if self.name not in Harness.factor_names():
            raise HarnessSpecError(
                f"unknown harness factor {self.name!r}; valid factors: {list(Harness.factor_names())}"
            )
        levels = tuple(tuple(v) if isinstance(v, list) else v for v in self.levels)
        if not levels:
            raise HarnessSpecError(f"factor {self.name!r} needs at least one level")
        names = [level_name(v) for v in levels]
        if len(set(names)) != len(names):
            raise HarnessSpecError(f"factor {self.name!r} repeats a level: {names}")
        for value in levels:  # validated by the Harness itself, with its own message
            Harness().replace(**{self.name: value})
        object.__setattr__(self, "levels", levels)

    @property
    def level_names(self) -> tuple[str, ...]:
        return tuple(level_name(v) for v in self.levels)

    def index(self, name_or_value: Any) -> int:
        """Position of a level given by name or value; a clear error lists the valid ones."""
        for i, (value, name) in enumerate(zip(self.levels, self.level_names, strict=True)):
            if name_or_value == name or name_or_value == value:
                return i
        raise HarnessSpecError(
            f"unknown level {name_or_value!r} for factor {self.name!r}; "
            f"valid levels: {list(self.level_names)}"
        )


class CoverageError(HarnessSpecError):
    """A design request (covering or balanced subset) that cannot be met."""


class HarnessSpace:
    """The product of ``factors`` over ``base``: every point is ``base`` with one level per factor."""

    def __init__(self, factors: Sequence[Factor] | Mapping[str, Sequence[Any]], base: Harness | None = None):
        if isinstance(factors, Mapping):
            factors = [Factor(name, tuple(levels)) for name, levels in factors.items()]
        self.factors: tuple[Factor, ...] = tuple(factors)
        names = [f.name for f in self.factors]
        if len(set(names)) != len(names):
            raise HarnessSpecError(f"a factor appears twice in the space: {names}")
        self.base = base or Harness()
        # Fail early on combinations the Harness rejects only jointly.
        self.point(tuple(0 for _ in self.factors))

    # -- points ------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return math.prod(len(f.levels) for f in self.factors)

    def __len__(self) -> int:
        return self.size

    def point(self, indices: Sequence[int]) -> Harness:
        """The harness at one level index per factor."""
        changes = {f.name: f.levels[i] for f, i in zip(self.factors, indices, strict=True)}
        return self.base.replace(**changes)

    def harness(self, **levels: Any) -> Harness:
        """The point with the given levels (by name or value); other factors at their first level."""
        unknown = [k for k in levels if k not in self.factor_names]
        if unknown:
            raise HarnessSpecError(
                f"factor(s) {unknown} are not in this space; its factors: {list(self.factor_names)}"
            )
        indices = [f.index(levels[f.name]) if f.name in levels else 0 for f in self.factors]
        return self.point(indices)

    def levels_of(self, harness: Harness) -> dict[str, str]:
        """The level name each factor takes in ``harness``."""
        return {f.name: level_name(getattr(harness, f.name)) for f in self.factors}

    def __iter__(self) -> Iterator[Harness]:
        for indices in itertools.product(*(range(len(f.levels)) for f in self.factors)):
            yield self.point(indices)

    def __contains__(self, harness: object) -> bool:
        if not isinstance(harness, Harness):
            return False
        try:
            indices = [f.index(getattr(harness, f.name)) for f in self.factors]
        except HarnessSpecError:
            return False
        return self.point(indices) == harness

    @property
    def factor_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.factors)

    # -- sampling ----------------------------------------------------------------------------

    def sample(self, harness_seed: int | Sequence[int], n: int | None = None) -> Harness | list[Harness]:
        """Uniform random point(s), fully determined by ``harness_seed``."""
        rng = np.random.default_rng(harness_seed)
        draws = [self._draw(rng) for _ in range(1 if n is None else n)]
        return draws[0] if n is None else draws

    def _draw(self, rng: np.random.Generator) -> Harness:
        return self.point([int(rng.integers(len(f.levels))) for f in self.factors])

    # -- designs -----------------------------------------------------------------------------

    def covering(self, strength: int = 2, max_points: int | None = None, seed: int = 0) -> list[Harness]:
        """A covering array: every ``strength``-way combination of levels appears at least once.

        Built greedily (each new point covers as many uncovered combinations as it can), which
        gives few points in practice; ``len()`` of the result says how many it used. The
        result is deterministic for a given ``seed``. It promises coverage, not balance: a
        level may meet another factor's levels unevenly, so raw per-level success rates over
        a covering array mix in the other factors' effects.

        Raises:
            CoverageError: if ``strength`` is not between 1 and the number of factors, or if
                ``max_points`` is below the least possible size (the product of the
                ``strength`` largest level counts).
        """
        return self.points(self.covering_design(strength, max_points, seed))

    def covering_design(self, strength: int = 2, max_points: int | None = None, seed: int = 0) -> Design:
        """:meth:`covering` as a :class:`~harness_gym.core.designs.Design` (level indices)."""
        k = len(self.factors)
        if not 1 <= strength <= k:
            raise CoverageError(f"strength must be between 1 and the number of factors ({k}), got {strength}")
        counts = [len(f.levels) for f in self.factors]
        bound = self.min_covering_size(strength)
        if max_points is not None and max_points < bound:
            raise CoverageError(
                f"a strength-{strength} covering array of this space needs at least {bound} points "
                f"(the product of the {strength} largest level counts {sorted(counts)[-strength:]}); "
                f"max_points={max_points} cannot be met"
            )
        rows = _greedy_covering(counts, strength, np.random.default_rng(seed))
        if max_points is not None and len(rows) > max_points:
            raise CoverageError(
                f"the greedy construction needed {len(rows)} points for strength {strength}, "
                f"more than max_points={max_points} (lower bound {bound}); raise max_points"
            )
        return Design(
            "covering array",
            tuple(counts),
            np.array(rows, dtype=np.int64).reshape(-1, k),
            f"greedy strength-{strength} covering, seed {seed}",
        )

    def balanced(self, strength: int = 2, max_points: int | None = None, seed: int = 0) -> list[Harness]:
        """A balanced subset: every ``strength``-way combination of levels appears equally often.

        The smallest orthogonal array :func:`~harness_gym.core.designs.orthogonal_array` can
        construct; if it has more than ``max_points`` points, a level-balanced near-orthogonal
        design of ``max_points`` points instead (:meth:`balanced_design` says which, and how
        balanced). Deterministic for a given ``seed``.
        """
        return self.points(self.balanced_design(strength, max_points, seed))

    def balanced_design(self, strength: int = 2, max_points: int | None = None, seed: int = 0) -> Design:
        """:meth:`balanced` as a :class:`~harness_gym.core.designs.Design` (its ``balance()``
        measures it)."""
        k = len(self.factors)
        if not 1 <= strength <= k:
            raise CoverageError(f"strength must be between 1 and the number of factors ({k}), got {strength}")
        counts = tuple(len(f.levels) for f in self.factors)
        design = orthogonal_array(counts, strength, seed)
        if max_points is not None and len(design) > max_points:
            return near_orthogonal(counts, max_points, seed)
        return design

    def flips(self, base: Sequence[Harness] | Design, mode: str = "all") -> Design:
        """``base`` plus, per base point and factor, the points that change only that factor
        (to every other level, or with ``mode="next"`` to the next level only):
        :func:`~harness_gym.core.designs.flips`."""
        if isinstance(base, Design):
            rows = base.rows
        else:
            rows = np.array([self.indices(h) for h in base], dtype=np.int64)
        return flips(rows.reshape(-1, len(self.factors)), [len(f.levels) for f in self.factors], mode)

    def points(self, design: Design | np.ndarray) -> list[Harness]:
        """The harnesses at a design's rows of level indices."""
        rows = design.rows if isinstance(design, Design) else design
        return [self.point([int(v) for v in r]) for r in rows]

    def indices(self, harness: Harness) -> tuple[int, ...]:
        """The level index each factor takes in ``harness``."""
        return tuple(f.index(getattr(harness, f.name)) for f in self.factors)

    def min_covering_size(self, strength: int = 2) -> int:
        counts = sorted(len(f.levels) for f in self.factors)
        return math.prod(counts[-strength:])

    def uncovered(self, points: Sequence[Harness], strength: int = 2) -> list[dict[str, str]]:
        """The ``strength``-way level combinations that ``points`` miss (empty when covered)."""
        rows = [[f.index(getattr(h, f.name)) for f in self.factors] for h in points]
        missing = []
        for combo in itertools.combinations(range(len(self.factors)), strength):
            seen = {tuple(r[c] for c in combo) for r in rows}
            for levels in itertools.product(*(range(len(self.factors[c].levels)) for c in combo)):
                if levels not in seen:
                    missing.append(
                        {
                            self.factors[c].name: self.factors[c].level_names[lv]
                            for c, lv in zip(combo, levels, strict=True)
                        }
                    )
        return missing

    # -- splits ------------------------------------------------------------------------------

    def split_levels(self, held_out: Mapping[str, Sequence[Any]]) -> tuple[HarnessSpace, HeldOut]:
        """Hold out whole levels, e.g. ``{"obs_format": ["yaml"], "tool_naming": ["opaque"]}``.

        Returns the train space (the product without the held-out levels) and the held-out
        part: every point that takes at least one held-out level.
        """
        held: dict[str, set[int]] = {}
        for name, levels in held_out.items():
            if name not in self.factor_names:
                raise HarnessSpecError(
                    f"factor {name!r} is not in this space; its factors: {list(self.factor_names)}"
                )
            factor = self.factors[self.factor_names.index(name)]
            held[name] = {factor.index(level) for level in levels}
            if len(held[name]) == len(factor.levels):
                raise HarnessSpecError(f"holding out every level of {name!r} leaves nothing to train on")
        train = HarnessSpace(
            [
                Factor(f.name, tuple(v for i, v in enumerate(f.levels) if i not in held.get(f.name, ())))
                for f in self.factors
            ],
            self.base,
        )
        return train, HeldOut(self, held)

    @staticmethod
    def split_points(
        points: Sequence[Harness], held_out_fraction: float, seed: int = 0
    ) -> tuple[list[Harness], list[Harness]]:
        """Split a list of points (e.g. a balanced or covering subset) into train and held-out, seeded."""
        if not 0 < held_out_fraction < 1:
            raise ValueError(f"held_out_fraction must be in (0, 1), got {held_out_fraction}")
        order = np.random.default_rng(seed).permutation(len(points))
        n_held = max(1, round(held_out_fraction * len(points)))
        held = sorted(order[:n_held].tolist())
        return (
            [p for i, p in enumerate(points) if i not in held],
            [points[i] for i in held],
        )

    # -- identity, files, display ------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.to_dict(full=False),
            "factors": {
                f.name: [list(v) if isinstance(v, tuple) else v for v in f.levels] for f in self.factors
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HarnessSpace:
        if not isinstance(data, Mapping):
            raise HarnessSpecError(
                f"a space file holds a mapping with keys 'factors' and 'base', got a {type(data).__name__}"
            )
        unknown = set(data) - {"base", "factors"}
        if unknown or "factors" not in data:
            raise HarnessSpecError(
                f"a space file has keys 'factors' (required) and 'base'; got {sorted(data)}"
            )
        if not isinstance(data["factors"], Mapping):
            raise HarnessSpecError(
                "a space file's 'factors' maps factor names to lists of levels, "
                f"e.g. {{'obs_format': ['json', 'yaml']}}; got a {type(data['factors']).__name__}"
            )
        return cls(dict(data["factors"]), Harness.from_dict(data.get("base") or {}))

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_yaml(cls, source: str | Path) -> HarnessSpace:
        """Load from a YAML file path (``.yaml`` / ``.yml`` or a :class:`~pathlib.Path`) or YAML text.

        Text that is not UTF-8 or not valid YAML is a :class:`HarnessSpecError` naming the file;
        a missing or unreadable file is the :class:`OSError` of reading it."""
        is_path = isinstance(source, Path) or str(source).endswith((".yaml", ".yml"))
        return cls.from_dict(read_yaml(source, "space", is_path) or {})

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_yaml())

    @property
    def id(self) -> str:
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return "s-" + hashlib.sha256(blob.encode()).hexdigest()[:12]

    def summary(self) -> str:
        width = max(len(f.name) for f in self.factors)
        lines = [f"HarnessSpace {self.id}: {len(self.factors)} factors, {self.size:,} points"]
        if self.base != Harness():
            lines.append(f"  base: {self.base.describe()}")
        for f in self.factors:
            lines.append(f"  {f.name:<{width}}  {len(f.levels)}: {', '.join(f.level_names)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"HarnessSpace({', '.join(f'{f.name}={len(f.levels)}' for f in self.factors)})"


class HeldOut:
    """The held-out part of a level split: points taking at least one held-out level."""

    def __init__(self, space: HarnessSpace, held: Mapping[str, set[int]]) -> None:
        self.space = space
        self.held = dict(held)

    def __contains__(self, harness: object) -> bool:
        if harness not in self.space:
            return False
        assert isinstance(harness, Harness)
        return any(
            self.space.factors[self.space.factor_names.index(name)].index(getattr(harness, name)) in idx
            for name, idx in self.held.items()
        )

    def sample(self, harness_seed: int | Sequence[int], n: int = 1) -> list[Harness]:
        """``n`` points drawn uniformly from the held-out part (rejection sampling), seeded."""
        rng = np.random.default_rng(harness_seed)
        out: list[Harness] = []
        while len(out) < n:
            h = self.space._draw(rng)
            if h in self:
                out.append(h)
        return out

    def balanced(self, strength: int = 2, seed: int = 0) -> list[Harness]:
        """The points of the full space's balanced subset that fall in the held-out part."""
        return [h for h in self.space.balanced(strength, seed=seed) if h in self]

    def covering(self, strength: int = 2, seed: int = 0) -> list[Harness]:
        """The points of the full space's covering subset that fall in the held-out part."""
        return [h for h in self.space.covering(strength, seed=seed) if h in self]


def _greedy_covering(counts: Sequence[int], t: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """Rows (level indices) covering every t-way level combination, built greedily."""
    k = len(counts)
    combos = list(itertools.combinations(range(k), t))
    uncovered: set[tuple[tuple[int, ...], tuple[int, ...]]] = {
        (c, levels) for c in combos for levels in itertools.product(*(range(counts[i]) for i in c))
    }
    by_factor: dict[int, list[tuple[int, ...]]] = {i: [c for c in combos if i in c] for i in range(k)}
    rows: list[tuple[int, ...]] = []
    while uncovered:
        best_row, best_gain = None, -1
        ordered = sorted(uncovered)
        for _ in range(12):
            combo, levels = ordered[int(rng.integers(len(ordered)))]
            row: list[int | None] = [None] * k
            for i, lv in zip(combo, levels, strict=True):
                row[i] = lv
            for i in rng.permutation(k).tolist():
                if row[i] is not None:
                    continue
                gains = []
                for lv in range(counts[i]):
                    row[i] = lv
                    gains.append(
                        sum(
                            (c, tuple(row[j] for j in c)) in uncovered
                            for c in by_factor[i]
                            if all(row[j] is not None for j in c)
                        )
                    )
                top = max(gains)
                choices = [lv for lv, g in enumerate(gains) if g == top]
                row[i] = choices[int(rng.integers(len(choices)))]
            full = tuple(int(v) for v in row)  # type: ignore[arg-type]
            gain = sum((c, tuple(full[j] for j in c)) in uncovered for c in combos)
            if gain > best_gain:
                best_row, best_gain = full, gain
        assert best_row is not None
        rows.append(best_row)
        uncovered -= {(c, tuple(best_row[j] for j in c)) for c in combos}
    return rows


#: Categorical factors whose every level keeps the ceiling: the default space varies each over
#: all its levels, including levels registered later and installed plugins' (LEVELS is live).
CEILING_KEEPING_FACTORS = (
    "obs_format",
    "tool_style",
    "tool_naming",
    "tool_descriptions",
    "parser",
    "invalid_action",
)


def default_space() -> HarnessSpace:
    """Every factor whose levels keep the ceiling (presentation, interface, invalid-action
    policy), over every level registered now: built-in, ``register_format`` /
    ``register_tool_style`` and installed plugins'; the built-in levels added to reproduce real
    systems (``CONVENTION_FORMATS``, ``CONVENTION_STYLES``) are left out, so the default designs
    stay as they were (add them with a space of your own)."""
    from harness_gym.core.formats import CONVENTION_FORMATS
    from harness_gym.core.harness import LEVELS
    from harness_gym.core.tools import CONVENTION_STYLES

    # Levels added for the convention presets stay out, so the default designs are unchanged.
    conventions = {"obs_format": CONVENTION_FORMATS, "tool_style": CONVENTION_STYLES}
    levels: dict[str, list[Any]] = {
        f: [lv for lv in LEVELS[f] if lv not in conventions.get(f, ())] for f in CEILING_KEEPING_FACTORS
    }
    return HarnessSpace(
        {
            "obs_format": levels["obs_format"],
            "field_order": ["canonical", "reversed"],
            "extra_fields": [(), ("step",), ("last_error",), ("step", "last_error")],
            "history_window": [0, 1, "all"],
            "tool_style": levels["tool_style"],
            "tool_naming": levels["tool_naming"],
            "tool_order": ["canonical", "reversed", "alphabetical"],
            "tool_descriptions": levels["tool_descriptions"],
            "parser": levels["parser"],
            "invalid_action": levels["invalid_action"],
            "prompt_template": ["default", "terse", "verbose"],
        }
    )


def __getattr__(name: str) -> Any:
    # DEFAULT_SPACE is built when asked for, so levels registered by then are in it.
    if name == "DEFAULT_SPACE":
        return default_space()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
