"""Many episodes in flight: each one a stream that sends its next request when its last reply
arrives, or (``schedule="rounds"``) all of them stepped together, round after round.

:func:`run_batched` keeps up to ``in_flight`` episodes running, each in its own env. How an
agent is asked depends on what it offers:

- a *streaming* agent (``submit(observation, info) -> Future`` and ``receive(result) -> str``,
  such as :class:`~harness_gym.llm.agent.LLMAgent` on a server backend) gets its request sent
  as soon as its episode needs an action; the runner steps whichever episode's reply comes
  back first. No episode waits for another's slow request (the server batches continuously).
- a *batched* agent (a static ``act_batch(agents, observations, infos)``, such as the in-process
  transformers backend's one ``generate``) is asked together with every other episode of the
  same agent class that is waiting for an action;
- any other agent acts one at a time.

With ``schedule="rounds"`` every streaming request of a round is sent, then all of them are
awaited before any episode steps (the old barrier; kept to measure what streams save). Which
reply an episode gets never depends on the schedule: a request's seed comes from the episode
seed and the step, and the cache keys what was asked, not when. All env work (reset, step,
close) runs on the calling thread. ``RolloutStats.env_seconds`` (reset and step) is measured
against the wall.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from harness_gym.rollout.episode import EpisodeResult, episode_result
from harness_gym.rollout.trajectory import Recorder, count_parse

SCHEDULES = ("streams", "rounds")


@dataclass
class Episode:
    """One episode to run: how to get its env and agent, and its seed."""

    make_env: Callable[[], gym.Env]
    make_agent: Callable[[gym.Env], Any]
    seed: int
    agent_name: str = ""
    key: Any = None  # returned with the result, e.g. the sweep cell
    #: Record the episode's trajectory (:mod:`harness_gym.rollout.trajectory`) in its result.
    record: bool = False


@dataclass
class RolloutStats:
    """Where a rollout's time went."""

    wall_seconds: float = 0.0
    env_seconds: float = 0.0
    agent_seconds: float = 0.0
    #: Times the runner asked agents (a streams run: each wait for the first reply back).
    rounds: int = 0
    steps: int = 0
    episodes: int = 0
    #: Most requests of streaming agents in flight at once.
    peak_in_flight: int = 0

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
    failed: dict[str, int] | None = None
    recorder: Recorder | None = None


Outcome = tuple[Episode, EpisodeResult | None, BaseException | None]


def streams(agent: Any) -> bool:
    """Whether ``agent`` can be asked without waiting (``submit`` / ``receive``)."""
    submit, receive = getattr(agent, "submit", None), getattr(agent, "receive", None)
    return callable(submit) and callable(receive) and bool(getattr(agent, "streams", True))


def run_batched(
    episodes: Sequence[Episode],
    in_flight: int = 8,
    on_result: Callable[[Episode, EpisodeResult | None, BaseException | None], None] | None = None,
    stats: RolloutStats | None = None,
    schedule: str = "streams",
) -> list[Outcome]:
    """Run every episode; return ``(episode, result, error)`` in the order they finished.

    An exception raised by an env or agent ends that episode only (``error`` is set and
    ``result`` is None); the others go on. Each env is closed when its episode ends.
    ``on_result`` is called as each one finishes. ``schedule``: ``"streams"`` (each episode
    advances when its own reply is back) or ``"rounds"`` (every episode waits for the
    slowest request of the round).
    """
    if in_flight < 1:
        raise ValueError(f"in_flight must be >= 1, got {in_flight}")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    stats = stats if stats is not None else RolloutStats()
    queue = list(episodes)[::-1]
    ready: list[_Running] = []  # episodes that need an action
    pending: dict[Future, _Running] = {}  # streaming requests on their way
    out: list[Outcome] = []
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

    def step(slot: _Running, action: Any) -> None:
        """Step ``slot`` with ``action`` (or end it with the agent's exception)."""
        if isinstance(action, BaseException):
            finish(slot.episode, None, action, slot.env)
            return
        try:
            t = time.perf_counter()
            slot.observation, reward, terminated, truncated, slot.info = slot.env.step(action)
            stats.env_seconds += time.perf_counter() - t
            stats.steps += 1
            slot.total += float(reward)
            if slot.info.get("error_kind") is not None:
                if slot.failed is None:
                    slot.failed = {}
                count_parse(slot.failed, slot.info)
            if slot.recorder is not None:
                slot.recorder.step(
                    slot.agent, action, slot.observation, reward, terminated, truncated, slot.info
                )
        except Exception as err:  # noqa: BLE001
            finish(slot.episode, None, err, slot.env)
            return
        if terminated or truncated:
            finish(slot.episode, _result(slot), None, slot.env)
        else:
            ready.append(slot)

    def collect(future: Future) -> None:
        slot = pending.pop(future)
        t = time.perf_counter()
        try:
            action = slot.agent.receive(future.result())
        except Exception as err:  # noqa: BLE001
            action = err
        stats.agent_seconds += time.perf_counter() - t
        step(slot, action)

    while queue or ready or pending:
        while queue and len(ready) + len(pending) < in_flight:
            episode = queue.pop()
            try:
                started = time.perf_counter()
                env = episode.make_env()
                agent = episode.make_agent(env)
                agent.reset(episode.seed)
                t = time.perf_counter()
                observation, info = env.reset(seed=episode.seed)
                stats.env_seconds += time.perf_counter() - t
                slot = _Running(episode, env, agent, observation, info, started)
                if episode.record:
                    slot.recorder = Recorder(env, observation, info)
                ready.append(slot)
            except Exception as err:  # noqa: BLE001 - recorded, the rest go on
                finish(episode, None, err)
        asking, ready[:] = list(ready), []
        waiting = [s for s in asking if not streams(s.agent)]
        t = time.perf_counter()
        for slot in asking:
            if streams(slot.agent):
                try:
                    pending[slot.agent.submit(slot.observation, slot.info)] = slot
                except Exception as err:  # noqa: BLE001
                    step(slot, err)
        stats.peak_in_flight = max(stats.peak_in_flight, len(pending))
        if waiting:  # agents that answer only when asked, on this thread
            stats.rounds += 1
            for slot, action in zip(waiting, _act_all(waiting)):
                step(slot, action)
        stats.agent_seconds += time.perf_counter() - t
        if not pending:
            continue
        if schedule == "rounds":
            stats.rounds += 1
            wait(list(pending))
            for future in list(pending):
                collect(future)
        elif waiting:  # come back for them soon: take only what has arrived
            for future in [f for f in pending if f.done()]:
                collect(future)
        else:
            stats.rounds += 1
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for future in [f for f in pending if f in done]:  # in submission order
                collect(future)
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
        slot.failed,
        slot.recorder.finish(slot.info, slot.total) if slot.recorder is not None else None,
    )
