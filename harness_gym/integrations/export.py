"""Trajectory export: episodes as the chat transcripts the harness renders, for SFT and offline RL.

An episode is played with the rollout layer (:func:`harness_gym.rollout.run_episode`) through
a recorder that keeps every observation and every reply. Its chat is then built by the
package's one chat renderer (:func:`harness_gym.llm.chat.chat_messages`), so a row holds
exactly what a language model acting through the harness is sent: the harness's system
prompt, its worked examples, the env's observations, and the replies (text in the harness's
own action syntax, or native tool calls on the ``native`` tool channel). Two units:

* ``episode``: one row per episode, the whole transcript (every observation and reply, as
  GRPO training through the harness sees it), ending with the last reply;
* ``step``: one row per step, the messages :class:`~harness_gym.llm.agent.LLMAgent` sends at
  that step (the harness's ``context`` and ``history_window`` factors decide how much of the
  episode they hold) followed by the reply.

Each row also carries ``tools`` (the OpenAI function tools as JSON text on the native
channel, else null: TRL's ``SFTTrainer`` reads this column), ``task_id``, ``harness_id``,
``harness`` (the spec, JSON text), ``seed``, ``reward`` (the episode return), ``success``,
``steps``, ``invalid_actions``, ``agent`` and ``env_id``; step rows add ``step`` and the
step's ``step_reward``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from harness_gym.core.env import HarnessEnv, unwrap_harness_env
from harness_gym.core.tools import ActionError
from harness_gym.llm.chat import Turn, _tool_call_message, chat_messages
from harness_gym.llm.types import ToolCall
from harness_gym.rollout import Agent, EpisodeResult, run_episode

UNITS = ("episode", "step")
FORMATS = ("jsonl", "parquet", "hf")


class ExportError(ValueError):
    """An export request that cannot be met (a unit or format this module does not write)."""


@dataclass
class RecordedStep:
    """One step: the observation shown, the reply sent, and what the env answered."""

    observation: str
    reply: str
    reward: float
    info: dict[str, Any]


@dataclass
class RecordedEpisode:
    """An episode's steps, its record, and what the chat of it needs (prompt, examples, tools)."""

    result: EpisodeResult
    system_prompt: str
    examples: list[dict[str, str]]
    steps: list[RecordedStep] = field(default_factory=list)
    final_observation: str = ""


class Recorder(gym.Wrapper):
    """Keeps every observation the env shows and every reply the agent sends."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.steps: list[RecordedStep] = []
        self.observation = ""
        self.reset_info: dict[str, Any] = {}

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        self.steps, self.observation, self.reset_info = [], observation, info
        return observation, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.steps.append(RecordedStep(self.observation, action, float(reward), info))
        self.observation = observation
        return observation, reward, terminated, truncated, info


def record_episodes(
    env: gym.Env, agent: Agent, seeds: Iterable[int], agent_name: str = ""
) -> Iterator[RecordedEpisode]:
    """Play one episode per seed with ``agent`` (built on ``env``) and record each.

    ``env`` should be the :class:`Recorder`-free env the agent was built on; the recorder is
    put around it here, so the agent acts exactly as it would in ``harness-gym eval``.
    """
    recorder = Recorder(env)
    for seed in seeds:
        result = run_episode(recorder, agent, int(seed), agent_name)
        info = recorder.reset_info
        yield RecordedEpisode(
            result=result,
            system_prompt=info["system_prompt"],
            examples=list(info["examples"]),
            steps=list(recorder.steps),
            final_observation=recorder.observation,
        )


def reply_turn(env: HarnessEnv, observation: str, reply: str) -> Turn:
    """The reply as a chat turn: on the native channel a reply that parses is a tool call."""
    call = None
    if env.harness.tool_channel == "native":
        try:
            action = env.bound.parse(reply)
        except ActionError:
            action = None
        if action is not None and env.bound.exposes(action):
            name, arguments = env.bound.toolbox.call(action)
            call = ToolCall(name, json.dumps(arguments, ensure_ascii=False))
    return Turn(observation, reply, call)


def _reply_messages(turn: Turn, index: int) -> list[dict[str, Any]]:
    """The assistant message of a reply, as :func:`chat_messages` writes an earlier turn."""
    if turn.tool_call is None:
        return [{"role": "assistant", "content": turn.text}]
    return [_tool_call_message(f"call_{index}", turn.tool_call)]


def episode_rows(env: gym.Env, episode: RecordedEpisode, unit: str = "episode") -> list[dict[str, Any]]:
    """The export rows of one recorded episode (played on ``env``, whose harness renders it)."""
    if unit not in UNITS:
        raise ExportError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")
    base = unwrap_harness_env(env, "episode_rows")
    harness = base.harness
    native = harness.tool_channel == "native"
    result = episode.result
    common = {
        "tools": json.dumps(base.bound.openai_tools, ensure_ascii=False) if native else None,
        "task_id": result.task_id,
        "harness_id": result.harness_id,
        "harness": json.dumps(result.harness, sort_keys=True),
        "seed": result.seed,
        "reward": result.episode_return,
        "success": result.success,
        "steps": result.steps,
        "invalid_actions": result.invalid_actions,
        "agent": result.agent,
        "env_id": result.env_id,
    }
    turns = [reply_turn(base, s.observation, s.reply) for s in episode.steps]
    if not turns:
        return []
    if unit == "episode":
        transcript = harness.replace(context="transcript", history_window="all")
        messages = chat_messages(
            transcript, episode.system_prompt, episode.final_observation, turns, episode.examples
        )
        return [{"messages": messages[:-1], **common}]  # the last observation follows no reply
    rows = []
    for k, (step, turn) in enumerate(zip(episode.steps, turns)):
        prompt = chat_messages(harness, episode.system_prompt, step.observation, turns[:k], episode.examples)
        reply = _reply_messages(turn, k)
        rows.append({"messages": prompt + reply, **common, "step": k, "step_reward": step.reward})
    return rows


def write_rows(rows: Sequence[dict[str, Any]], path: Path, fmt: str) -> None:
    """Write rows as JSON Lines (``jsonl``), Parquet (``parquet``) or a ``datasets`` folder (``hf``)."""
    if fmt not in FORMATS:
        raise ExportError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        with path.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        return
    dataset = to_dataset(rows)
    if fmt == "parquet":
        dataset.to_parquet(str(path))
    else:
        dataset.save_to_disk(str(path))


def to_dataset(rows: Sequence[dict[str, Any]]) -> Any:
    """The rows as a Hugging Face ``datasets.Dataset`` (the ``train`` extra provides it)."""
    from datasets import Dataset

    return Dataset.from_list(list(rows))
