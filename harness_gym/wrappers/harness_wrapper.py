"""HarnessWrapper: the base of wrappers that change which harness an episode gets.

Gymnasium's convention holds: a wrapper's state lives in the wrapper, and the env it wraps
is unchanged (after ``RestyleTools(env, "xml")``, ``env.reset()`` still writes what ``env``
wrote before). A harness wrapper adds its part to a
:class:`~harness_gym.core.env.HarnessRequest` that travels down in the ``reset`` options;
the HarnessEnv at the bottom builds the episode's harness from it. Within an episode the
wrapped envs share the episode, as with every Gymnasium wrapper.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from harness_gym.core.env import (
    HARNESS_REQUEST,
    HarnessEnv,
    HarnessRequest,
    presented_harness,
    unwrap_harness_env,
)
from harness_gym.core.harness import Harness


class HarnessWrapper(gym.Wrapper):
    """A wrapper that takes part in choosing the harness; subclasses define :meth:`harness_request`."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.harness_env: HarnessEnv = unwrap_harness_env(env, "harness wrappers")
        self._last_seed: int | None = None

    def harness_request(self, request: HarnessRequest) -> HarnessRequest:
        """Add this wrapper's part to the request coming from the wrappers above it."""
        raise NotImplementedError

    @property
    def harness(self) -> Harness:
        """The harness this stack presents: its last episode's, or (before one) a preview."""
        return presented_harness(self, self._last_seed)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        options = dict(options or {})
        options[HARNESS_REQUEST] = self.harness_request(options.get(HARNESS_REQUEST) or HarnessRequest())
        obs, info = self.env.reset(seed=seed, options=options)
        self._last_seed = info.get("seed")
        return obs, info
