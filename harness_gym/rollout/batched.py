"""Batched rollouts: many episodes in flight, their agents' requests sent together.

:func:`run_batched` keeps up to ``in_flight`` episodes running, each in its own env. Every
round, the agents of all running episodes that have ``act_batch`` (a static method taking
``(agents, observations, infos)``) are asked together, so a language model answers them as
one concurrent HTTP batch or one batched ``generate``; other agents act one at a time. It
measures where the time goes: ``RolloutStats.env_seconds`` (reset and step) against the wall.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from harness_gym.rollout.episode import EpisodeResult, episode_result


@dataclass
class Episode:
    """One episode to run: how to get its env and agent, and its seed."""

    make_env: Callable[[], gym.Env]
    make_agent: Callable[[gym.Env], Any]
    seed: int
    agent_name: str = ""
    key: Any = None  # returned with the result, e.g. the sweep cell


@dataclass
class RolloutStats:
    """Where a batched rollout's time went."""

    wall_seconds: float = 0.0
    env_seconds: float = 0.0
    agent_seconds: float = 0.0
    rounds: int = 0
    steps: int = 0
    episodes: int = 0

    @property
    def env_share(self) -> float:
        return self.env_seconds / self.wall_seconds if self.wall_seconds else 0.0


@dataclass
class _Running:
    episode: Episode
    env: gym.Env
    agent: Any
    observation: str
    info: dict[str, Any]
    start: float
    total: float = 0.0


def run_batched(
    episodes: Sequence[Episode],
    in_flight: int = 8,
    on_result: Callable[[Episode, EpisodeResult | None, BaseException | None], None] | None = None,
    stats: RolloutStats | None = None,
) -> list[tuple[Episode, EpisodeResult | None, BaseException | None]]:
    """Run every episode; return ``(episode, result, error)`` in the order they finished.

    An exception raised by an env or agent ends that episode only (``error`` is set and
    ``result`` is None); the others go on. Each env is closed when its episode ends.
    ``on_result`` is called as each one finishes.
    """
    if in_flight < 1:
        raise ValueError(f"in_flight must be >= 1, got {in_flight}")
    stats = stats if stats is not None else RolloutStats()
    queue = list(episodes)[::-1]
    running: list[_Running] = []
    out: list[tuple[Episode, EpisodeResult | None, BaseException | None]] = []
    wall = time.perf_counter()

    def finish(
        episode: Episode, result: EpisodeResult | None, error: BaseException | None, env: Any = None
    ) -> None:
        if env is not None:
            try:
                env.close()
            except Exception:  # noqa: BLE001 - closing must not lose the result
                pass
        stats.episodes += 1
        out.append((episode, result, error))
        if on_result is not None:
            on_result(episode, result, error)

    while queue or running:
        while queue and len(running) < in_flight:
            episode = queue.pop()
            try:
                started = time.perf_counter()
                env = episode.make_env()
                agent = episode.make_agent(env)
                agent.reset(episode.seed)
                t = time.perf_counter()
                observation, info = env.reset(seed=episode.seed)
                stats.env_seconds += time.perf_counter() - t
                running.append(_Running(episode, env, agent, observation, info, started))
            except Exception as err:  # noqa: BLE001 - recorded, the rest go on
                finish(episode, None, err)
        if not running:
            continue
        t = time.perf_counter()
        actions = _act_all(running)
        stats.agent_seconds += time.perf_counter() - t
        stats.rounds += 1
        still: list[_Running] = []
        for slot, action in zip(running, actions):
            if isinstance(action, BaseException):
                finish(slot.episode, None, action, slot.env)
                continue
            try:
                t = time.perf_counter()
                slot.observation, reward, terminated, truncated, slot.info = slot.env.step(action)
                stats.env_seconds += time.perf_counter() - t
                stats.steps += 1
                slot.total += float(reward)
            except Exception as err:  # noqa: BLE001
                finish(slot.episode, None, err, slot.env)
                continue
            if terminated or truncated:
                finish(slot.episode, _result(slot), None, slot.env)
            else:
                still.append(slot)
        running = still
    stats.wall_seconds += time.perf_counter() - wall
    return out


def _act_all(running: Sequence[_Running]) -> list[Any]:
    """Each running episode's action (or the exception its agent raised)."""
    actions: list[Any] = [None] * len(running)
    groups: dict[Any, list[int]] = {}
    for i, slot in enumerate(running):
        batch = getattr(type(slot.agent), "act_batch", None)
        groups.setdefault(batch if callable(batch) else ("single", i), []).append(i)
    for batch, indices in groups.items():
        if isinstance(batch, tuple):
            slot = running[indices[0]]
            try:
                actions[indices[0]] = slot.agent.act(slot.observation, slot.info)
            except Exception as err:  # noqa: BLE001
                actions[indices[0]] = err
            continue
        try:
            texts = batch(
                [running[i].agent for i in indices],
                [running[i].observation for i in indices],
                [running[i].info for i in indices],
            )
            for i, text in zip(indices, texts):
                actions[i] = text
        except Exception as err:  # noqa: BLE001
            for i in indices:
                actions[i] = err
    return actions


def _result(slot: _Running) -> EpisodeResult:
    record = getattr(slot.agent, "episode_record", None)
    name = slot.episode.agent_name or getattr(slot.agent, "name", type(slot.agent).__name__)
    return episode_result(
        slot.env,
        slot.info,
        slot.episode.seed,
        name,
        slot.total,
        time.perf_counter() - slot.start,
        record() if callable(record) else None,
    )
