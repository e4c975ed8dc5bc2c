"""Action grammars: the language of one step's valid replies, for constrained decoding.

A server with structured outputs (vLLM's ``json`` / ``regex`` structured outputs) can be told
to sample only strings in a grammar. :func:`action_grammar` writes, for one step, a grammar
whose language is exactly the legal actions as the harness writes them: a JSON schema when
the reply is a call object (the ``json`` tool style, or any style on the ``native`` channel,
whose reply is ``{"name": ..., "arguments": {...}}``), a regular expression otherwise. With
it, format errors are impossible and what is left of the mismatch is the agent's choice.

When a step has more legal actions than ``max_alternatives`` (or lists none), the grammar is
per tool instead (tool names and typed arguments, strings bounded by ``max_string``): every
valid action still matches, but so do some illegal ones, and :attr:`ActionGrammar.exact`
says so. Per-tool or exact, every string a grammar admits parses (an illegal action is a
legal reply's shape with other values, never a format error); JSON schemas count ``2.0`` as
the integer 2, and so do the parsers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness_gym.core.task import Action
from harness_gym.core.tools import STYLES

if TYPE_CHECKING:
    from harness_gym.core.tools import Toolbox

#: Regex metacharacters escaped in literal alternatives (a portable subset: no ``\\ `` escapes
#: of ordinary characters, which some grammar engines reject).
_META = set(".^$*+?{}[]|()\\")


@dataclass(frozen=True)
class ActionGrammar:
    """One step's grammar.

    Attributes:
        kind: ``"json_schema"`` (``value`` is a JSON schema dict) or ``"regex"`` (a pattern).
        value: the schema or the pattern.
        exact: whether the language is exactly the legal actions (else a superset).
        alternatives: how many legal actions it was written for.
    """

    kind: str
    value: Any
    exact: bool
    alternatives: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "value": self.value,
            "exact": self.exact,
            "alternatives": self.alternatives,
        }


def regex_literal(text: str) -> str:
    """``text`` as a regular expression matching only itself."""
    out = []
    for ch in text:
        if ch in _META:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        else:
            out.append(ch)
    return "".join(out)


def action_grammar(
    toolbox: Toolbox,
    actions: Sequence[Action],
    *,
    native: bool = False,
    max_alternatives: int = 256,
    max_string: int = 200,
) -> ActionGrammar:
    """The grammar of replies that write one of ``actions`` through ``toolbox``."""
    exposed = [a for a in actions if a.name in {t.spec.name for t in toolbox.tools}]
    exact = 0 < len(exposed) <= max_alternatives
    if native or toolbox.style == "json":
        if exact:
            options = [_call_schema(*toolbox.call(a)) for a in exposed]
        else:
            options = [_tool_schema(toolbox, tool, max_string) for tool in toolbox.tools]
        schema = options[0] if len(options) == 1 else {"anyOf": options}
        return ActionGrammar("json_schema", schema, exact, len(exposed))
    if toolbox.style == "json_flat":
        if exact:
            options = [_flat_schema(*toolbox.call(a)) for a in exposed]
        else:
            options = [_flat_tool_schema(toolbox, tool, max_string) for tool in toolbox.tools]
        schema = options[0] if len(options) == 1 else {"anyOf": options}
        return ActionGrammar("json_schema", schema, exact, len(exposed))
    if exact:
        pattern = "|".join(regex_literal(toolbox.format(a)) for a in exposed)
    elif toolbox.style in STYLES:  # a registered style has no per-tool pattern: any reply
        pattern = f"[\\s\\S]{{1,{toolbox.max_chars}}}"
    else:
        pattern = "|".join(_tool_regex(toolbox, tool, max_string) for tool in toolbox.tools)
    return ActionGrammar("regex", f"({pattern})", exact, len(exposed))


def _call_schema(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
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


def _bounded_arguments(toolbox: Toolbox, tool: Any, max_string: int) -> dict[str, Any]:
    """The tool's argument schema with every string bounded to ``max_string`` characters."""
    args = toolbox.json_schema(tool)
    for prop in args["properties"].values():
        if prop.get("type") == "string":
            prop["maxLength"] = max_string
            if toolbox.style == "bracket":  # a native call is written back as tool [a] [b]
                prop["pattern"] = f"^{_BRACKET_TEXT}*$"
        else:
            prop["minimum"], prop["maximum"] = -_INT_BOUND, _INT_BOUND
    return args


def _tool_schema(toolbox: Toolbox, tool: Any, max_string: int) -> dict[str, Any]:
    args = _bounded_arguments(toolbox, tool, max_string)
    return {
        "type": "object",
        "properties": {"name": {"const": tool.name}, "arguments": args},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def _flat_schema(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from harness_gym.core.tools import FLAT_KEY

    return {
        "type": "object",
        "properties": {FLAT_KEY: {"const": name}, **{k: {"const": v} for k, v in arguments.items()}},
        "required": [FLAT_KEY, *arguments],
        "additionalProperties": False,
    }


def _flat_tool_schema(toolbox: Toolbox, tool: Any, max_string: int) -> dict[str, Any]:
    from harness_gym.core.tools import FLAT_KEY

    args = _bounded_arguments(toolbox, tool, max_string)
    return {
        "type": "object",
        "properties": {FLAT_KEY: {"const": tool.name}, **args["properties"]},
        "required": [FLAT_KEY, *args["required"]],
        "additionalProperties": False,
    }


#: An integer as the text styles read it (``[+-]?`` digits, at most 18) and as Python does
#: (no leading zeros: ``01`` is not a Python literal).
_INT_TEXT = r"-?[0-9]{1,18}"
_INT_PYTHON = r"-?(0|[1-9][0-9]{0,17})"
#: The escapes ``repr`` writes in a string (no ``\N{...}``, no octal, no unknown escapes,
#: which Python rejects or warns about).
_PY_ESCAPE = r"\\([\\'\"abfnrtv]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U000[0-9a-fA-F]{5}|U0010[0-9a-fA-F]{4})"
#: Integer bounds of per-tool JSON schemas: the 18 digits every parser reads as an integer.
_INT_BOUND = 10**18 - 1
#: A bracket argument: no ``]`` (it would close the argument) and no newline.
_BRACKET_TEXT = "[^\\]\\n]"


def _python_string(n: int) -> str:
    """A Python string literal as ``repr`` writes it: either quote, the escapes above, no raw
    newline, carriage return or NUL (Python rejects all three)."""
    single = f"'([^'\\\\\\n\\r\\x00]|{_PY_ESCAPE}){{0,{n}}}'"
    double = f'"([^"\\\\\\n\\r\\x00]|{_PY_ESCAPE}){{0,{n}}}"'
    return f"({single}|{double})"


#: A float as ``repr`` and JSON write it (``12.5``, ``1e-05``, ``-0.25``).
_FLOAT = r"-?[0-9]{1,17}(\.[0-9]{1,17})?([eE][+-]?[0-9]{1,3})?"
#: At most this many items in a list argument of a per-tool pattern.
_MAX_ITEMS = 32


def _json_string(n: int) -> str:
    """A JSON string literal of at most ``n`` characters, on one line."""
    return f'"([^"\\\\\\n]|\\\\["\\\\/bfnrt]|\\\\u[0-9a-fA-F]{{4}}){{0,{n}}}"'


def _typed(param: Any, string: str, item_string: str, integer: str) -> str:
    """The pattern of an argument where the style writes it as a literal: ``integer``,
    ``string``, a number, or ``[item, item]`` with the style's items."""
    if param.type == "int":
        return integer
    if param.type == "float":
        return _FLOAT
    if param.type.startswith("list["):
        item = integer if param.type == "list[int]" else item_string
        return f"\\[({item}(, {item}){{0,{_MAX_ITEMS - 1}}})?\\]"
    return string


def _tool_regex(toolbox: Toolbox, tool: Any, max_string: int) -> str:
    """One tool's calls in a non-JSON style: its name and typed, bounded arguments.

    The language holds every call the style writes whose strings fit in ``max_string``
    characters (bracket: strings without ``]`` or a newline; command: at most 8 quotes in
    a string), and only strings its parser reads as a call of that tool.
    """
    n = max_string
    name = regex_literal(tool.name)
    if toolbox.style == "python":
        string = _python_string(n)
        args = ", ".join(
            f"{regex_literal(a)}=({_typed(p, string, string, _INT_PYTHON)})"
            for a, p in zip(tool.arg_names, tool.params)
        )
        return f"{name}\\({args}\\)"
    if toolbox.style == "python_positional":
        number = f"('{_INT_TEXT}'|\"{_INT_TEXT}\")"  # an id written as a string, e.g. '12'
        values = ", ".join(number if p.type == "int" else _python_string(n) for p in tool.params)
        return f"{name}\\({values}\\)"
    if toolbox.style == "bracket":
        text = f"{_BRACKET_TEXT}{{0,{n}}}"
        values = "".join(
            f" \\[({_INT_TEXT if p.type == 'int' else _typed(p, text, _json_string(n), _INT_TEXT)})\\]"
            for p in tool.params
        )
        return f"{name}{values}"
    if toolbox.style == "xml":
        char = "([^<&]|&(lt|gt|amp|quot|apos);|&#x[0-9a-fA-F]{1,6};|&#[0-9]{1,7};)"
        body = "".join(
            f"<{regex_literal(a)}>({_INT_TEXT if p.type == 'int' else f'{char}{{0,{n}}}'})"
            f"</{regex_literal(a)}>"
            for a, p in zip(tool.arg_names, tool.params)
        )
        return f"<{name}>{body}</{name}>"
    # command: a string is a bare shell-safe word or single-quoted pieces joined by "'"
    quoted = f"'[^']{{0,{n}}}'"
    string = f'([A-Za-z0-9_@%+=:,./-]{{1,{n}}}|{quoted}("\'"{quoted}){{0,8}})'
    values = "".join(f" ({_INT_TEXT if p.type == 'int' else string})" for p in tool.params)
    return f"{name}{values}"


def describe(grammar: ActionGrammar | None) -> str:
    """A short record of which grammar constrained a request (for result rows)."""
    if grammar is None:
        return "none"
    return f"{grammar.kind}:{'exact' if grammar.exact else 'per-tool'}"
