"""WebTask: the shared world logic of the pure-Python MiniWoB-style tasks.

A web task builds a :class:`~harness_gym.envs.web.page.Page` from a seeded generator and
reacts to four canonical actions: ``click(ref)``, ``type(ref, text)``, ``press(key)`` and
``select(ref, option)``. Subclasses implement :meth:`WebTask.build`, :meth:`WebTask.oracle`
and the ``on_*`` reactions they need, and call :meth:`WebTask.finish` to end the episode.
Success is binary: reward 1 when the episode ends successfully, else 0.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from harness_gym.core.task import Action, ActionSpec, Param, StepResult, Task, state_text, text_digest
from harness_gym.envs.web.page import TEXT_INPUTS, Element, Page

CLICK = ActionSpec(
    "click",
    "Click an element of the page.",
    (Param("ref", "int", "The ref number of the element to click."),),
)
TYPE = ActionSpec(
    "type",
    "Type text into an input field, replacing its current value.",
    (
        Param("ref", "int", "The ref number of the input field."),
        Param("text", "str", "The text to type."),
    ),
)
PRESS = ActionSpec(
    "press",
    "Press a key on the keyboard.",
    (Param("key", "str", "The key to press, e.g. Enter, Tab, Escape, ArrowDown."),),
)
SELECT = ActionSpec(
    "select",
    "Choose an option of a drop-down list.",
    (
        Param("ref", "int", "The ref number of the drop-down list."),
        Param("option", "str", "The option text to choose."),
    ),
)
WEB_ACTIONS = (CLICK, TYPE, PRESS, SELECT)
KEYS = ("Enter", "Tab", "Escape", "ArrowDown", "ArrowUp", "Backspace")
#: Tags that a random agent's legal clicks cover.
CLICKABLE = frozenset({"button", "a", "checkbox", "radio", "tab", "li", "span", "label", "treeitem"})
#: Stands for the page in the state ``WebTask.digest`` writes (the page's text is spliced in).
_PAGE = object()


class WebTask(Task):
    """Base class of the web tasks: fields ``instruction``, ``title`` and ``page``."""

    field_names: ClassVar[tuple[str, ...]] = ("instruction", "title", "page")
    action_specs: ClassVar[tuple[ActionSpec, ...]] = WEB_ACTIONS
    max_steps: ClassVar[int] = 6
    family: ClassVar[str | None] = "web"
    #: Keys that legal_actions offers for ``press`` (tasks that use keys extend this).
    legal_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self.page = Page()
        self.instruction = ""
        self.title = ""
        self.done = False
        self.succeeded = False
        #: Strings that legal_actions offers to ``type`` into each visible input.
        self.type_candidates: list[str] = []

    # -- to implement ----------------------------------------------------------------------

    @abstractmethod
    def build(self, rng: np.random.Generator) -> None:
        """Fill ``self.page``, ``self.instruction``, ``self.title`` and the solution state."""

    @abstractmethod
    def oracle(self) -> Action:
        """The next action of a perfect policy, from the true state."""

    def extra_state(self) -> dict[str, Any]:
        """Task-specific hidden state (targets, solution) for the digest."""
        return {}

    def on_click(self, element: Element) -> None:
        if element.tag == "checkbox":
            element.checked = not element.checked
        elif element.tag == "radio":
            for other in self.page.visible():
                if other.tag == "radio" and other.attrs.get("name") == element.attrs.get("name"):
                    other.checked = False
            element.checked = True

    def on_type(self, element: Element, text: str) -> None:
        element.value = text

    def on_press(self, key: str) -> None:
        """Keys do nothing unless a task says otherwise."""

    def on_select(self, element: Element, option: str) -> None:
        element.value = option

    # -- Task API --------------------------------------------------------------------------

    def reset(self, rng: np.random.Generator) -> None:
        self.__init__()  # type: ignore[misc]
        self.build(rng)

    def finish(self, success: bool) -> None:
        """End the episode (the first call wins)."""
        if not self.done:
            self.done = True
            self.succeeded = bool(success)

    def fields(self) -> dict[str, Any]:
        return {"instruction": self.instruction, "title": self.title, "page": self.page.to_field()}

    def legal_actions(self) -> list[Action]:
        if self.done:
            return []
        candidates = tuple(self.type_candidates)
        actions: list[Action] = []
        for element in self.page.visible():
            tag, ref = element.tag, element.ref
            if tag in CLICKABLE:
                actions.extend(_actions("click", ref, ()))
            if tag in TEXT_INPUTS:
                actions.extend(_actions("type", ref, candidates))
            if tag == "select" and element.options:
                actions.extend(_actions("select", ref, tuple(element.options)))
        actions.extend(_actions("press", None, self.legal_keys))
        return actions

    def check(self, action: Action) -> str | None:
        if self.done:
            return "the episode is over"
        if action.name == "press":
            key = action["key"]
            return None if key in KEYS else f"unknown key {key!r}; keys: {list(KEYS)}"
        ref = action["ref"]
        element = self.page.get(ref)
        if element is None:
            refs = [e.ref for e in self.page.visible()]
            return f"no visible element with ref {ref}; visible refs: {refs}"
        if action.name == "type" and element.tag not in TEXT_INPUTS:
            return f"element {ref} is a {element.tag}, not a text input"
        if action.name == "select":
            if element.tag != "select":
                return f"element {ref} is a {element.tag}, not a drop-down list"
            if action["option"] not in (element.options or []):
                return f"element {ref} has no option {action['option']!r}; options: {element.options}"
        return None

    def step(self, action: Action) -> StepResult:
        if action.name == "click":
            self.on_click(self._element(action["ref"]))
        elif action.name == "type":
            self.on_type(self._element(action["ref"]), action["text"])
        elif action.name == "press":
            self.on_press(action["key"])
        elif action.name == "select":
            self.on_select(self._element(action["ref"]), action["option"])
        reward = 1.0 if self.done and self.succeeded else 0.0
        return StepResult(reward, self.done, self.succeeded)

    def state(self) -> dict[str, Any]:
        return self._state(self.page.state())

    def digest(self) -> str:
        """The digest of :meth:`state`, with the page's part written by ``Page.state_text``
        (the same text; the encoder's dicts for the page cost most of a reset's digest)."""
        state = self._state(_PAGE)
        if type(self).state is not WebTask.state or state["page"] is not _PAGE:
            return super().digest()  # a subclass's own state, or an extra state named "page"
        return text_digest(state_text(state, written={"page": self.page.state_text()}))

    def _state(self, page: Any) -> dict[str, Any]:
        return {
            "instruction": self.instruction,
            "title": self.title,
            "page": page,
            "done": self.done,
            "succeeded": self.succeeded,
            **self.extra_state(),
        }

    def _element(self, ref: int) -> Element:
        element = self.page.get(ref)
        assert element is not None, "step() called with an unchecked action"
        return element


#: Legal actions already built, shared by every web task and episode (an Action is an
#: immutable value): (name, ref, the texts, options or keys) -> those actions.
_BUILT_ACTIONS: dict[tuple[str, int | None, tuple[str, ...]], tuple[Action, ...]] = {}


def _actions(name: str, ref: int | None, values: tuple[str, ...]) -> tuple[Action, ...]:
    """``click(ref)``, or ``type``/``select`` of ``ref`` with each value, or ``press`` of each key."""
    key = (name, ref, values)
    built = _BUILT_ACTIONS.get(key)
    if built is None:
        if len(_BUILT_ACTIONS) >= 8192:
            _BUILT_ACTIONS.clear()
        # Built directly (what Action.of builds, without its keyword round trip).
        if name == "click":
            built = (Action("click", (("ref", ref),)),)
        elif name == "press":
            built = tuple(Action("press", (("key", k),)) for k in values)
        else:
            arg = "text" if name == "type" else "option"
            built = tuple(Action(name, (("ref", ref), (arg, v))) for v in values)
        _BUILT_ACTIONS[key] = built
    return built
