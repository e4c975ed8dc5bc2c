"""Ceiling: the best expected return any policy can reach through a harness.

For one task seed the task is deterministic, so the ceiling is the best return over action
sequences. :func:`seed_ceiling` finds it exactly by depth-first search over the legal actions
the harness exposes, within the harness's step budget, restoring the task state after each
branch (``Task.snapshot``/``restore``) and memoizing states by digest. The oracle's action is
tried first, so a reachable success is found in as many steps as the oracle takes; only when
success is out of reach (a dropped tool, a cut budget) does the search run exhaustively. If
it exceeds ``node_limit``, the oracle written through the harness gives the value instead (a
lower bound), and the method says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_gym.analysis.stats import mean_ci
from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import Harness
from harness_gym.core.presets import resolve_harness
from harness_gym.core.task import Action, Task

HarnessLike = Harness | str | Mapping[str, Any] | Path


class _SearchTooBig(Exception):
    pass


@dataclass
class CeilingEstimate:
    """Ceiling of one (task, harness) over seeds, with a 95% interval."""

    task_id: str
    harness_id: str
    seeds: list[int]
    values: list[float]
    methods: list[str]
    mean: float = field(init=False)
    low: float = field(init=False)
    high: float = field(init=False)

    def __post_init__(self) -> None:
        self.mean, self.low, self.high = mean_ci(self.values)

    @property
    def exact(self) -> bool:
        return all(m == "exact" for m in self.methods)


def seed_ceiling(
    task: str | type[Task], harness: HarnessLike, seed: int, node_limit: int = 2_000
) -> tuple[float, str]:
    """The best return reachable from ``reset(seed)`` through ``harness``: (value, method).

    ``method`` is ``"exact"`` (search finished) or ``"oracle"`` (search too big; the oracle
    written through the harness gives a lower bound).
    """
    from harness_gym.core.registry import get_task

    task_cls = get_task(task) if isinstance(task, str) else task
    env = HarnessEnv(task_cls, resolve_harness(harness))
    env.reset(seed=seed)
    try:
        return _search(env, node_limit), "exact"
    except _SearchTooBig:
        return _oracle_return(env, seed), "oracle"


def ceiling(
    task: str | type[Task],
    harness: HarnessLike,
    seeds: Iterable[int] = range(20),
    node_limit: int = 2_000,
) -> CeilingEstimate:
    """Ceiling over ``seeds`` with a 95% interval (Wilson for binary success rewards)."""
    from harness_gym.core.registry import get_task

    task_cls = get_task(task) if isinstance(task, str) else task
    harness = resolve_harness(harness)
    seeds = list(seeds)
    results = [seed_ceiling(task_cls, harness, s, node_limit) for s in seeds]
    return CeilingEstimate(
        task_cls.task_id, harness.id, seeds, [v for v, _ in results], [m for _, m in results]
    )


def _search(env: HarnessEnv, node_limit: int) -> float:
    task, bound = env.task, env.bound
    memo: dict[tuple[str, int], float] = {}
    nodes = 0
    best_possible = float(task.max_return)

    def ordered(actions: list[Action]) -> list[Action]:
        try:
            first = task.oracle()
        except Exception:  # noqa: BLE001 - an oracle is a hint here, not a requirement
            return actions
        return sorted(actions, key=lambda a: a != first)

    def best(steps_left: int) -> float:
        nonlocal nodes
        if steps_left == 0:
            return 0.0
        key = (task.digest(), steps_left)
        if key in memo:
            return memo[key]
        nodes += 1
        if nodes > node_limit:
            raise _SearchTooBig
        value = 0.0
        for action in ordered([a for a in task.legal_actions() if bound.exposes(a)]):
            if task.check(action) is not None:
                continue
            snapshot = task.snapshot()
            result = task.step(action)
            future = 0.0 if result.terminated else best(steps_left - 1)
            task.restore(snapshot)
            value = max(value, float(result.reward) + future)
            if value >= best_possible:
                break
        memo[key] = value
        return value

    return best(env.budget)


def _oracle_return(env: HarnessEnv, seed: int) -> float:
    env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, _ = env.step(env.oracle_action())
        total += float(reward)
        done = terminated or truncated
    return total
