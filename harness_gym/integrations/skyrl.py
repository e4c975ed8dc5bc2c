"""skyrl-gym: every harness env as a registered skyrl-gym text env, and its dataset rows.

skyrl-gym 0.4 (``skyrl_gym/envs/base_text_env.py``) has text-in / text-out envs: a trainer
builds one per dataset row with ``skyrl_gym.make(env_class, env_config=..., extras=row)``,
calls ``init(prompt)`` for the first chat messages, then ``step(reply)`` until ``done``, each
step answering ``observations`` (chat messages to append), ``reward``, ``done`` and
``metadata``. Here:

* :class:`HarnessTextEnv` (registered as ``harness_gym``) builds the row's (task, harness) env
  and resets it on the row's seed; ``init`` answers the harness's own chat (its system prompt,
  which holds its tool schema on the text channel, its worked examples, the first
  observation: :func:`harness_gym.llm.chat.chat_messages`), and each ``step`` passes the
  reply, unchanged, to :meth:`HarnessEnv.step` and answers the observation exactly as the
  harness rendered it. Nothing is re-wrapped.
* :func:`dataset_rows` writes one row per (env, seed) in skyrl's dataset shape
  (``data_source``, ``prompt``, ``env_class``, ``reward_spec``, ``extra_info``), the harness
  spec and id, task id and seed in ``extra_info``; :func:`harness_gym.integrations.export.write_rows`
  writes them as JSON Lines or Parquet.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from harness_gym.core.env import HarnessEnv, unwrap_harness_env
from harness_gym.core.registry import make_env
from harness_gym.llm.chat import chat_messages

try:
    from skyrl_gym import register, registry
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
except ImportError as err:  # pragma: no cover - the message names the extra
    raise ImportError(
        "harness_gym.integrations.skyrl needs skyrl-gym: pip install 'harness-gym[skyrl]'"
    ) from err

ENV_CLASS = "harness_gym"
DATA_SOURCE = "harness_gym"


class SkyRLRowError(ValueError):
    """A dataset row that does not say which env to build (task, harness, seed)."""


def _jsonable(info: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(info, default=list))


def _row_env(extras: Mapping[str, Any]) -> tuple[HarnessEnv, int]:
    extra = extras.get("extra_info")
    if not isinstance(extra, Mapping):
        raise SkyRLRowError(
            "a harness_gym row needs extra_info with task_id, harness and seed (see dataset_rows)"
        )
    missing = [k for k in ("task_id", "harness", "seed") if k not in extra]
    if missing:
        raise SkyRLRowError(
            f"extra_info lacks {', '.join(missing)}: rows come from integrations.skyrl.dataset_rows"
        )
    harness = extra["harness"]
    if isinstance(harness, str) and harness.lstrip().startswith("{"):
        harness = json.loads(harness)
    return make_env(str(extra["task_id"]), harness), int(extra["seed"])


class HarnessTextEnv(BaseTextEnv):
    """One (task, harness, seed) of a dataset row as a skyrl-gym text env."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.env, self.seed = _row_env(extras or {})
        self.max_turns = self.env.budget if isinstance(self.env.budget, int) else self.max_turns
        self.info: dict[str, Any] = {}
        self.episode_return = 0.0
        self.done = False

    def init(self, prompt: list[dict[str, Any]] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Reset on the row's seed; the chat is the harness's (``prompt`` is checked, not used)."""
        observation, info = self.env.reset(seed=self.seed)
        messages = chat_messages(self.env.harness, info["system_prompt"], observation, (), info["examples"])
        self.turns, self.episode_return, self.done, self.info = 0, 0.0, False, info
        metadata = _jsonable(info)
        metadata["prompt_matches_row"] = prompt is None or list(prompt) == messages
        return messages, metadata

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """The reply, unchanged, through the harness; the next observation as it rendered it."""
        if self.done:
            raise RuntimeError("the episode has ended: skyrl envs take no step after done (build a new one)")
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self.episode_return += float(reward)
        self.done = bool(terminated or truncated)
        self.info = info
        metadata = {
            **_jsonable(info),
            "observation": observation,
            "terminated": bool(terminated),
            "truncated": bool(truncated),
        }
        return BaseTextEnvStepOutput(
            observations=[] if self.done else [{"role": "user", "content": observation}],
            reward=float(reward),
            done=self.done,
            metadata=metadata,
            postprocessed_action=action,
        )

    def get_metrics(self) -> dict[str, Any]:
        return {
            "success": float(bool(self.info.get("success"))),
            "return": self.episode_return,
            "steps": self.turns,
            "invalid_actions": int(self.info.get("invalid_actions", 0)),
        }

    def close(self) -> None:
        self.env.close()


def register_skyrl_env(env_id: str = ENV_CLASS) -> str:
    """Register :class:`HarnessTextEnv` with skyrl-gym under ``env_id`` (again: no-op)."""
    if env_id not in registry:
        register(id=env_id, entry_point=f"{__name__}:HarnessTextEnv")
    return env_id


register_skyrl_env()


def dataset_row(env: Any, seed: int, env_class: str = ENV_CLASS) -> dict[str, Any]:
    """skyrl's dataset row for ``env`` (any harness env) on ``seed``: the prompt as the harness renders it."""
    base = unwrap_harness_env(env, "dataset_row")
    observation, info = base.reset(seed=int(seed))
    prompt = chat_messages(base.harness, info["system_prompt"], observation, (), info["examples"])
    return {
        "data_source": DATA_SOURCE,
        "prompt": prompt,
        "env_class": env_class,
        "reward_spec": {"method": "env", "ground_truth": None},
        "extra_info": {
            "task_id": info["task_id"],
            "harness_id": info["harness_id"],
            "harness": json.dumps(info["harness"], sort_keys=True),
            "seed": int(seed),
            "state_digest": info["state_digest"],
            "tools": json.dumps(info["tools"], ensure_ascii=False),
        },
    }


def dataset_rows(
    envs: Iterable[Any], seeds: Iterable[int], env_class: str = ENV_CLASS
) -> list[dict[str, Any]]:
    """One row per (env, seed), envs outer (write them with :func:`.export.write_rows`)."""
    seeds = list(seeds)
    return [dataset_row(env, s, env_class) for env in envs for s in seeds]
