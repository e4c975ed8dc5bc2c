"""Paired effects over multi-agent sweep rows, e.g. what delegating or showing hints changes.

Rows of :func:`~harness_gym.multiagent.sweep.run_multiagent_sweep` are paired by
``(task_id, seed, agent)``: the same agent on the same task instance under two conditions
(two policies, or two levels of a channel factor). The effect is the mean of the paired
differences, treatment minus control, with its standard error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Effect:
    """Mean paired difference (treatment - control), its standard error and the pair count."""

    mean: float
    stderr: float
    pairs: int


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
    return Effect(mean, math.sqrt(var / len(diffs)), len(diffs))
