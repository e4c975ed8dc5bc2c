"""The web tasks, one module each."""

from harness_gym.envs.web.tasks.click_button import ClickButton
from harness_gym.envs.web.tasks.enter_text import EnterText

WEB_TASKS = (
    ClickButton,
    EnterText,
)

__all__ = ["WEB_TASKS", *[t.__name__ for t in WEB_TASKS]]
