"""TerminalEnv: a terminal task presented through a harness plus the terminal factors.

It behaves like :class:`~harness_gym.core.env.HarnessEnv` (every generic factor applies) and
adds the terminal factors of :class:`~harness_gym.envs.terminal.options.TerminalOptions`,
which the harness carries (``family_options: {terminal: ...}``; ``terminal=`` sets them on
the given harness, so they are part of ``info["harness_id"]``): the public ``bind_harness``
hook binds presentation into the harness (:class:`TerminalBoundHarness`) and hands the shell
mode to the task.
``info`` adds ``terminal`` (the options), ``terminal_id``, ``command``
(what the sandbox reported for the last action: exit code, timing, the containment rules it
ran into) and, at the end, ``verdict``. ``close()`` kills the sandbox and removes the
episode directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, SupportsFloat

from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import Harness
from harness_gym.core.presets import resolve_harness
from harness_gym.envs.terminal.options import (
    FAMILY,
    TerminalBoundHarness,
    TerminalOptions,
    harness_options,
    with_options,
)
from harness_gym.envs.terminal.task import TerminalTask


class TerminalEnv(HarnessEnv):
    """A terminal task in a bubblewrap sandbox, presented through a harness."""

    def __init__(
        self,
        task: TerminalTask | type[TerminalTask],
        harness: Harness | str | Mapping[str, Any] | Path | None = None,
        render_mode: str | None = None,
        terminal: TerminalOptions | Mapping[str, Any] | None = None,
    ) -> None:
        if terminal is not None and not isinstance(terminal, (TerminalOptions, Mapping)):
            raise TypeError(
                f"terminal options must be a TerminalOptions or a dict, got {type(terminal).__name__}"
            )
        harness = with_options(resolve_harness(harness, family=FAMILY), terminal)
        self.terminal = harness_options(harness)
        if isinstance(task, type):
            task = task(shell=self.terminal.shell)
        if not isinstance(task, TerminalTask):
            raise TypeError(f"TerminalEnv needs a TerminalTask, got {type(task).__name__}")
        super().__init__(task, harness=harness, render_mode=render_mode)

    @property
    def terminal_task(self) -> TerminalTask:
        assert isinstance(self.task, TerminalTask)
        return self.task

    def bind_harness(self, harness: Harness) -> TerminalBoundHarness:
        """The terminal options the harness carries go to the task (shell mode) and into the
        bound harness (presentation)."""
        self.terminal = harness_options(harness)
        self.terminal_task.shell = self.terminal.shell
        return TerminalBoundHarness(harness, self.task.field_names, self.task.action_specs, self.terminal)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        return observation, self._terminal_info(info)

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        before = len(self.terminal_task.history)
        observation, reward, terminated, truncated, info = super().step(action)
        history = self.terminal_task.history
        info = self._terminal_info(info)
        info["command"] = dict(history[-1]) if len(history) > before else None
        if terminated or truncated:
            info["verdict"] = self.terminal_task.verdict
        return observation, reward, terminated, truncated, info

    def _terminal_info(self, info: dict[str, Any]) -> dict[str, Any]:
        info["terminal"] = self.terminal.to_dict()
        info["terminal_id"] = self.terminal.id
        return info


def make_terminal_env(
    task: str | type[TerminalTask] | TerminalTask,
    harness: Harness | str | Mapping[str, Any] | Path | None = None,
    render_mode: str | None = None,
    terminal: TerminalOptions | Mapping[str, Any] | None = None,
) -> TerminalEnv:
    """Build a :class:`TerminalEnv` from a task id (or class / instance) and any harness form."""
    if isinstance(task, str):
        from harness_gym.core.registry import FAMILY_TASKS, family_task
        from harness_gym.envs.terminal.tasks import TERMINAL_TASKS

        known = {t.task_id: t for t in TERMINAL_TASKS}
        if task in known:
            task = known[task]
        elif task in FAMILY_TASKS:  # e.g. a registered Harbor task folder's
            task = family_task(task)
        else:
            raise KeyError(f"unknown terminal task {task!r}; terminal tasks: {sorted(known)}")
    return TerminalEnv(task, harness=harness, render_mode=render_mode, terminal=terminal)
