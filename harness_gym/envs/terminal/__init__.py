"""Terminal tasks in a bubblewrap sandbox (a Terminal-Bench-Lite suite).

``register()`` registers ``harness_gym/Term<Task>-<Preset>-v0`` and ``harness_gym/Term<Task>-v0``
(which takes ``harness=`` and ``terminal=``) with Gymnasium for every task of
:data:`~harness_gym.envs.terminal.catalog.TASK_CLASSES`. Registering imports no task and starts nothing; the
sandbox starts at an env's first reset, and building an env where bubblewrap cannot run
raises :class:`~harness_gym.envs.terminal.sandbox_view.SandboxUnavailable`. See ``docs/terminal.md``.
"""

from __future__ import annotations

import os
from typing import Any

from harness_gym.core.registry import register_family
from harness_gym.envs.terminal.catalog import (
    ENTRY_POINT,
    HARBOR_DIRS_VARIABLE,
    HARBOR_ENTRY_POINT,
    HARBOR_ENV_ID,
    TASK_CLASSES,
)
from harness_gym.envs.terminal.options import FAMILY, SENTINEL, TerminalOptions
from harness_gym.envs.terminal.presets import CODING_PRESETS, TERMINAL_PRESET_INFO, TERMINAL_PRESETS

TERMINAL_TASK_IDS: tuple[str, ...] = tuple(TASK_CLASSES)
#: Names this package gives from modules it imports only when one is asked for.
_LAZY = {
    "TERMINAL_TASKS": "harness_gym.envs.terminal.tasks",
    "Sandbox": "harness_gym.envs.terminal.sandbox",
    "SandboxLimits": "harness_gym.envs.terminal.sandbox_limits",
    "SandboxUnavailable": "harness_gym.envs.terminal.sandbox_view",
    "require_bwrap": "harness_gym.envs.terminal.sandbox_view",
}


def register(add_to_task_registry: bool = False) -> list[str]:
    """Register every terminal task's Gymnasium ids and the coding-harness presets, which
    only terminal tasks take (idempotent); return the ids.

    The tasks stay out of ``harness_gym.TASKS`` unless ``add_to_task_registry`` (they need
    bubblewrap and are slower than the pure-Python suite that TASKS lists); then the task
    classes are imported, else only :data:`~harness_gym.envs.terminal.catalog.TASK_CLASSES`
    is read (``import harness_gym`` imports no sandbox or task module).
    """
    if add_to_task_registry:
        from harness_gym.envs.terminal.tasks import TERMINAL_TASKS

        tasks: Any = TERMINAL_TASKS
    else:
        tasks = TASK_CLASSES
    ids = register_family(
        tasks, ENTRY_POINT, add_to_task_registry, family=FAMILY, presets=TERMINAL_PRESET_INFO
    )
    import gymnasium as gym

    if HARBOR_ENV_ID not in gym.registry:
        gym.register(id=HARBOR_ENV_ID, entry_point=HARBOR_ENTRY_POINT, disable_env_checker=True)
    if os.environ.get(HARBOR_DIRS_VARIABLE):  # folders a parent process registered
        import importlib  # (the Harbor loader registers through this package's tables)

        ids += importlib.import_module("harness_gym.envs.terminal.harbor").register_remembered_folders()
    return ids


def __getattr__(name: str) -> Any:
    """``TERMINAL_TASKS`` and the sandbox's names, imported on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
