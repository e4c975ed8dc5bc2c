"""Run an agent through a harness env, one episode at a time, and record one row per episode.

Every :class:`EpisodeResult` holds what is needed to replay its episode: the task id, the
harness spec and id, and the seed passed to ``reset``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import gymnasium as gym

from harness_gym.rollout.agent import Agent
from harness_gym.rollout.trajectory import Recorder, count_parse, parse_counts


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
    #: Parse status -> count over the episode's attempted actions (:mod:`harness_gym.core.parse_status`).
    parse_status: dict[str, int] = field(default_factory=dict)
    #: The recorded trajectory (:mod:`harness_gym.rollout.trajectory`), when one was asked for.
    trajectory: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as a row (without the trajectory, which is stored beside the rows)."""
        out = asdict(replace(self, trajectory=None))
        del out["trajectory"]
        return out


def episode_result(
    env: gym.Env,
    info: dict[str, Any],
    seed: int,
    agent: str,
    episode_return: float,
    wall_time: float,
    extra: dict[str, Any] | None = None,
    parse_failures: dict[str, int] | None = None,
    trajectory: dict[str, Any] | None = None,
) -> EpisodeResult:
    """The record of an episode that ended with ``info`` (its last step's info)."""
    extra = dict(extra or {})
    steps = int(info["step"])
    return EpisodeResult(
        task_id=info["task_id"],
        harness_id=info["harness_id"],
        harness=dict(info["harness"]),
        seed=seed,
        agent=agent,
        episode_return=episode_return,
        success=bool(info["success"]),
        steps=steps,
        invalid_actions=int(info["invalid_actions"]),
        wall_time=wall_time,
        env_id=env.spec.id if env.spec is not None else "",
        extra=extra,
        parse_status=parse_counts(parse_failures or {}, steps, extra.get("truncated_replies") or 0),
        trajectory=trajectory,
    )


def run_episode(
    env: gym.Env, agent: Agent, seed: int, agent_name: str = "", record: bool = False
) -> EpisodeResult:
    """Play one episode from ``reset(seed=seed)`` to termination or truncation.

    With ``record=True`` the result carries the episode's trajectory (:class:`Recorder`).
    """
    start = time.perf_counter()
    agent.reset(seed)
    observation, info = env.reset(seed=seed)
    total = 0.0
    done = False
    failed: dict[str, int] = {}
    recorder = Recorder(env, observation, info) if record else None
    while not done:
        action = agent.act(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        done = terminated or truncated
        if info.get("error_kind") is not None:
            count_parse(failed, info)
        if recorder is not None:
            recorder.step(agent, action, observation, reward, terminated, truncated, info)
    name = agent_name or getattr(agent, "name", type(agent).__name__)
    trajectory = recorder.finish(info, total) if recorder is not None else None
    return episode_result(env, info, seed, name, total, time.perf_counter() - start, None, failed, trajectory)


def evaluate(
    env: gym.Env, agent: Agent, seeds: Iterable[int], agent_name: str = ""
) -> Iterator[EpisodeResult]:
    """Yield one result per seed."""
    for seed in seeds:
        yield run_episode(env, agent, int(seed), agent_name)
