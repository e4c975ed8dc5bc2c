"""Terminal tasks in a bubblewrap sandbox (a Terminal-Bench-Lite suite).

``register()`` registers ``harness_gym/Term<Task>-<Preset>-v0`` and ``harness_gym/Term<Task>-v0``
(which takes ``harness=`` and ``terminal=``) with Gymnasium for every task of
:data:`~harness_gym.envs.terminal.tasks.TERMINAL_TASKS`. Registering starts nothing; the
sandbox starts at an env's first reset, and building an env where bubblewrap cannot run
raises :class:`~harness_gym.envs.terminal.sandbox.SandboxUnavailable`. See ``docs/terminal.md``.
"""

from __future__ import annotations

import gymnasium as gym

from harness_gym.core.registry import add_env_spec, add_family_env_ids, env_id, register_family
from harness_gym.envs.terminal.options import SENTINEL, TerminalOptions
from harness_gym.envs.terminal.presets import CODING_PRESETS, TERMINAL_PRESETS
from harness_gym.envs.terminal.sandbox import Sandbox, SandboxLimits, SandboxUnavailable, require_bwrap
from harness_gym.envs.terminal.tasks import TERMINAL_TASKS

ENTRY_POINT = "harness_gym.envs.terminal.env:make_terminal_env"
TERMINAL_TASK_IDS: tuple[str, ...] = tuple(t.task_id for t in TERMINAL_TASKS)


def register(add_to_task_registry: bool = False) -> list[str]:
    """Register every terminal task's Gymnasium ids (idempotent); return them.

    The tasks stay out of ``harness_gym.TASKS`` unless ``add_to_task_registry`` (they need
    bubblewrap and are slower than the pure-Python suite that TASKS lists).
    """
    ids = register_family(TERMINAL_TASKS, ENTRY_POINT, add_to_task_registry)
    coding = []
    for task in TERMINAL_TASKS:  # the coding-harness presets, which only terminal tasks take
        for preset in TERMINAL_PRESETS:
            new_id = env_id(task.task_id, preset)
            if new_id not in gym.registry:
                add_env_spec(new_id, ENTRY_POINT, {"task": task.task_id, "harness": preset})
            coding.append(new_id)
    add_family_env_ids(coding)
    return ids + coding


def is_terminal_task(task_id: str) -> bool:
    return task_id in TERMINAL_TASK_IDS


__all__ = [
    "CODING_PRESETS",
    "ENTRY_POINT",
    "TERMINAL_PRESETS",
    "SENTINEL",
    "TERMINAL_TASKS",
    "TERMINAL_TASK_IDS",
    "Sandbox",
    "SandboxLimits",
    "SandboxUnavailable",
    "TerminalOptions",
    "is_terminal_task",
    "register",
    "require_bwrap",
]
