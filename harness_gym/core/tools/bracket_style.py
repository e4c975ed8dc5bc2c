"""The ``bracket`` tool style: WebArena's ``tool [a] [b]``, each argument in square brackets."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness_gym.core.grammar import INT_TEXT, json_string, regex_literal, typed
from harness_gym.core.tools.errors import ActionError, preview
from harness_gym.core.tools.json_text import dump_json, unparsed, written_value
from harness_gym.core.tools.scan import COMMAND_PREFIX, balanced_end
from harness_gym.core.tools.style import Style

if TYPE_CHECKING:
    from harness_gym.core.task import Action
    from harness_gym.core.tools.style import ToolboxView
    from harness_gym.core.tools.tool import Tool

_BRACKET_NAME = re.compile(r"[^\s\[\]]+")
_BRACKET_STOP = re.compile(r"[\]\n]")
#: A bracket argument: no ``]`` (it would close the argument) and no newline.
BRACKET_TEXT = "[^\\]\\n]"


#: ``] [`` inside the last argument: the reply closed it and opened another bracket group
#: (``type [2] [a] [b]``), which is one argument too many, not the text ``a] [b``.
_EXTRA_GROUP = re.compile(r"\][ \t]*\[")


class BracketStyle(Style):
    name = "bracket"
    hint = (
        "Reply with one action: the tool name, then each argument in square brackets, e.g. tool [12] [text]."
    )
    # A native call is written back as tool [a] [b]: its strings must fit in brackets.
    native_string_pattern = f"^{BRACKET_TEXT}*$"

    def write(self, tool: str, pairs: Sequence[tuple[str, Any]]) -> str:
        return " ".join([tool, *(f"[{v}]" for _, v in pairs)])

    def write_call(self, toolbox: ToolboxView, name: str, arguments: Any) -> str:
        if not isinstance(arguments, dict):
            return f"{name} [{unparsed(arguments)}"
        pairs = toolbox.positional(name, arguments)
        if pairs is None:  # names that cannot be placed: written so that the parser reports them
            return f"{name} [{dump_json(arguments)}"
        return " ".join([name, *(f"[{written_value(v)}]" for _, v in pairs)])

    def read(self, toolbox: ToolboxView, text: str) -> Action:
        """Each argument in brackets; the last runs to the last ``]`` (as WebArena's own
        regexes read ``type [id] [text]``), so it may hold ``]`` (unless what it holds is
        further actions: :meth:`check_whole` answers ``multiple_actions``)."""
        head = _BRACKET_NAME.match(text)
        if head is None:
            raise ActionError("malformed", f"expected an action like tool [argument], got {preview(text)}")
        tool = toolbox.tool_named(head.group(0))
        values: list[str] = []
        pos, n = head.end(), len(tool.arg_names)
        for i in range(n):
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos >= len(text):
                missing = list(tool.arg_names[i:])
                raise ActionError(
                    "missing_argument",
                    f"tool {tool.name!r} is missing argument(s) {missing}; write each as [value]",
                )
            if text[pos] != "[":
                raise ActionError(
                    "malformed", f"expected [ before argument {tool.arg_names[i]!r}: {preview(text)}"
                )
            end = text.rfind("]") if i == n - 1 else text.find("]", pos + 1)
            if i < n - 1 and tool.params[i].type.startswith("list[") and text.startswith("[[", pos):
                inner = balanced_end(text, pos + 1, "[", "]")  # a JSON list inside the brackets
                end = inner if inner > 0 and text.startswith("]", inner) else -1
            if end <= pos:
                raise ActionError(
                    "malformed", f"argument {tool.arg_names[i]!r} has no closing ]: {preview(text)}"
                )
            value = text[pos + 1 : end]
            if i == n - 1 and _EXTRA_GROUP.search(value):
                raise ActionError(
                    "extra_argument",
                    f"tool {tool.name!r} takes {n} argument(s) ({' '.join(tool.arg_names)}) but the "
                    f"reply has another [group] after them: {preview(text)}",
                )
            values.append(value)
            pos = end + 1
        rest = text[pos:].strip()
        if rest:
            kind = "extra_argument" if rest.startswith("[") else "malformed"
            raise ActionError(
                kind, f"unexpected text after {tool.name!r} and its {n} argument(s): {preview(rest)}"
            )
        return toolbox.build(tool, dict(zip(tool.arg_names, values)), from_text=True)

    def check_whole(self, toolbox: ToolboxView, text: str, action: Action) -> None:
        """``multiple_actions`` when the last argument (which runs to the last ``]``)
        swallowed further actions: ``type [2] [Iris]\\nclick [3]``."""
        if text.count("]") <= len(toolbox.by_canonical[action.name].arg_names):
            return
        spans = toolbox.spans(text)
        if len(spans) >= 2 and all(toolbox.try_read(text[s:e]) for s, e, _ in spans):
            raise toolbox.multiple(len(spans))

    def spans(self, text: str, tools: Mapping[str, Tool]) -> list[tuple[int, int]]:
        """Spans of ``tool [a] [b]`` actions, each argument closed on its own line (linear
        time). A tool without arguments counts only as a whole line. The position of the next
        ``]`` or newline is remembered, so a line of unclosed brackets is scanned once, not
        once per name."""
        names = sorted(tools, key=len, reverse=True)
        spans: list[tuple[int, int]] = []
        head = re.compile(r"(?<![\w.])(?:" + "|".join(map(re.escape, names)) + r")(?![\w.])")
        stop_from, stop_at = -1, -1
        pos, n = 0, len(text)
        while (m := head.search(text, pos)) is not None:
            tool = tools[m.group(0)]
            i, ok = m.end(), True
            for _ in tool.arg_names:
                while i < n and text[i] in " \t":
                    i += 1
                if i >= n or text[i] != "[":
                    ok = False
                    break
                if not stop_from <= i + 1 <= stop_at:
                    stop = _BRACKET_STOP.search(text, i + 1)
                    stop_from, stop_at = i + 1, stop.start() if stop else n
                if stop_at >= n or text[stop_at] != "]":
                    ok = False
                    break
                i = stop_at + 1
            if ok and not tool.arg_names:
                line_start = text.rfind("\n", 0, m.start()) + 1
                line_end = text.find("\n", m.end())
                line_end = n if line_end < 0 else line_end
                ok = not text[line_start : m.start()].strip(COMMAND_PREFIX) and not text[
                    m.end() : line_end
                ].strip(" \t`")
            if ok:
                spans.append((m.start(), i))
                pos = i
            else:
                pos = m.end()
        return spans

    def tool_pattern(self, toolbox: ToolboxView, tool: Tool, max_string: int) -> str:
        text = f"{BRACKET_TEXT}{{0,{max_string}}}"
        values = "".join(
            f" \\[({INT_TEXT if p.type == 'int' else typed(p, text, json_string(max_string), INT_TEXT)})\\]"
            for p in tool.params
        )
        return f"{regex_literal(tool.name)}{values}"


BRACKET = BracketStyle()
