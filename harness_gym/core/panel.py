"""HarnessPanel: one task instance under K harnesses, stepped as one vector env.

``reset(seed=s)`` resets every member with the *same* seed, so all K envs hold the same task
instance (their ``state_digest`` values agree); ``step(actions)`` takes one action text per
harness. This is the batch shape of group-relative training across harnesses and of paired
comparisons. Members that finish early stay finished (no autoreset): their observation is
kept, their reward is 0, and ``info["active"]`` says which members still run. Reset the panel
for the next task instance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import Harness
from harness_gym.core.task import Task

HarnessLike = Harness | str | Mapping[str, Any] | Path


class HarnessPanel(VectorEnv):
    """K HarnessEnvs over one task, reset with one shared seed and stepped together."""

    metadata = {"autoreset_mode": AutoresetMode.DISABLED}

    def __init__(self, task: str | type[Task], harnesses: Sequence[HarnessLike]) -> None:
        from harness_gym.core.registry import get_task

        task_cls = get_task(task) if isinstance(task, str) else task
        if not harnesses:
            raise ValueError("a harness panel needs at least one harness")
        self.envs = [HarnessEnv(task_cls, h) for h in harnesses]
        self.num_envs = len(self.envs)
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._obs: list[str] = [""] * self.num_envs
        self._active = np.zeros(self.num_envs, dtype=bool)
        self._terminated = np.zeros(self.num_envs, dtype=bool)
        self._truncated = np.zeros(self.num_envs, dtype=bool)

    @property
    def harnesses(self) -> list[Harness]:
        return [env.harness for env in self.envs]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        if seed is None:
            seed = int(np.random.default_rng().integers(0, 2**31 - 1))
        if not isinstance(seed, (int, np.integer)):
            raise TypeError(
                "a HarnessPanel resets every member with one task seed: pass an int, got "
                f"{type(seed).__name__}"
            )
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            self._obs[i], info = env.reset(seed=int(seed), options=options)
            self._merge(infos, info, i)
        self._active[:] = True
        self._terminated[:] = False
        self._truncated[:] = False
        infos["active"] = self._active.copy()
        return tuple(self._obs), infos

    def step(
        self, actions: Sequence[str]
    ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if len(actions) != self.num_envs:
            raise ValueError(f"a panel of {self.num_envs} harnesses needs {self.num_envs} actions")
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            if not self._active[i]:
                continue
            self._obs[i], rewards[i], term, trunc, info = env.step(actions[i])
            self._terminated[i], self._truncated[i] = term, trunc
            self._active[i] = not (term or trunc)
            self._merge(infos, info, i)
        infos["active"] = self._active.copy()
        return tuple(self._obs), rewards, self._terminated.copy(), self._truncated.copy(), infos

    def _merge(self, infos: dict[str, Any], info: Mapping[str, Any], i: int) -> None:
        """Vector-env info convention, with object arrays: harnesses differ in value types."""
        for key, value in info.items():
            if key not in infos:
                infos[key] = np.full(self.num_envs, None, dtype=object)
                infos[f"_{key}"] = np.zeros(self.num_envs, dtype=bool)
            infos[key][i] = value
            infos[f"_{key}"][i] = True

    @property
    def done(self) -> bool:
        """True when every member's episode has ended."""
        return not self._active.any()

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


def make_panel(task: str | type[Task], harnesses: Sequence[HarnessLike]) -> HarnessPanel:
    """One task instance under K harnesses as a vector env (see :class:`HarnessPanel`)."""
    return HarnessPanel(task, harnesses)


__all__ = ["HarnessPanel", "make_panel"]
