"""The ``json_flat`` tool style: MiniWoB++'s action dict ``{"action_type": <tool>, <arg>: <value>, ...}``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness_gym.core.tools.errors import ActionError, preview
from harness_gym.core.tools.json_style import object_spans, one_of
from harness_gym.core.tools.json_text import dump_json, load_reply
from harness_gym.core.tools.style import Style
from harness_gym.core.tools.toolbox_grammar import bounded_arguments

if TYPE_CHECKING:
    from harness_gym.core.task import Action
    from harness_gym.core.tools.style import ToolboxView
    from harness_gym.core.tools.tool import Tool

#: The key that names the tool in a ``json_flat`` call (MiniWoB++'s action dict); no argument
#: may take this name.
FLAT_KEY = "action_type"


class JsonFlatStyle(Style):
    name = "json_flat"
    hint = f'Reply with one JSON object: {{"{FLAT_KEY}": <tool>, <argument>: <value>, ...}}.'
    native_values = True

    def reserved_word(self, name: str, is_tool: bool) -> bool:
        return not is_tool and name == FLAT_KEY

    def write(self, tool: str, pairs: Sequence[tuple[str, Any]]) -> str:
        return json.dumps({FLAT_KEY: tool, **dict(pairs)}, ensure_ascii=False)

    def write_call(self, toolbox: ToolboxView, name: str, arguments: Any) -> str:
        if not isinstance(arguments, dict) or FLAT_KEY in arguments:
            # Not an object of arguments: written so that the parser reports it.
            return dump_json({FLAT_KEY: name, "arguments": arguments})
        return dump_json({FLAT_KEY: name, **arguments})

    def read(self, toolbox: ToolboxView, text: str) -> Action:
        data = load_reply(text, toolbox.lenient)
        if not isinstance(data, dict) or FLAT_KEY not in data:
            raise ActionError(
                "malformed", f'expected a JSON object {{"{FLAT_KEY}": <tool>, ...}}, got {preview(text)}'
            )
        tool = toolbox.tool_named(data.pop(FLAT_KEY))
        return toolbox.build(tool, data, from_text=False)

    def spans(self, text: str, tools: Mapping[str, Tool]) -> list[tuple[int, int]]:
        return object_spans(text)

    def grammar(
        self, toolbox: ToolboxView, actions: Sequence[Action], exact: bool, max_string: int
    ) -> tuple[str, Any]:
        """A JSON schema: the action dicts of ``actions``, or each tool's typed dicts."""
        if exact:
            options = [flat_schema(*toolbox.call(a)) for a in actions]
        else:
            options = [flat_tool_schema(toolbox, tool, max_string) for tool in toolbox.tools]
        return "json_schema", one_of(options)


def flat_schema(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {FLAT_KEY: {"const": name}, **{k: {"const": v} for k, v in arguments.items()}},
        "required": [FLAT_KEY, *arguments],
        "additionalProperties": False,
    }


def flat_tool_schema(toolbox: ToolboxView, tool: Tool, max_string: int) -> dict[str, Any]:
    args = bounded_arguments(toolbox, tool, max_string)
    return {
        "type": "object",
        "properties": {FLAT_KEY: {"const": tool.name}, **args["properties"]},
        "required": [FLAT_KEY, *args["required"]],
        "additionalProperties": False,
    }


JSON_FLAT = JsonFlatStyle()
