"""SampleHarness: draw the env's harness from a HarnessSpace (or a list of harnesses).

The draw is a pure function of the *harness seed* and, with ``per="reset"``, the episode's
task seed, so every (task seed, harness seed) pair replays exactly. ``info`` records the
harness seed and the factor levels drawn; the spec and id are in ``info["harness"]`` and
``info["harness_id"]`` as always. Perturbation wrappers apply on top of the drawn harness.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from harness_gym.core.env import HarnessRequest
from harness_gym.core.harness import Harness
from harness_gym.core.space import HarnessSpace
from harness_gym.wrappers.harness_wrapper import HarnessWrapper


class SampleHarness(HarnessWrapper):
    """Draw a harness at each reset (``per="reset"``) or once for the env (``per="env"``).

    The draw lives in the wrapper; the env it wraps keeps its own harness. Under several
    samplers the outermost draws (the inner ones' draws are not used).
    """

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
        self.drawn: Harness | None = None
        self._fixed = self._draw([self.harness_seed]) if per == "env" else None

    def _source(self, seed: int | None) -> Harness | None:
        """The harness of the episode on ``seed`` (``None``: a preview, no new draw)."""
        if self._fixed is not None:
            self.drawn = self._fixed
            return self._fixed
        if seed is None:
            return self.drawn
        return self._draw([self.harness_seed, seed])

    def harness_request(self, request: HarnessRequest) -> HarnessRequest:
        if request.source is not None:  # a sampler further out already draws
            return request
        return dataclasses.replace(request, source=self._source)

    def _draw(self, seed: Sequence[int]) -> Harness:
        if isinstance(self.space, HarnessSpace):
            drawn = self.space.sample(seed)
        else:
            drawn = self.space[int(np.random.default_rng(seed).integers(len(self.space)))]
        self.drawn = drawn  # type: ignore[assignment]
        return drawn

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(**kwargs)
        info["harness_seed"] = self.harness_seed
        if isinstance(self.space, HarnessSpace) and self.drawn is not None:
            info["harness_levels"] = self.space.levels_of(self.drawn)
        return obs, info
