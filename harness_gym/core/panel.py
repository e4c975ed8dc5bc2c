"""HarnessPanel: one task instance under K harnesses, stepped as one vector env.

``reset(seed=s)`` resets every member with the *same* seed, so all K envs hold the same task
instance (their ``state_digest`` values agree); ``step(actions)`` takes one action text per
harness. This is the batch shape of group-relative training across harnesses and of paired
comparisons. Members that finish early stay finished (no autoreset): their observation is
kept, their reward is 0, and ``info["active"]`` says which members still run. Reset the panel
for the next task instance.

The member-level methods :meth:`HarnessPanel.reset_members` and
:meth:`HarnessPanel.step_members` are what both views use: this vector env and the PettingZoo
Parallel env of :mod:`harness_gym.multiagent.panel` (one agent per harness).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import Harness
from harness_gym.core.task import Task

HarnessLike = Harness | str | Mapping[str, Any] | Path


@dataclass
class MemberStep:
    """What one member's ``HarnessEnv.step`` returned."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


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
        self._seed_stream = np.random.default_rng()

    @property
    def harnesses(self) -> list[Harness]:
        return [env.harness for env in self.envs]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        member_infos = self.reset_members(seed=seed, options=options)
        infos: dict[str, Any] = {}
        for i, info in enumerate(member_infos):
            self._merge(infos, info, i)
        infos["active"] = self._active.copy()
        return tuple(self._obs), infos

    def reset_members(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Reset every member with one task seed; return each member's info (observations
        are in :attr:`observations`). Without a seed, the next one comes from the panel's
        seed stream (seeded by the last seeded reset), so a seeded run stays reproducible."""
        if seed is None:
            seed = int(self._seed_stream.integers(0, 2**31 - 1))
        elif not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(
                "a HarnessPanel resets every member with one task seed: pass an int, got "
                f"{type(seed).__name__}"
            )
        else:
            self._seed_stream = np.random.default_rng(int(seed))
        infos = []
        for i, env in enumerate(self.envs):
            self._obs[i], info = env.reset(seed=int(seed), options=options)
            infos.append(info)
        self._active[:] = True
        self._terminated[:] = False
        self._truncated[:] = False
        return infos

    @property
    def observations(self) -> tuple[str, ...]:
        """Each member's latest observation (a finished member keeps its last one)."""
        return tuple(self._obs)

    def step(
        self, actions: Sequence[str]
    ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if len(actions) != self.num_envs:
            raise ValueError(f"a panel of {self.num_envs} harnesses needs {self.num_envs} actions")
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        infos: dict[str, Any] = {}
        stepped = self.step_members({i: actions[i] for i in range(self.num_envs) if self._active[i]})
        for i, result in stepped.items():
            rewards[i] = result.reward
            self._merge(infos, result.info, i)
        infos["active"] = self._active.copy()
        return tuple(self._obs), rewards, self._terminated.copy(), self._truncated.copy(), infos

    def step_members(self, actions: Mapping[int, str]) -> dict[int, MemberStep]:
        """Step the members named by index, each with its action text; return their results.

        Every index must be an active member and every action a str; this is checked for
        all of them before any member steps, so a wrong call leaves every episode as it was.
        """
        bad = [i for i in actions if not (isinstance(i, (int, np.integer)) and 0 <= i < self.num_envs)]
        if bad:
            raise ValueError(f"unknown panel member(s) {bad}; members are 0..{self.num_envs - 1}")
        finished = [i for i in actions if not self._active[i]]
        if finished:
            raise ValueError(
                f"panel member(s) {finished} already finished their episode; reset the panel first"
            )
        wrong = {i: type(a).__name__ for i, a in actions.items() if not isinstance(a, str)}
        if wrong:
            raise TypeError(f"panel actions are the agents' output texts (str); got {wrong}")
        results: dict[int, MemberStep] = {}
        for i, action in actions.items():
            obs, reward, term, trunc, info = self.envs[i].step(action)
            self._obs[i] = obs
            self._terminated[i], self._truncated[i] = term, trunc
            self._active[i] = not (term or trunc)
            results[i] = MemberStep(obs, float(reward), bool(term), bool(trunc), info)
        return results

    @property
    def active(self) -> np.ndarray:
        """Which members' episodes still run (a copy)."""
        return self._active.copy()

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


__all__ = ["HarnessPanel", "MemberStep", "make_panel"]
