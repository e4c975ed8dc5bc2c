"""Pure-Python MiniWoB-style web tasks: a page is a tree of elements with refs."""

from harness_gym.envs.web.base import WEB_ACTIONS, WebTask
from harness_gym.envs.web.tasks import WEB_TASKS

__all__ = ["WEB_ACTIONS", "WEB_TASKS", "WebTask"]
