"""Run an agent through a harness env, one episode at a time, and record one row per episode.

Every :class:`EpisodeResult` holds what is needed to replay its episode: the task id, the
harness spec and id, and the seed passed to ``reset``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym

from harness_gym.rollout.agent import Agent


@dataclass
class EpisodeResult:
    """One episode's record."""

    task_id: str
    harness_id: str
    harness: dict[str, Any]
    seed: int
    agent: str
    episode_return: float
    success: bool
    steps: int
    invalid_actions: int
    wall_time: float
    env_id: str = ""
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def episode_result(
    env: gym.Env,
    info: dict[str, Any],
    seed: int,
    agent: str,
    episode_return: float,
    wall_time: float,
    extra: dict[str, Any] | None = None,
) -> EpisodeResult:
    """The record of an episode that ended with ``info`` (its last step's info)."""
    return EpisodeResult(
        task_id=info["task_id"],
        harness_id=info["harness_id"],
        harness=dict(info["harness"]),
        seed=seed,
        agent=agent,
        episode_return=episode_return,
        success=bool(info["success"]),
        steps=int(info["step"]),
        invalid_actions=int(info["invalid_actions"]),
        wall_time=wall_time,
        env_id=env.spec.id if env.spec is not None else "",
        extra=dict(extra or {}),
    )


def run_episode(env: gym.Env, agent: Agent, seed: int, agent_name: str = "") -> EpisodeResult:
    """Play one episode from ``reset(seed=seed)`` to termination or truncation."""
    start = time.perf_counter()
    agent.reset(seed)
    observation, info = env.reset(seed=seed)
    total = 0.0
    done = False
    while not done:
        observation, reward, terminated, truncated, info = env.step(agent.act(observation, info))
        total += float(reward)
        done = terminated or truncated
    name = agent_name or getattr(agent, "name", type(agent).__name__)
    return episode_result(env, info, seed, name, total, time.perf_counter() - start)


def evaluate(
    env: gym.Env, agent: Agent, seeds: Iterable[int], agent_name: str = ""
) -> Iterator[EpisodeResult]:
    """Yield one result per seed."""
    for seed in seeds:
        yield run_episode(env, agent, int(seed), agent_name)
