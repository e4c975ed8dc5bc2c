"""Ceiling: the best expected return any policy can reach through a harness.

For one task seed the task is deterministic, so the ceiling is the best return over action
sequences. :func:`seed_ceiling` finds it exactly by depth-first search over the legal actions
the harness can express (its tool is shown and its formatted text parses back to it within
``max_action_chars``), within the harness's step budget, restoring the task state after each
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

import numpy as np

from harness_gym.analysis.stats import mean_ci
from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import Harness
from harness_gym.core.presets import resolve_harness
from harness_gym.core.task import Action, Task

HarnessLike = Harness | str | Mapping[str, Any] | Path


class SearchTooBig(Exception):
    """The exact search would expand more states than its limit."""


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
    try:
        env.reset(seed=seed)
        try:
            return _search(env, node_limit), "exact"
        except SearchTooBig:
            return _oracle_return(env, seed), "oracle"
    finally:
        env.close()  # a browser task's env holds a Chromium: closed here, not left to the collector


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


class ValueSearch:
    """Exact best return from the task's current state, through one bound harness.

    Depth-first over the legal actions the harness can express, restoring state after each
    branch and memoizing (state digest, steps left). Raises :class:`SearchTooBig` past
    ``node_limit`` expanded states.
    """

    def __init__(self, env: HarnessEnv, node_limit: int = 2_000) -> None:
        self.task, self.bound = env.task, env.bound
        self.node_limit = node_limit
        self.nodes = 0
        self.memo: dict[tuple[str, int], float] = {}
        self.best_possible = float(self.task.max_return)

    def actions(self) -> list[Action]:
        """Legal actions the harness can express, the oracle's first (reachable success is found fast).

        An action counts only if its formatted text parses back to it within the harness's
        limits: no policy can take the others through this harness.
        """
        actions = [a for a in self.task.legal_actions() if self.bound.expressible(a)]
        try:
            first = self.task.oracle()
        except Exception:  # noqa: BLE001 - the oracle is only an ordering hint here
            return actions
        return sorted(actions, key=lambda a: a != first)

    def q_value(self, action: Action, steps_left: int) -> float:
        """Reward of ``action`` now plus the best return after it, with ``steps_left`` in all."""
        if self.task.check(action) is not None:
            return 0.0
        snapshot = self.task.snapshot()
        result = self.task.step(action)
        future = 0.0 if result.terminated else self.value(steps_left - 1)
        self.task.restore(snapshot)
        return float(result.reward) + future

    def value(self, steps_left: int) -> float:
        """The best return from the current state with ``steps_left`` steps (memoized)."""
        if steps_left <= 0:
            return 0.0
        key = (self.task.digest(), steps_left)
        if key in self.memo:
            return self.memo[key]
        self.nodes += 1
        if self.nodes > self.node_limit:
            raise SearchTooBig
        value = self.combine(steps_left)
        self.memo[key] = value
        return value

    def combine(self, steps_left: int) -> float:
        """The state's value from its actions' Q values: the best one (stop at the maximum)."""
        value = 0.0
        for action in self.actions():
            value = max(value, self.q_value(action, steps_left))
            if value >= self.best_possible:
                break
        return value


class SoftValueSearch(ValueSearch):
    """Soft (KL-regularized) values against a uniform reference over the exposed actions.

    ``V(s) = beta * log mean_a exp(Q(s,a) / beta)`` and ``Q(s,a) = r + V(s')``: the action
    values of KL-regularized control, for which ``pi* ∝ pi_ref exp(Q / beta)`` holds exactly in
    sequential tasks too. As ``beta -> 0`` they approach the hard values of :class:`ValueSearch`.
    """

    def __init__(self, env: HarnessEnv, beta: float, node_limit: int = 20_000) -> None:
        super().__init__(env, node_limit)
        self.beta = beta

    def combine(self, steps_left: int) -> float:
        """The soft value: ``beta * log mean_a exp(Q(s,a) / beta)`` over the exposed actions."""
        q = np.array([self.q_value(a, steps_left) for a in self.actions()])
        if q.size == 0:
            return 0.0
        return float(self.beta * (np.logaddexp.reduce(q / self.beta) - np.log(q.size)))


def _search(env: HarnessEnv, node_limit: int) -> float:
    return ValueSearch(env, node_limit).value(env.budget)


def _oracle_return(env: HarnessEnv, seed: int) -> float:
    env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, _ = env.step(env.oracle_action())
        total += float(reward)
        done = terminated or truncated
    return total
