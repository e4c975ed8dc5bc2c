"""Paired effects over multi-agent sweep rows, e.g. what delegating or showing hints changes.

Rows of :func:`~harness_gym.multiagent.sweep.run_multiagent_sweep` are paired by
``(task_id, seed, agent)``: the same agent on the same task instance under two conditions
(two policies, or two levels of a channel factor). The effect is the mean of the paired
differences, treatment minus control, with its standard error and a 95% interval:

* a 0/1 metric (``success``): Newcombe's interval for the paired difference of proportions and
  the exact McNemar p value (:func:`harness_gym.core.intervals.paired_binary`): never [0, 0]
  for a tie, and one discordant pair is no evidence; below 5 pairs no interval (NaN), only p;
* any other metric: Student's t interval on the paired differences (exact for normal
  differences, close for others from about 10 pairs on; wide below) and no p value; with a
  single pair, or differences that are all equal, no interval (NaN) is given.

The pairs are taken as independent: when several agents act in one episode, pass ``agent=``
to test one agent at a time (pooled agents of one episode share its instance).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness_gym.core.intervals import MIN_PAIRS_FOR_INTERVAL, paired_binary, t975


@dataclass(frozen=True)
class Effect:
    """Mean paired difference (treatment - control), its standard error, the pair count, and a
    95% interval (``low``, ``high``); ``p_value`` is the exact McNemar test for a 0/1 metric
    (NaN otherwise); ``method`` names how the interval was made."""

    mean: float
    stderr: float
    pairs: int
    low: float = math.nan
    high: float = math.nan
    p_value: float = math.nan
    method: str = ""


def paired_effect(
    rows: Iterable[Mapping[str, Any]],
    by: str,
    treatment: Any,
    control: Any,
    metric: str = "episode_return",
    agent: str | None = None,
) -> Effect:
    """The effect of ``by == treatment`` against ``by == control`` on ``metric``.

    Args:
        rows: sweep rows (dicts); rows with an ``error`` are left out.
        by: the column that names the condition, e.g. ``"policy"`` or ``"level_hint_position"``.
        metric: a numeric or boolean column (``success`` counts as 0/1).
        agent: only this agent's rows (default: every agent's, each paired with itself).

    Raises:
        ValueError: no row pairs up (the message says which conditions were seen).
    """
    sides: dict[Any, dict[tuple[Any, ...], float]] = {treatment: {}, control: {}}
    seen = set()
    for row in rows:
        if row.get("error") is not None or (agent is not None and row.get("agent") != agent):
            continue
        if by not in row:
            raise ValueError(f"rows have no column {by!r}; columns: {sorted(row)}")
        seen.add(row[by])
        if row[by] in sides and row.get(metric) is not None:
            key = (row.get("task_id"), row.get("seed"), row.get("agent"))
            sides[row[by]][key] = float(row[metric])
    keys = sorted(set(sides[treatment]) & set(sides[control]), key=repr)
    if not keys:
        raise ValueError(
            f"no (task, seed, agent) has rows under both {by}={treatment!r} and {by}={control!r}; "
            f"values of {by} seen: {sorted(seen, key=repr)}"
        )
    diffs = [sides[treatment][k] - sides[control][k] for k in keys]
    mean = sum(diffs) / len(diffs)
    var = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) if len(diffs) > 1 else 0.0
    stderr = math.sqrt(var / len(diffs))
    t, c = [sides[treatment][k] for k in keys], [sides[control][k] for k in keys]
    if all(v in (0.0, 1.0) for v in (*t, *c)):
        r = paired_binary([int(v) for v in t], [int(v) for v in c])
        if len(diffs) < MIN_PAIRS_FOR_INTERVAL:
            return Effect(mean, stderr, len(diffs), p_value=r.p_value, method="exact McNemar; no interval")
        return Effect(mean, stderr, len(diffs), r.low, r.high, r.p_value, "Newcombe, exact McNemar")
    if len(diffs) < 2 or stderr == 0:
        return Effect(mean, stderr, len(diffs), method="none (too few pairs or no spread)")
    q = t975(len(diffs) - 1)
    return Effect(mean, stderr, len(diffs), mean - q * stderr, mean + q * stderr, method="Student t")
