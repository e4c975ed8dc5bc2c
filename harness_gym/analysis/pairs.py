"""Paired episodes: the same agent, task and seed under two harnesses one factor apart.

Contract 1 (paired episodes) makes ``reset(seed=s)`` build the same task instance under every
harness, so two rows that share agent, task and seed differ only by their harness. A row's
*partners* are those under the harnesses nearest its own: one factor away when the sweep has
such (a flips design always does), else the fewest factors away. The viewer opens a row beside
a partner; the ``pairs`` trajectory policy keeps every episode whose outcome differs from a
partner's (:mod:`harness_gym.rows.trajectories`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def harness_levels(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Each harness name's factor levels (from the rows' ``level_*`` columns)."""
    out: dict[str, dict[str, str]] = {}
    for row in rows:
        name = str(row.get("harness_name"))
        if name not in out:
            out[name] = {k[6:]: str(v) for k, v in row.items() if k.startswith("level_") and v is not None}
    return out


def differing(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    """The factors whose levels differ between two harnesses."""
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def neighbours(levels: Mapping[str, Mapping[str, str]]) -> dict[str, list[str]]:
    """For each harness, the other harnesses the fewest factors away from it (at least one)."""
    names = list(levels)
    out: dict[str, list[str]] = {}
    for name in names:
        distance = {o: len(differing(levels[name], levels[o])) for o in names if o != name}
        near = min((d for d in distance.values() if d > 0), default=None)
        out[name] = [o for o in names if near is not None and distance.get(o) == near]
    return out


def partners(rows: Sequence[Mapping[str, Any]]) -> dict[int, list[int]]:
    """Row index -> the indices of its partners (same agent, task and seed, nearest harnesses)."""
    near = neighbours(harness_levels(rows))
    by_key: dict[tuple[Any, ...], int] = {}
    for row in rows:
        by_key[(row.get("agent"), row.get("task_id"), row.get("seed"), row.get("harness_name"))] = int(
            row["index"]
        )
    out: dict[int, list[int]] = {}
    for row in rows:
        base = (row.get("agent"), row.get("task_id"), row.get("seed"))
        found = (by_key.get((*base, other)) for other in near.get(str(row.get("harness_name")), []))
        out[int(row["index"])] = [i for i in found if i is not None]
    return out


def outcome(row: Mapping[str, Any]) -> bool | None:
    """A row's outcome for pairing (None: the cell crashed)."""
    if row.get("error") is not None or row.get("success") is None:
        return None
    return bool(row["success"])


def keep_for_pairs(rows: Sequence[Mapping[str, Any]], seeds: Sequence[int], n: int = 1) -> set[int]:
    """The rows whose trajectories the ``pairs`` policy keeps: the first ``n`` seeds, and every
    row whose outcome differs from one of its partners' (both sides of the pair)."""
    sample = set(list(seeds)[:n])
    by_index = {int(r["index"]): r for r in rows}
    keep = {i for i, r in by_index.items() if r.get("seed") in sample}
    for index, others in partners(rows).items():
        mine = outcome(by_index[index])
        if mine is None:
            continue
        for other in others:
            theirs = outcome(by_index[other])
            if theirs is not None and theirs != mine:
                keep.update((index, other))
    return keep
