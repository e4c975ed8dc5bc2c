"""Terminal tasks in a bubblewrap sandbox (a Terminal-Bench-Lite suite).

``register()`` registers ``harness_gym/Term<Task>-<Preset>-v0`` and ``harness_gym/Term<Task>-v0``
(which takes ``harness=`` and ``terminal=``) with Gymnasium for every task of
:data:`~harness_gym.envs.terminal.tasks.TERMINAL_TASKS`. Registering starts nothing; the
sandbox starts at an env's first reset, and building an env where bubblewrap cannot run
raises :class:`~harness_gym.envs.terminal.sandbox.SandboxUnavailable`. See ``docs/terminal.md``.
"""

from __future__ import annotations

from harness_gym.core.registry import register_family
from harness_gym.envs.terminal.options import FAMILY, SENTINEL, TerminalOptions
from harness_gym.envs.terminal.presets import CODING_PRESETS, TERMINAL_PRESET_INFO, TERMINAL_PRESETS
from harness_gym.envs.terminal.sandbox import Sandbox, SandboxLimits, SandboxUnavailable, require_bwrap
from harness_gym.envs.terminal.tasks import TERMINAL_TASKS

ENTRY_POINT = "harness_gym.envs.terminal.env:make_terminal_env"
TERMINAL_TASK_IDS: tuple[str, ...] = tuple(t.task_id for t in TERMINAL_TASKS)


def register(add_to_task_registry: bool = False) -> list[str]:
    """Register every terminal task's Gymnasium ids and the coding-harness presets, which
    only terminal tasks take (idempotent); return the ids.

    The tasks stay out of ``harness_gym.TASKS`` unless ``add_to_task_registry`` (they need
    bubblewrap and are slower than the pure-Python suite that TASKS lists).
    """
    return register_family(
        TERMINAL_TASKS, ENTRY_POINT, add_to_task_registry, family=FAMILY, presets=TERMINAL_PRESET_INFO
    )


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
