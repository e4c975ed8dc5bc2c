"""The web tasks, one module each, modeled on MiniWoB++ tasks."""

from harness_gym.envs.web.tasks.book_flight import BookFlight
from harness_gym.envs.web.tasks.choose_list import ChooseList
from harness_gym.envs.web.tasks.click_button import ClickButton
from harness_gym.envs.web.tasks.click_checkboxes import ClickCheckboxes
from harness_gym.envs.web.tasks.click_link import ClickLink
from harness_gym.envs.web.tasks.click_option import ClickOption
from harness_gym.envs.web.tasks.click_tab import ClickTab
from harness_gym.envs.web.tasks.email_inbox import EmailInbox
from harness_gym.envs.web.tasks.enter_text import EnterText
from harness_gym.envs.web.tasks.login_user import LoginUser
from harness_gym.envs.web.tasks.navigate_tree import NavigateTree
from harness_gym.envs.web.tasks.use_autocomplete import UseAutocomplete

WEB_TASKS = (
    ClickButton,
    ClickLink,
    ClickOption,
    ClickCheckboxes,
    ChooseList,
    ClickTab,
    EnterText,
    LoginUser,
    NavigateTree,
    UseAutocomplete,
    EmailInbox,
    BookFlight,
)

__all__ = ["WEB_TASKS", *[t.__name__ for t in WEB_TASKS]]
