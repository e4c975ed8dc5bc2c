"""Scoring a harness from its episode rows: score, cost, ceiling split and paired differences.

A crashed episode (a row with an ``error``) counts as a failure here: a harness under which
the agent crashes is worse for it, and dropping those rows would reward crashing. Costs
(steps, characters, tokens) are averaged over the episodes that ran.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness_gym.analysis.stats import mean_ci, paired_binary
from harness_gym.core.intervals import MIN_PAIRS_FOR_INTERVAL

#: A candidate's ceiling counts as lower than the best when it is below by more than this.
CEILING_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Score:
    """One harness over a set of (task, seed) episodes."""

    n: int
    errors: int
    success: float
    success_low: float
    success_high: float
    mean_return: float
    ceiling: float
    mismatch: float
    steps: float
    obs_chars: float
    action_chars: float
    tokens: float

    def key(self) -> tuple[float, float, float]:
        """What the search maximizes: success, then fewer steps, then fewer characters."""
        return (
            _or(self.success, -math.inf),
            -_or(self.steps, math.inf),
            -_or(self.obs_chars + self.action_chars, math.inf),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _or(value: float, fallback: float) -> float:
    return fallback if value != value else value


def _mean(values: Iterable[Any]) -> float:
    xs = [float(v) for v in values if v is not None and v == v]
    return sum(xs) / len(xs) if xs else math.nan


def succeeded(row: Mapping[str, Any]) -> float:
    """1.0 for a success, 0.0 for a failure or a crash."""
    return 0.0 if row.get("error") is not None else float(bool(row.get("success")))


def score(rows: Sequence[Mapping[str, Any]]) -> Score:
    """Success (crashes as failures) with a Wilson interval, return, ceiling, mismatch, costs."""
    ok = [r for r in rows if r.get("error") is None]
    wins = [succeeded(r) for r in rows]
    mean, low, high = mean_ci(wins) if wins else (math.nan, math.nan, math.nan)
    returns = [0.0 if r.get("error") is not None else float(r.get("episode_return") or 0.0) for r in rows]
    ceilings = [r.get("ceiling") for r in rows]
    has_ceiling = bool(rows) and all(c is not None for c in ceilings)
    ceiling = _mean(ceilings) if has_ceiling else math.nan
    tokens = [
        (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)
        for r in ok
        if r.get("prompt_tokens") is not None or r.get("completion_tokens") is not None
    ]
    return Score(
        n=len(rows),
        errors=len(rows) - len(ok),
        success=mean,
        success_low=low,
        success_high=high,
        mean_return=_mean(returns),
        ceiling=ceiling,
        mismatch=ceiling - _mean(returns) if has_ceiling else math.nan,
        steps=_mean(r.get("steps") for r in ok),
        obs_chars=_mean(r.get("obs_chars") for r in ok),
        action_chars=_mean(r.get("action_chars") for r in ok),
        tokens=_mean(tokens),
    )


#: The family-wise error rate the search's significance calls keep (Holm over one search).
ALPHA = 0.05


@dataclass(frozen=True)
class Difference:
    """Paired difference in success (a - b) over shared (task, seed) episodes.

    ``low``/``high``: Newcombe's 95% interval for the paired difference (never [0, 0]: a tie
    over n pairs still leaves a width of about 2/n to 4/sqrt(n); NaN, withheld, below
    :data:`~harness_gym.core.intervals.MIN_PAIRS_FOR_INTERVAL` pairs); ``p_value``: the exact
    McNemar test on the ``wins`` (a succeeded, b failed) and ``losses`` (the reverse), before
    any multiplicity adjustment.
    """

    n: int
    mean: float
    low: float
    high: float
    p_value: float = 1.0
    wins: int = 0
    losses: int = 0

    @property
    def significant(self) -> bool:
        """The unadjusted exact test rejects "no difference" at :data:`ALPHA`; the search's
        tables adjust for multiplicity (Holm) before they call a row significant."""
        return self.n > 0 and self.p_value < ALPHA


def paired_difference(
    a: Mapping[tuple[str, int], Mapping[str, Any]],
    b: Mapping[tuple[str, int], Mapping[str, Any]],
) -> Difference:
    """Success of ``a`` minus ``b`` per shared (task, seed): mean, Newcombe interval, exact p.

    The (task, seed) pair is the unit: both harnesses played the same task instance, so the
    difference removes the instance's difficulty (paired episodes, contract 1). Only pairs
    where exactly one harness succeeded carry evidence (McNemar).
    """
    keys = [k for k in a if k in b]
    if not keys:
        return Difference(0, math.nan, math.nan, math.nan)
    r = paired_binary([int(succeeded(a[k])) for k in keys], [int(succeeded(b[k])) for k in keys])
    low, high = (r.low, r.high) if len(keys) >= MIN_PAIRS_FOR_INTERVAL else (math.nan, math.nan)
    return Difference(len(keys), r.difference, low, high, r.p_value, r.only_a, r.only_b)


def ceiling_flags(
    by_harness: Mapping[str, Mapping[tuple[str, int], Mapping[str, Any]]],
) -> dict[str, tuple[bool, float]]:
    """Per harness: whether its ceiling is below the best ceiling seen on the same (task, seed)
    episodes (a dropped tool, a tight budget), and by how much on average."""
    best: dict[tuple[str, int], float] = {}
    for rows in by_harness.values():
        for key, row in rows.items():
            c = row.get("ceiling")
            if c is not None:
                best[key] = max(best.get(key, -math.inf), float(c))
    out: dict[str, tuple[bool, float]] = {}
    for hid, rows in by_harness.items():
        gaps = [best[k] - float(r["ceiling"]) for k, r in rows.items() if r.get("ceiling") is not None]
        gap = sum(gaps) / len(gaps) if gaps else math.nan
        out[hid] = (bool(gaps) and gap > CEILING_TOLERANCE, gap)
    return out
