"""Tool styles from outside the package: a :class:`ToolStyle` of plain functions, adapted to
the :class:`~harness_gym.core.tools.style.Style` protocol."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness_gym.core.task import Action, Param
from harness_gym.core.tools.errors import ActionError, preview
from harness_gym.core.tools.scan import COMMAND_PREFIX
from harness_gym.core.tools.style import Style

if TYPE_CHECKING:
    from harness_gym.core.tools.style import ToolboxView
    from harness_gym.core.tools.tool import Tool


@dataclass(frozen=True)
class ToolStyle:
    """A tool style from outside the package: a new level of the ``tool_style`` factor.

    ``write(tool, [(arg, value), ...])`` writes one call as text; ``read(text)`` reads it back
    as ``(tool, {arg: value})`` and raises (any exception) on text that is not one call. The
    toolbox checks names, arguments and types, so ``read`` only undoes ``write``. With
    ``values_are_text`` the values ``read`` returns are strings (as in a command line) and
    integer arguments are converted. ``hint`` is the sentence the system prompt shows;
    ``reserved`` are words that cannot be tool or argument names.

    Optional: ``find(text, tool_names)`` gives the ``(start, end)`` spans of ``text`` that
    look like one action each (the lenient parser reads them inside prose; default: each
    line naming a tool, without a leading prompt or backticks); ``pattern(tool, [(arg,
    Param), ...], max_string)`` is a regular expression of one tool's calls (the grammar
    for constrained decoding when a step has more legal actions than it lists one by one).
    """

    name: str
    write: Callable[[str, Sequence[tuple[str, Any]]], str]
    read: Callable[[str], tuple[str, Mapping[str, Any]]]
    hint: str
    values_are_text: bool = False
    reserved: frozenset[str] = frozenset()
    find: Callable[[str, Sequence[str]], Iterable[tuple[int, int]]] | None = None
    pattern: Callable[[str, Sequence[tuple[str, Param]], int], str] | None = None


def line_spans(text: str, names: Sequence[str]) -> list[tuple[int, int]]:
    """Each line of ``text`` that names one of ``names``, without a leading prompt or
    backticks and trailing blanks or backticks (one pass over the text)."""
    if not names:
        return []
    named = re.compile("|".join(map(re.escape, sorted(names, key=len, reverse=True))))
    spans, pos, n = [], 0, len(text)
    while pos < n:
        end = text.find("\n", pos)
        end = n if end < 0 else end
        start = pos
        while start < end and text[start] in COMMAND_PREFIX:
            start += 1
        stop = end
        while stop > start and text[stop - 1] in " \t\r`":
            stop -= 1
        if named.search(text, start, stop):
            spans.append((start, stop))
        pos = end + 1
    return spans


class PluginStyle(Style):
    """A :class:`ToolStyle` as a :class:`Style`."""

    def __init__(self, declared: ToolStyle) -> None:
        self.declared = declared
        self.name = declared.name
        self.hint = declared.hint
        self.reserved = frozenset(declared.reserved)

    def write(self, tool: str, pairs: Sequence[tuple[str, Any]]) -> str:
        return self.declared.write(tool, pairs)

    def read(self, toolbox: ToolboxView, text: str) -> Action:
        try:
            name, given = self.declared.read(text)
        except ActionError:
            raise
        except Exception as err:  # noqa: BLE001 - a plugin's reader may raise anything
            raise ActionError("malformed", f"not one {self.name} action ({err}): {preview(text)}") from None
        if not isinstance(given, Mapping):
            raise ActionError("malformed", f"not one {self.name} action: {preview(text)}")
        return toolbox.build(toolbox.tool_named(name), dict(given), from_text=self.declared.values_are_text)

    def spans(self, text: str, tools: Mapping[str, Tool]) -> list[tuple[int, int]]:
        if self.declared.find is None:
            return line_spans(text, list(tools))
        try:
            found = sorted((int(s), int(e)) for s, e in self.declared.find(text, list(tools)))
        except Exception:  # noqa: BLE001 - a plugin's finder may raise anything: no spans
            return []
        spans, pos = [], 0
        for start, end in found:  # keep them inside the text, non-overlapping, left to right
            if pos <= start < end <= len(text):
                spans.append((start, end))
                pos = end
        return spans

    def tool_pattern(self, toolbox: ToolboxView, tool: Tool, max_string: int) -> str:
        if self.declared.pattern is None:
            return super().tool_pattern(toolbox, tool, max_string)
        return self.declared.pattern(tool.name, list(zip(tool.arg_names, tool.params)), max_string)
