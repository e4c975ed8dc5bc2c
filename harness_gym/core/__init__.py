"""Core concepts: tasks, harnesses, the env that joins them, and the registry."""

from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import BoundHarness, Harness, HarnessSpecError
from harness_gym.core.presets import PRESETS, resolve_harness
from harness_gym.core.registry import TASKS, get_task, make_env, register_task
from harness_gym.core.task import Action, ActionSpec, Param, StepResult, Task
from harness_gym.core.text_space import UnicodeText
from harness_gym.core.tools import ActionError

__all__ = [
    "PRESETS",
    "TASKS",
    "Action",
    "ActionError",
    "ActionSpec",
    "BoundHarness",
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
    "resolve_harness",
]
