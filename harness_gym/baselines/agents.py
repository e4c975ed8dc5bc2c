"""Reference agents: uniform random over legal actions, and the task oracle.

An agent is anything with ``reset(seed)`` and ``act(observation, info) -> str`` (the text it
sends to ``env.step``). Both agents here write through the harness, so they speak whatever
tool style, naming and order the harness uses.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from harness_gym.core.env import unwrap_harness_env
from harness_gym.rollout.agent import Agent

__all__ = ["AGENTS", "Agent", "OracleAgent", "RandomAgent", "make_agent"]


class RandomAgent:
    """Uniform over ``info["legal_actions"]`` (the legal actions as the harness writes them)."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        legal = info.get("legal_actions") or []
        if not legal:
            return ""
        return legal[int(self.rng.integers(len(legal)))]


class OracleAgent:
    """The task oracle's action, computed from true state and written through the harness.

    It needs the env itself (the oracle reads state no observation shows).
    """

    name = "oracle"

    def __init__(self, env: gym.Env) -> None:
        self.env = unwrap_harness_env(env, "OracleAgent")

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return self.env.oracle_action()


AGENTS = ("random", "oracle")


def make_agent(name: str, env: gym.Env, seed: int | None = None) -> Agent:
    """Build a reference agent by name for ``env``."""
    if name == "random":
        return RandomAgent(seed)
    if name == "oracle":
        return OracleAgent(env)
    raise ValueError(f"unknown agent {name!r}; available agents: {list(AGENTS)}")
