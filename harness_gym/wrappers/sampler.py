"""SampleHarness: draw the env's harness from a HarnessSpace (or a list of harnesses).

The draw is a pure function of the *harness seed* and, with ``per="reset"``, the episode's
task seed, so every (task seed, harness seed) pair replays exactly. ``info`` records the
harness seed and the factor levels drawn; the spec and id are in ``info["harness"]`` and
``info["harness_id"]`` as always. Perturbation wrappers apply on top of the drawn harness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from harness_gym.core.env import unwrap_harness_env
from harness_gym.core.harness import Harness
from harness_gym.core.space import HarnessSpace


class SampleHarness(gym.Wrapper):
    """Draw a harness at each reset (``per="reset"``) or once for the env (``per="env"``)."""

    def __init__(
        self,
        env: gym.Env,
        space: HarnessSpace | Sequence[Harness],
        harness_seed: int = 0,
        per: str = "reset",
    ) -> None:
        super().__init__(env)
        if per not in ("reset", "env"):
            raise ValueError(f"per must be 'reset' or 'env', got {per!r}")
        if not isinstance(space, HarnessSpace):
            space = list(space)
            if not space or not all(isinstance(h, Harness) for h in space):
                raise TypeError("space must be a HarnessSpace or a non-empty list of Harness objects")
        self.space = space
        self.harness_seed = int(harness_seed)
        self.per = per
        base = unwrap_harness_env(env, "harness wrappers")
        if per == "env":
            fixed = self._draw([self.harness_seed])
            base.set_harness_source(lambda _seed: fixed)
        else:
            base.set_harness_source(lambda seed: self._draw([self.harness_seed, seed]))

    def _draw(self, seed: Sequence[int]) -> Harness:
        if isinstance(self.space, HarnessSpace):
            drawn = self.space.sample(seed)
        else:
            drawn = self.space[int(np.random.default_rng(seed).integers(len(self.space)))]
        self.drawn: Harness = drawn  # type: ignore[assignment]
        return self.drawn

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        info["harness_seed"] = self.harness_seed
        if isinstance(self.space, HarnessSpace):
            info["harness_levels"] = self.space.levels_of(self.drawn)
        return obs, info
