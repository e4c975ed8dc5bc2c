"""Real MiniWoB++ tasks in headless Chromium (Playwright), under the same harnesses.

``register()`` adds the tasks of :data:`~harness_gym.envs.browser.tasks.INCLUDED` to the
task registry and registers ``harness_gym/Browser<Task>-<Preset>-v0`` and
``harness_gym/Browser<Task>-v0`` (which takes ``harness=``) with Gymnasium. Neither importing
this package nor registering imports Playwright or starts a browser: Playwright is imported
when an env is built and Chromium starts at its first reset. See ``docs/browser.md``.
"""

from __future__ import annotations

from harness_gym.core.registry import register_family
from harness_gym.envs.browser.tasks import BROWSER_TASKS, EXCLUDED, INCLUDED, ORACLE_TASK_IDS, TWINS

ENTRY_POINT = "harness_gym.envs.browser.env:make_browser_env"


def register(add_to_task_registry: bool = True) -> list[str]:
    """Register every real task's Gymnasium ids (idempotent); return the ids.

    With ``add_to_task_registry`` (the default) the task classes also join
    ``harness_gym.TASKS`` (so ``get_task`` and ``make_env`` know them), like the web suite's.
    The Gymnasium ids work either way.
    """
    return register_family(BROWSER_TASKS, ENTRY_POINT, add_to_task_registry)


def is_browser_task(task_id: str) -> bool:
    """Whether a registered task id is one of the real-browser tasks."""
    return any(task.task_id == task_id for task in BROWSER_TASKS)


BROWSER_TASK_IDS: tuple[str, ...] = tuple(task.task_id for task in BROWSER_TASKS)

__all__ = [
    "BROWSER_TASKS",
    "BROWSER_TASK_IDS",
    "ENTRY_POINT",
    "EXCLUDED",
    "INCLUDED",
    "ORACLE_TASK_IDS",
    "TWINS",
    "is_browser_task",
    "register",
]
