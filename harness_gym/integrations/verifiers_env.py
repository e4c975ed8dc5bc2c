"""verifiers: every harness env as a verifiers v1 taskset, an installable environment module.

verifiers 0.4 (``verifiers/v1/taskset.py``, ``task.py``, ``env.py``) splits an environment into
a *taskset* (config in, typed tasks out), an *env* whose ``run(task, agents)`` plays one episode,
and the *agent harness* that runs the model's chat loop. Its own multi-turn tasksets
(``verifiers/v1/tasksets/textarena/taskset.py``) step the engine host-side, as the run's user:
each reply advances the game, the next observation comes back as the user turn. This module
does the same with a harness env, and nothing is re-wrapped:

* :class:`HarnessGymTaskset` yields one :class:`HarnessGymTask` per (task, harness, seed); its
  ``system_prompt`` is the harness's system prompt (which holds the tool schema as the harness
  writes it: text channel) and its ``prompt`` the harness's chat after it (worked examples as
  earlier turns, then the first observation: :func:`harness_gym.llm.chat.chat_messages`);
* :class:`HarnessGymEnv` rebuilds the env, resets it on the task's seed (the state digest is
  checked against the task's), then hands each reply, exactly as the model wrote it, to
  :meth:`HarnessEnv.step` and answers the observation exactly as the harness rendered it, until
  the episode ends; the episode's return is the ``harness_return`` reward (success, steps and
  invalid actions are metrics, the last ``info`` is in ``trace.info["harness_gym"]``);
* :class:`HarnessGymChat` is verifiers' tool-less chat loop (``verifiers/v1/harnesses/null``),
  the taskset's default agent harness: the model gets no tool besides what the harness's own
  prompt describes (verifiers' default, ``bash``, would add a shell tool).

Select it as ``vf-eval harness-gym-verifiers`` (the taskset id; the top-level module
``harness_gym_verifiers`` re-exports this one)
or in Python with :func:`load_environment`. verifiers' chat loop takes tools only from MCP
servers that run the calls themselves, so native-channel harnesses are refused (the harness's
text channel writes the same tools in its prompt). Extra ``verifiers``: its own venv,
``.venv-verifiers`` (verifiers pins ``mcp==2.0.0``; openenv's fastmcp needs ``mcp<2``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import Field, field_validator

from harness_gym.core.env import HarnessEnv
from harness_gym.core.registry import make_env
from harness_gym.llm.chat import chat_messages

try:
    import verifiers.v1 as vf
    from verifiers.v1.harnesses.null.harness import NullHarness
except ImportError as err:  # pragma: no cover - the message names the extra
    raise ImportError(
        "harness_gym.integrations.verifiers_env needs verifiers: pip install 'harness-gym[verifiers]' "
        "(its own venv: verifiers pins mcp==2.0.0; see docs/integrations.md)"
    ) from err

__all__ = [
    "HarnessGymChat",
    "HarnessGymData",
    "HarnessGymEnv",
    "HarnessGymEnvConfig",
    "HarnessGymTask",
    "HarnessGymTaskset",
    "HarnessGymTasksetConfig",
    "load_environment",
]

#: The taskset id (``--env.taskset.id``): verifiers imports it as the top-level ``harness_gym_verifiers``.
TASKSET_ID = "harness-gym-verifiers"
REWARD = "harness_return"


class HarnessGymTasksetConfig(vf.TasksetConfig):
    """Which (task, harness, seed) episodes the taskset yields: tasks outer, seeds inner."""

    tasks: list[str] = Field(default_factory=lambda: ["ClickButton"])
    """Task ids (any family: web, browser, terminal)."""
    harnesses: list[str | dict[str, Any]] = Field(default_factory=lambda: ["Json"])
    """Preset names, preset ids or harness specs (dicts); text-channel harnesses only."""
    seeds: list[int] = Field(default_factory=lambda: [0])

    @field_validator("tasks", "harnesses", "seeds")
    @classmethod
    def _not_empty(cls, value: list[Any]) -> list[Any]:
        if not value:
            raise ValueError("needs at least one entry")
        return value


class HarnessGymData(vf.TaskData):
    """One episode's identity: enough to rebuild the env and check it is the same instance."""

    task_id: str
    harness: dict[str, Any]
    """The harness spec (``Harness.to_dict()``)."""
    harness_id: str
    seed: int
    state_digest: str
    tools: list[dict[str, Any]]
    """The harness's OpenAI function tools, for the record (the prompt already describes them)."""


class HarnessGymTask(vf.Task[HarnessGymData, vf.State, vf.TaskConfig]):
    @property
    def key(self) -> str:
        return f"{self.data.task_id}/{self.data.harness_id}/{self.data.seed}"


def _text_env(task_id: str, harness: str | Mapping[str, Any]) -> HarnessEnv:
    env = make_env(task_id, dict(harness) if isinstance(harness, Mapping) else harness)
    if env.harness.tool_channel == "native":
        env.close()
        raise ValueError(
            f"harness {env.harness.id} uses the native tool channel: verifiers' chat loop takes tools "
            "only from MCP servers that run the calls themselves; use its text channel "
            "(tool_channel: text), which writes the same tools in the system prompt"
        )
    return env


def task_data(env: HarnessEnv, seed: int) -> HarnessGymData:
    """The task for ``env`` on ``seed``: the harness's system prompt and chat, as it renders them."""
    observation, info = env.reset(seed=int(seed))
    chat = chat_messages(env.harness, info["system_prompt"], observation, (), info["examples"])
    return HarnessGymData(
        id=f"{info['task_id']}/{info['harness_id']}/{int(seed)}",
        name=f"{info['task_id']}-{info['harness_id']}#{int(seed)}",
        system_prompt=chat[0]["content"],
        prompt=chat[1:],
        task_id=info["task_id"],
        harness=json.loads(json.dumps(info["harness"])),
        harness_id=info["harness_id"],
        seed=int(seed),
        state_digest=info["state_digest"],
        tools=json.loads(json.dumps(info["tools"])),
    )


class HarnessGymTaskset(vf.Taskset[HarnessGymTask, HarnessGymTasksetConfig]):
    """Every (task, harness, seed) of the config as a verifiers task."""

    def load(self) -> Iterator[HarnessGymTask]:
        for task_id in self.config.tasks:
            for harness in self.config.harnesses:
                env = _text_env(task_id, harness)
                try:
                    for seed in self.config.seeds:
                        yield HarnessGymTask(task_data(env, seed), self.config.task)
                finally:
                    env.close()


def _raw_reply(segment: Any) -> str:
    """The model's last reply exactly as written (``Segment.last_reply`` strips it)."""
    for message in reversed(segment.messages):
        if isinstance(message, vf.AssistantMessage):
            return message.content or ""
    return ""


def _jsonable(info: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(info, default=list))


class HarnessGymEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class HarnessGymEnv(vf.Env[HarnessGymEnvConfig]):
    """The harness env plays the user: each reply is one env step, each observation a user turn."""

    async def run(self, task: HarnessGymTask, agents: vf.Agents) -> None:
        data = task.data
        env = make_env(data.task_id, data.harness)
        try:
            _, info = env.reset(seed=data.seed)
            if info["state_digest"] != data.state_digest:
                raise RuntimeError(
                    f"{data.task_id} seed {data.seed} built another task instance than the taskset "
                    "recorded (state digest differs): the task or harness-gym changed since load()"
                )
            total, steps, replies = 0.0, 0, []
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()  # the prompt (first observation) opens
                while not segment.terminated:
                    reply = _raw_reply(segment)
                    replies.append(reply)
                    observation, reward, terminated, truncated, info = env.step(reply)
                    total += float(reward)
                    steps += 1
                    if terminated or truncated:
                        break
                    segment = await interaction.turn(observation)
            trace = interaction.trace
            trace.record_reward(REWARD, total, 1.0)
            trace.record_metrics(
                {
                    "success": float(bool(info.get("success"))),
                    "steps": float(steps),
                    "invalid_actions": float(info.get("invalid_actions", 0)),
                }
            )
            trace.info["harness_gym"] = {"replies": replies, "info": _jsonable(info)}
        finally:
            env.close()


class HarnessGymChat(NullHarness):
    """verifiers' tool-less chat loop, the taskset's default agent harness (no added shell tool)."""


def load_environment(
    tasks: list[str] | None = None,
    harnesses: list[str | dict[str, Any]] | None = None,
    seeds: list[int] | None = None,
    **env_config: Any,
) -> HarnessGymEnv:
    """A verifiers env over ``tasks`` x ``harnesses`` x ``seeds`` (``env_config``: more EnvConfig fields)."""
    from verifiers.v1.utils.loaders import load_environment as vf_load_environment

    taskset: dict[str, Any] = {"id": TASKSET_ID}
    for name, value in (("tasks", tasks), ("harnesses", harnesses), ("seeds", seeds)):
        if value is not None:
            taskset[name] = list(value)
    config = HarnessGymEnvConfig.model_validate({**env_config, "taskset": taskset})
    return vf_load_environment(config)  # type: ignore[return-value]
