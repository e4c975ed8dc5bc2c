"""The ``python`` tool style: one Python call with keyword arguments, ``tool(arg=1)``."""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness_gym.core.grammar import INT_PYTHON, python_string, regex_literal, typed
from harness_gym.core.tools.errors import ActionError, preview
from harness_gym.core.tools.json_text import unparsed
from harness_gym.core.tools.scan import balanced_end
from harness_gym.core.tools.style import Style

if TYPE_CHECKING:
    from harness_gym.core.task import Action
    from harness_gym.core.tools.style import ToolboxView
    from harness_gym.core.tools.tool import Tool


def call_spans(text: str, tools: Mapping[str, Tool]) -> list[tuple[int, int]]:
    """Each ``tool(...)`` call of a shown tool name, its parentheses balanced (quote-aware)."""
    names = sorted(tools, key=len, reverse=True)
    head = re.compile(r"(?<![\w.])(?:" + "|".join(map(re.escape, names)) + r")[ \t]*\(")
    spans, pos = [], 0
    while (m := head.search(text, pos)) is not None:
        end = balanced_end(text, m.end() - 1, "(", ")")
        if end < 0:
            break
        spans.append((m.start(), end))
        pos = end
    return spans


def write_keyword_call(name: str, arguments: Any) -> str:
    """A native call as ``name(k=v, ...)``; arguments that are not an object are written so
    that the parser reports a malformed call."""
    if not isinstance(arguments, dict):
        return f"{name}({unparsed(arguments)}"
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


def read_call(toolbox: ToolboxView, text: str, positional: bool) -> Action:
    """One Python call of a tool; ``positional``: arguments may be given in order, and
    string values of integer arguments are read as integers."""
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ActionError("malformed", f"not a Python call: {preview(text)}") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ActionError("malformed", f"expected a call like tool(arg=...), got {preview(text)}")
    # Python folds identifiers to NFKC (a full-width name reads as the ASCII one); the
    # harness accepts only the names it wrote, so compare the text as written.
    rows = None if text.isascii() else re.split(rb"\r\n|\r|\n", text.encode("utf-8", "surrogatepass"))
    tool = toolbox.tool_named(_written(rows, node.func, node.func.id))
    given: dict[str, Any] = {}
    if node.args:
        if not (toolbox.lenient or positional):
            raise ActionError(
                "malformed",
                f"use keyword arguments: {tool.name}({', '.join(a + '=...' for a in tool.arg_names)})",
            )
        if len(node.args) > len(tool.arg_names):
            raise ActionError("extra_argument", f"tool {tool.name!r} takes {len(tool.arg_names)} argument(s)")
        for name, arg in zip(tool.arg_names, node.args):
            given[name] = _literal(arg)
    for kw in node.keywords:
        if kw.arg is None:
            raise ActionError("malformed", "**kwargs are not allowed in an action")
        name = _written(rows, kw, kw.arg)
        if name in given:
            raise ActionError("malformed", f"argument {preview(name)} given twice")
        given[name] = _literal(kw.value)
    return toolbox.build(tool, given, from_text=positional)


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        raise ActionError("malformed", "arguments must be literals (numbers or strings)") from None


def _written(rows: list[bytes] | None, node: ast.AST, parsed: str) -> str:
    """An identifier as the text writes it: ``ast`` folds names to NFKC, so a full-width
    ``ｃｌｉｃｋ`` reads as ``click``; the harness accepts only the names it wrote.

    ``rows`` are the text's lines as UTF-8 (``ast`` offsets are in bytes), or ``None`` for
    ASCII text, which cannot fold.
    """
    if rows is None:
        return parsed
    row = rows[node.lineno - 1]  # type: ignore[attr-defined]
    if isinstance(node, ast.keyword):
        raw = row[node.col_offset :].split(b"=", 1)[0]
    else:
        raw = row[node.col_offset : node.end_col_offset]  # type: ignore[attr-defined]
    return raw.decode("utf-8", "replace").strip()


class PythonStyle(Style):
    name = "python"
    hint = "Reply with one Python function call with keyword arguments, e.g. tool(arg=1)."
    reserved = frozenset(keyword.kwlist)
    native_values = True

    def write(self, tool: str, pairs: Sequence[tuple[str, Any]]) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in pairs)
        return f"{tool}({inner})"

    def write_call(self, toolbox: ToolboxView, name: str, arguments: Any) -> str:
        return write_keyword_call(name, arguments)

    def read(self, toolbox: ToolboxView, text: str) -> Action:
        return read_call(toolbox, text, positional=False)

    def spans(self, text: str, tools: Mapping[str, Tool]) -> list[tuple[int, int]]:
        return call_spans(text, tools)

    def tool_pattern(self, toolbox: ToolboxView, tool: Tool, max_string: int) -> str:
        string = python_string(max_string)
        args = ", ".join(
            f"{regex_literal(a)}=({typed(p, string, string, INT_PYTHON)})"
            for a, p in zip(tool.arg_names, tool.params)
        )
        return f"{regex_literal(tool.name)}\\({args}\\)"


PYTHON = PythonStyle()
