"""The ``command`` tool style: one command line, the tool name and its arguments in order,
shell-quoted where needed (``type 3 'hello world'``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness_gym.core.grammar import INT_TEXT, regex_literal
from harness_gym.core.tools.errors import ActionError, preview
from harness_gym.core.tools.json_text import dump_json, text_value, unparsed
from harness_gym.core.tools.scan import COMMAND_PREFIX, command_end, split_command
from harness_gym.core.tools.style import Style

if TYPE_CHECKING:
    from harness_gym.core.task import Action
    from harness_gym.core.tools.style import ToolboxView
    from harness_gym.core.tools.tool import Tool

_SHELL_SAFE = re.compile(r"[\w@%+=:,./-]+\Z", re.ASCII)


def shell_quote(text: str) -> str:
    """``text`` as one shell word: as itself when safe, else single-quoted."""
    if text and _SHELL_SAFE.match(text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"


class CommandStyle(Style):
    name = "command"
    hint = (
        "Reply with one command line: the tool name followed by its arguments "
        "in order, shell-quoted where needed."
    )

    def write(self, tool: str, pairs: Sequence[tuple[str, Any]]) -> str:
        parts = [tool] + [str(v) if isinstance(v, int) else shell_quote(v) for _, v in pairs]
        return " ".join(parts)

    def write_call(self, toolbox: ToolboxView, name: str, arguments: Any) -> str:
        if not isinstance(arguments, dict):
            # Not an object: written so that the parser reports a malformed call.
            return f"{name} {shell_quote(unparsed(arguments))} '"
        pairs = toolbox.positional(name, arguments)
        if pairs is None:  # names that cannot be placed: written so that the parser reports them
            return f"{name} {shell_quote(dump_json(arguments))} '"
        values = [
            str(v) if isinstance(v, int) and not isinstance(v, bool) else shell_quote(text_value(v))
            for _, v in pairs
        ]
        return " ".join([shell_quote(name), *values])

    def read(self, toolbox: ToolboxView, text: str) -> Action:
        try:
            tokens = split_command(text)
        except ValueError as err:
            raise ActionError("malformed", f"cannot split command ({err}): {preview(text)}") from None
        if not tokens:
            raise ActionError("empty", "empty command")
        tool = toolbox.tool_named(tokens[0])
        values = tokens[1:]
        if len(values) > len(tool.arg_names):
            raise ActionError(
                "extra_argument",
                f"tool {tool.name!r} takes {len(tool.arg_names)} argument(s) "
                f"({' '.join(tool.arg_names)}), got {len(values)}",
            )
        return toolbox.build(tool, dict(zip(tool.arg_names, values)), from_text=True)

    def count_actions(self, toolbox: ToolboxView, text: str) -> int:
        """How many complete commands a line holds (``click 1 click 2`` is 2)."""
        try:
            tokens = split_command(text.strip().lstrip("$> ").strip("`"))
        except ValueError:
            return 0
        count = i = 0
        while i < len(tokens):
            tool = toolbox.by_name.get(tokens[i])
            if tool is None or i + 1 + len(tool.arg_names) > len(tokens):
                return 0
            i += 1 + len(tool.arg_names)
            count += 1
        return count

    def spans(self, text: str, tools: Mapping[str, Tool]) -> list[tuple[int, int]]:
        """Each command starting a line (after a prompt or backtick), or following another
        command's ``;`` / ``&&``, with a shown tool name, to its first unquoted newline, ``;``
        or ``&&`` (so ``click 3;;click 7`` is two commands, never the first alone)."""
        spans: list[tuple[int, int]] = []
        pos, n = 0, len(text)
        unclosed: dict[str, int] = {}
        chained = False  # the last command ended at ; or && on this line
        while pos < n:
            line_end = text.find("\n", pos)
            line_end = n if line_end < 0 else line_end
            start = pos
            skip = COMMAND_PREFIX + ";&," if chained else COMMAND_PREFIX
            while start < line_end and text[start] in skip:
                start += 1
            word_end = start
            while word_end < line_end and not text[word_end].isspace() and text[word_end] not in ";`":
                word_end += 1
            if text[start:word_end] not in tools:
                pos, chained = line_end + 1, False
                continue
            end = command_end(text, word_end, unclosed)
            spans.append((start, end))
            chained = end < n and text[end] in ";&"
            pos = end + 1
        return spans

    def tool_pattern(self, toolbox: ToolboxView, tool: Tool, max_string: int) -> str:
        """A string is a bare shell-safe word or single-quoted pieces joined by ``"'"`` (at
        most 8 quotes in a string)."""
        n = max_string
        quoted = f"'[^']{{0,{n}}}'"
        string = f'([A-Za-z0-9_@%+=:,./-]{{1,{n}}}|{quoted}("\'"{quoted}){{0,8}})'
        values = "".join(f" ({INT_TEXT if p.type == 'int' else string})" for p in tool.params)
        return f"{regex_literal(tool.name)}{values}"


COMMAND = CommandStyle()
