"""Real MiniWoB++ tasks in headless Chromium (Playwright), under the same harnesses.

``register()`` registers ``harness_gym/Browser<Task>-<Preset>-v0`` and
``harness_gym/Browser<Task>-v0`` (which takes ``harness=``) with Gymnasium for every task of
:data:`~harness_gym.envs.browser.catalog.INCLUDED`, and by default adds the task classes to
the task registry. Neither importing this package nor registering imports Playwright or starts
a browser, and ``register(add_to_task_registry=False)`` (what ``import harness_gym`` does)
imports no task either: the ids come from the catalog, the classes are made when one is first
needed (``BROWSER_TASKS``, ``get_task``, ``gym.make``). Chromium starts at an env's first
reset. See ``docs/browser.md``.
"""

from __future__ import annotations

from typing import Any

from harness_gym.core.registry import register_family
from harness_gym.envs.browser.catalog import EXCLUDED, INCLUDED, TWINS, task_id_for

ENTRY_POINT = "harness_gym.envs.browser.env:make_browser_env"
#: Where each task class lives (``harness_gym.envs.browser.tasks`` makes them on import).
TASK_CLASSES: dict[str, str] = {
    task_id_for(s): f"harness_gym.envs.browser.tasks:{task_id_for(s)}" for s in INCLUDED
}
BROWSER_TASK_IDS: tuple[str, ...] = tuple(TASK_CLASSES)


def register(add_to_task_registry: bool = True) -> list[str]:
    """Register every real task's Gymnasium ids (idempotent); return the ids.

    With ``add_to_task_registry`` (the default) the task classes also join
    ``harness_gym.TASKS`` (so ``get_task`` and ``make_env`` know them), like the web suite's.
    The Gymnasium ids work either way.
    """
    if add_to_task_registry:
        from harness_gym.envs.browser.tasks import BROWSER_TASKS

        return register_family(BROWSER_TASKS, ENTRY_POINT, add_to_task_registry, also=("web",))
    return register_family(
        TASK_CLASSES, ENTRY_POINT, add_to_task_registry=False, family="browser", also=("web",)
    )


def is_browser_task(task_id: str) -> bool:
    """Whether a registered task id is one of the real-browser tasks."""
    return task_id in TASK_CLASSES


def __getattr__(name: str) -> Any:
    """``BROWSER_TASKS`` and ``ORACLE_TASK_IDS`` need the task classes: made on first use."""
    if name in ("BROWSER_TASKS", "ORACLE_TASK_IDS"):
        from harness_gym.envs.browser import tasks

        return getattr(tasks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BROWSER_TASKS",
    "BROWSER_TASK_IDS",
    "ENTRY_POINT",
    "EXCLUDED",
    "INCLUDED",
    "ORACLE_TASK_IDS",
    "TASK_CLASSES",
    "TWINS",
    "is_browser_task",
    "register",
]
