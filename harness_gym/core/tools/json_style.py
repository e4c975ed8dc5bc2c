"""The ``json`` tool style: ``{"name": <tool>, "arguments": {...}}`` (the call object of
OpenAI-style function calling; also the reply shape of the native channel)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness_gym.core.tools.errors import ActionError, preview
from harness_gym.core.tools.json_text import DuplicateKeyError, dump_json, load_json, load_reply
from harness_gym.core.tools.scan import balanced_end
from harness_gym.core.tools.style import Style
from harness_gym.core.tools.toolbox_grammar import bounded_arguments

if TYPE_CHECKING:
    from harness_gym.core.task import Action
    from harness_gym.core.tools.style import ToolboxView
    from harness_gym.core.tools.tool import Tool


def object_spans(text: str) -> list[tuple[int, int]]:
    """Each balanced ``{...}`` group, left to right (quote-aware; one that never closes ends
    the scan)."""
    spans, pos = [], 0
    while (start := text.find("{", pos)) >= 0:
        end = balanced_end(text, start, "{", "}")
        if end < 0:
            break
        spans.append((start, end))
        pos = end
    return spans


def one_of(options: list[dict[str, Any]]) -> dict[str, Any]:
    """One schema, or ``anyOf`` several."""
    return options[0] if len(options) == 1 else {"anyOf": options}


class JsonStyle(Style):
    name = "json"
    hint = 'Reply with one JSON object: {"name": <tool>, "arguments": {...}}.'
    native_values = True

    def write(self, tool: str, pairs: Sequence[tuple[str, Any]]) -> str:
        return json.dumps({"name": tool, "arguments": dict(pairs)}, ensure_ascii=False)

    def write_call(self, toolbox: ToolboxView, name: str, arguments: Any) -> str:
        return dump_json({"name": name, "arguments": arguments})

    def read(self, toolbox: ToolboxView, text: str) -> Action:
        data = load_reply(text, toolbox.lenient)
        if not isinstance(data, dict) or "name" not in data:
            raise ActionError(
                "malformed",
                f'expected a JSON object {{"name": <tool>, "arguments": {{...}}}}, got {preview(text)}',
            )
        extra_keys = set(data) - {"name", "arguments"}
        if extra_keys and not toolbox.lenient:
            raise ActionError(
                "malformed", f"unexpected key(s) {sorted(map(str, extra_keys))} in the call object"
            )
        tool = toolbox.tool_named(data["name"])
        arguments = data.get("arguments", {})
        if isinstance(arguments, str) and toolbox.lenient:
            try:
                arguments = load_json(arguments) if arguments.strip() else {}
            except DuplicateKeyError as err:
                raise ActionError("malformed", f'"arguments": {err}: give each key once') from None
            except (ValueError, RecursionError):
                pass
        if not isinstance(arguments, dict):
            raise ActionError(
                "malformed", f'"arguments" must be a JSON object, got {preview(repr(arguments))}'
            )
        return toolbox.build(tool, arguments, from_text=False)

    def spans(self, text: str, tools: Mapping[str, Tool]) -> list[tuple[int, int]]:
        return object_spans(text)

    def grammar(
        self, toolbox: ToolboxView, actions: Sequence[Action], exact: bool, max_string: int
    ) -> tuple[str, Any]:
        """A JSON schema: the call objects of ``actions``, or each tool's typed calls."""
        if exact:
            options = [call_schema(*toolbox.call(a)) for a in actions]
        else:
            options = [tool_schema(toolbox, tool, max_string) for tool in toolbox.tools]
        return "json_schema", one_of(options)


def call_schema(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The schema of exactly one call object."""
    return {
        "type": "object",
        "properties": {
            "name": {"const": name},
            "arguments": {
                "type": "object",
                "properties": {k: {"const": v} for k, v in arguments.items()},
                "required": list(arguments),
                "additionalProperties": False,
            },
        },
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def tool_schema(toolbox: ToolboxView, tool: Tool, max_string: int) -> dict[str, Any]:
    """The schema of one tool's call objects, strings bounded by ``max_string``."""
    args = bounded_arguments(toolbox, tool, max_string)
    return {
        "type": "object",
        "properties": {"name": {"const": tool.name}, "arguments": args},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


JSON = JsonStyle()
