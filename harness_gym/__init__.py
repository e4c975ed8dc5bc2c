"""harness-gym: every (task, harness) pair as a Gymnasium environment.

``import harness_gym`` registers ``harness_gym/<Task>-<Preset>-v0`` and
``harness_gym/<Task>-v0`` with Gymnasium for every built-in task and every installed plugin's
task. Registering is cheap (``benchmarks/import_time.py``): the specs go straight into
Gymnasium's registry, nothing is bound, and a family's task classes (the real-browser ones)
are imported only when an env or the class is first needed.
"""

from harness_gym.core import (
    PRESETS,
    TASKS,
    Action,
    ActionError,
    ActionSpec,
    Harness,
    HarnessEnv,
    HarnessSpecError,
    Param,
    StepResult,
    Task,
    UnicodeText,
    get_task,
    make_env,
    register_task,
    resolve_harness,
)
from harness_gym.core.registry import register_envs, registered_env_ids
from harness_gym.envs.web import WEB_TASKS

__version__ = "0.1.0"

for _task in WEB_TASKS:
    register_task(_task)
register_envs()

# Real MiniWoB++ in Chromium: Gymnasium ids harness_gym/Browser<Task>-<Preset>-v0. Registering
# imports neither Playwright nor miniwob; the browser starts at the first reset. The browser
# tasks stay out of TASKS, which lists the fast pure-Python suite that tests and sweeps cover.
from harness_gym.envs import browser as _browser  # noqa: E402

_browser.register(add_to_task_registry=False)

# Terminal tasks in a bubblewrap sandbox: harness_gym/Term<Task>-<Preset>-v0. Registering starts
# nothing; building an env checks that bwrap can run.
from harness_gym.envs import terminal as _terminal  # noqa: E402

_terminal.register(add_to_task_registry=False)

# Installed plugins' tasks (entry points ``harness_gym.tasks``): their ids work in gym.make too.
# A plugin that fails to load is reported by the next load_plugins call (the CLI's warning line).
from harness_gym.core.plugins import load_plugins as _load_plugins  # noqa: E402

_load_plugins(["tasks", "families"], warn=False, defer=True)

__all__ = [
    "PRESETS",
    "TASKS",
    "Action",
    "ActionError",
    "ActionSpec",
    "Harness",
    "HarnessEnv",
    "HarnessSpecError",
    "Param",
    "StepResult",
    "Task",
    "UnicodeText",
    "get_task",
    "make_env",
    "register_task",
    "registered_env_ids",
    "resolve_harness",
]
