"""The ``python_positional`` tool style: BrowserGym's calls, positional arguments with
element ids written as strings, ``tool('12', 'text')``."""

from __future__ import annotations

import keyword
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness_gym.core.grammar import INT_TEXT, python_string, regex_literal
from harness_gym.core.tools.python_style import call_spans, read_call, write_keyword_call
from harness_gym.core.tools.style import Style

if TYPE_CHECKING:
    from harness_gym.core.task import Action
    from harness_gym.core.tools.style import ToolboxView
    from harness_gym.core.tools.tool import Tool


class PythonPositionalStyle(Style):
    name = "python_positional"
    hint = (
        "Reply with one Python function call with positional arguments, "
        "element ids written as strings, e.g. tool('12', 'text')."
    )
    reserved = frozenset(keyword.kwlist)

    def write(self, tool: str, pairs: Sequence[tuple[str, Any]]) -> str:
        return f"{tool}({', '.join(repr(str(v)) for _, v in pairs)})"

    def write_call(self, toolbox: ToolboxView, name: str, arguments: Any) -> str:
        return write_keyword_call(name, arguments)

    def read(self, toolbox: ToolboxView, text: str) -> Action:
        """Positional (or keyword) arguments; ids may be strings."""
        return read_call(toolbox, text, positional=True)

    def spans(self, text: str, tools: Mapping[str, Tool]) -> list[tuple[int, int]]:
        return call_spans(text, tools)

    def tool_pattern(self, toolbox: ToolboxView, tool: Tool, max_string: int) -> str:
        number = f"('{INT_TEXT}'|\"{INT_TEXT}\")"  # an id written as a string, e.g. '12'
        values = ", ".join(number if p.type == "int" else python_string(max_string) for p in tool.params)
        return f"{regex_literal(tool.name)}\\({values}\\)"


PYTHON_POSITIONAL = PythonPositionalStyle()
