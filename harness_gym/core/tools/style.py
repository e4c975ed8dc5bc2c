"""The tool-style protocol: what a level of the ``tool_style`` factor implements.

A :class:`Style` writes one call as text, reads a reply back into a canonical action, finds
action-shaped spans inside prose (for the lenient parser and the ``multiple_actions``
check) and gives the grammar of one step's replies (for constrained decoding). Built-in
styles (one module each in this package) and plugin styles (a :class:`~harness_gym.core.
tools.plugin_style.ToolStyle`, adapted) implement the same protocol and are registered the
same way (:func:`~harness_gym.core.tools.registry.register_tool_style`).

The :class:`~harness_gym.core.tools.toolbox.Toolbox` does what is common to all styles
(names, argument checks and types, the search over spans, memoized writing); a style only
knows its syntax. A style that lacks a part raises :class:`StyleNotImplemented` naming it,
never falls back to another style's syntax.

What a style may ask of the toolbox is :class:`ToolboxView`, declared here so that the styles
sit below the toolbox (which imports them through the registry) without importing it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from harness_gym.core.grammar import regex_literal

if TYPE_CHECKING:
    from harness_gym.core.task import Action
    from harness_gym.core.tools.errors import ActionError
    from harness_gym.core.tools.tool import Tool


class ToolboxView(Protocol):
    """The part of a :class:`~harness_gym.core.tools.toolbox.Toolbox` a style uses: its tools
    and names, its style, the argument checks that build a canonical action, and the writing
    and span search it does for every style."""

    tools: tuple[Tool, ...]
    by_name: dict[str, Tool]
    by_canonical: dict[str, Tool]
    syntax: Style
    lenient: bool

    @property
    def native_syntax(self) -> Style: ...

    def json_schema(self, tool: Tool) -> dict[str, Any]: ...

    def format(self, action: Action) -> str: ...

    def call(self, action: Action) -> tuple[str, dict[str, Any]]: ...

    def positional(self, name: str, arguments: dict[str, Any]) -> list[tuple[str, Any]] | None: ...

    def tool_named(self, name: Any) -> Tool: ...

    def build(self, tool: Tool, given: dict[str, Any], from_text: bool) -> Action: ...

    def try_read(self, text: str) -> bool: ...

    def multiple(self, count: int) -> ActionError: ...

    def spans(self, text: str) -> list[tuple[int, int, bool]]: ...


class StyleNotImplemented(NotImplementedError):
    """A tool style that does not implement a part of the :class:`Style` protocol."""


class Style:
    """One tool style. Subclass it, set the attributes, implement the methods.

    Attributes:
        name: the level name (an identifier).
        hint: the sentence the system prompt shows on how to write an action.
        reserved: words that cannot be tool or argument names (the syntax cannot carry them).
        native_values: whether arguments that are neither int nor str (numbers, lists) are
            written as values of the syntax (JSON, Python) rather than as JSON text.
        native_string_pattern: a JSON-schema ``pattern`` for string arguments of a native
            call, when this style cannot write every string back (``None``: any string).
    """

    name: str = ""
    hint: str = ""
    reserved: frozenset[str] = frozenset()
    native_values: bool = False
    native_string_pattern: str | None = None

    #: The methods every registered style must override (checked by registration).
    REQUIRED = ("write", "read", "spans")

    def missing(self) -> list[str]:
        """The required methods this style leaves to the base class."""
        return [m for m in self.REQUIRED if getattr(type(self), m) is getattr(Style, m)]

    def _not_implemented(self, what: str, fix: str) -> StyleNotImplemented:
        return StyleNotImplemented(f"tool style {self.name!r} does not implement {what}; {fix}")

    def reserved_word(self, name: str, is_tool: bool) -> bool:
        """Whether ``name`` (of a tool, or of an argument) cannot be written in this syntax."""
        return name in self.reserved

    # -- writing ------------------------------------------------------------------------

    def write(self, tool: str, pairs: Sequence[tuple[str, Any]]) -> str:
        """One call of ``tool`` with ``(argument, value)`` pairs, in the tool's order."""
        raise self._not_implemented("write", "override Style.write")

    def write_call(self, toolbox: ToolboxView, name: str, arguments: Any) -> str:
        """A model's native call written in this style, unchecked: anything wrong (an unknown
        tool, arguments that are not an object) is written so that :meth:`read` reports it."""
        if not isinstance(arguments, dict):
            return f"{name} {arguments!r}"
        return self.write(name, [(str(k), v) for k, v in arguments.items()])

    # -- reading ------------------------------------------------------------------------

    def read(self, toolbox: ToolboxView, text: str) -> Action:
        """The one action ``text`` (stripped) writes, built with ``toolbox.build``, or an
        :class:`~harness_gym.core.tools.errors.ActionError`."""
        raise self._not_implemented("read", "override Style.read")

    def spans(self, text: str, tools: Mapping[str, Tool]) -> list[tuple[int, int]]:
        """Non-overlapping ``(start, end)`` spans of ``text`` that look like one action each,
        left to right, in time linear in the text; ``tools`` maps shown names to tools."""
        raise self._not_implemented("spans", "override Style.spans")

    def check_whole(self, toolbox: ToolboxView, text: str, action: Action) -> None:
        """Raise ``multiple_actions`` when a reply read whole as ``action`` holds several."""

    def count_actions(self, toolbox: ToolboxView, text: str) -> int:
        """How many whole actions a reply that read as one with extra arguments holds (0: not
        a sequence of actions)."""
        return 0

    # -- grammar ------------------------------------------------------------------------

    def grammar(
        self, toolbox: ToolboxView, actions: Sequence[Action], exact: bool, max_string: int
    ) -> tuple[str, Any]:
        """``(kind, value)`` of the grammar of replies: exactly ``actions`` as written when
        ``exact``, else each tool's calls (:meth:`tool_pattern`). Kind ``"regex"`` or
        ``"json_schema"``."""
        if exact:
            pattern = "|".join(regex_literal(toolbox.format(a)) for a in actions)
        else:
            pattern = "|".join(self.tool_pattern(toolbox, tool, max_string) for tool in toolbox.tools)
        return "regex", f"({pattern})"

    def tool_pattern(self, toolbox: ToolboxView, tool: Tool, max_string: int) -> str:
        """A regular expression of ``tool``'s calls in this style (strings of at most
        ``max_string`` characters); every string it matches must parse."""
        raise self._not_implemented(
            "a per-tool grammar",
            "give it one (ToolStyle(pattern=...), or Style.tool_pattern), or raise "
            "max_alternatives so that the grammar lists the legal actions",
        )

    def __repr__(self) -> str:
        return f"<tool style {self.name!r}>"
