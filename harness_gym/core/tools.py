"""Tools: how canonical actions are named, described, written and parsed under a harness.

A :class:`Toolbox` binds a task's canonical :class:`~harness_gym.core.task.ActionSpec` list
to four harness factors: tool naming, tool order, tool set (dropped tools) and tool style.
It writes schemas (OpenAI-style function tools, Anthropic-style tools and a text form for
the system prompt), formats a canonical action in the style, and parses agent output back.
Parsing never raises anything but :class:`ActionError`, whatever the input.
"""

from __future__ import annotations

import ast
import bisect
import json
import keyword
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from harness_gym.core.plugins import LiveLevels, PluginError, set_loader
from harness_gym.core.task import Action, ActionSpec, Param

#: The tool styles this package defines; :func:`register_tool_style` adds more.
TOOL_STYLES = ("json", "xml", "python", "command", "python_positional", "bracket", "json_flat")
#: Tool styles added to reproduce real systems (BrowserGym, WebArena, MiniWoB++; see
#: docs/presets.md): full levels everywhere, but left out of ``DEFAULT_SPACE`` so that its
#: designs (and results recorded over them) stay as they were.
CONVENTION_STYLES = ("python_positional", "bracket", "json_flat")
TOOL_NAMINGS = ("canonical", "synonyms", "opaque")
TOOL_DESCRIPTIONS = ("full", "terse", "none")

#: Synonyms used by the ``synonyms`` naming, for tool and argument names alike.
SYNONYMS: dict[str, str] = {
    "click": "press",
    "type": "fill",
    "press": "send_key",
    "select": "choose",
    "ref": "element",
    "text": "value",
    "key": "key_name",
    "option": "choice",
    "run": "execute",
    "command": "cmd",
    "submit": "finish",
    "answer": "response",
}


#: Words a style's syntax reserves: a tool or argument with such a name could never be parsed
#: (``None(ref=1)`` is not a Python call), so harnesses reject them when they are built. The
#: other styles read any identifier as a name (a JSON string, an XML tag, a command word).
RESERVED_WORDS: dict[str, frozenset[str]] = {
    "json": frozenset(),
    "python": frozenset(keyword.kwlist),
    "xml": frozenset(),
    "command": frozenset(),
    "python_positional": frozenset(keyword.kwlist),
    "bracket": frozenset(),
    "json_flat": frozenset(),
}

#: The key that names the tool in a ``json_flat`` call (MiniWoB++'s action dict); no argument
#: may take this name.
FLAT_KEY = "action_type"


def reserved_word(style: str, name: str, is_tool: bool = True) -> bool:
    """Whether ``name`` (of a tool, or of an argument) is reserved by ``style``'s syntax."""
    custom = STYLES.get(style)
    if custom is not None:
        return name in custom.reserved
    if style == "json_flat" and not is_tool and name == FLAT_KEY:
        return True
    return name in RESERVED_WORDS.get(style, frozenset())


@dataclass(frozen=True)
class ToolStyle:
    """A tool style from outside the package: a new level of the ``tool_style`` factor.

    ``write(tool, [(arg, value), ...])`` writes one call as text; ``read(text)`` reads it back
    as ``(tool, {arg: value})`` and raises (any exception) on text that is not one call. The
    toolbox checks names, arguments and types, so ``read`` only undoes ``write``. With
    ``values_are_text`` the values ``read`` returns are strings (as in a command line) and
    integer arguments are converted. ``hint`` is the sentence the system prompt shows;
    ``reserved`` are words that cannot be tool or argument names.
    """

    name: str
    write: Callable[[str, Sequence[tuple[str, Any]]], str]
    read: Callable[[str], tuple[str, Mapping[str, Any]]]
    hint: str
    values_are_text: bool = False
    reserved: frozenset[str] = frozenset()


#: Registered (non-built-in) tool styles by name.
STYLES: dict[str, ToolStyle] = {}
_ALL_STYLES: dict[str, ToolStyle | None] = dict.fromkeys(TOOL_STYLES)

#: Every ``tool_style`` level: built-in, registered, and installed plugins' (loaded on demand).
STYLE_LEVELS = LiveLevels(_ALL_STYLES, "tool_styles")


def register_tool_style(style: ToolStyle) -> ToolStyle:
    """Add a tool style (a level of ``tool_style``); its name must be new."""
    if not isinstance(style, ToolStyle):
        raise TypeError(f"register_tool_style takes a ToolStyle, got {type(style).__name__}")
    if not style.name.isidentifier():
        raise ValueError(f"tool style name {style.name!r} must be an identifier such as slash")
    if style.name in TOOL_STYLES:
        raise ValueError(f"tool style {style.name!r} is a built-in level; choose another name")
    if style.name in STYLES and STYLES[style.name] != style:
        raise ValueError(f"tool style {style.name!r} is already registered")
    STYLES[style.name] = _ALL_STYLES[style.name] = style
    return style


class ActionError(Exception):
    """Agent output that does not make a legal action. ``kind`` names the problem class."""

    KINDS = (
        "empty",
        "too_long",
        "malformed",
        "unknown_tool",
        "missing_argument",
        "extra_argument",
        "wrong_type",
        "illegal_action",
        "multiple_actions",
    )

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def preview(text: str, limit: int = 80) -> str:
    """A short, printable, escape-safe view of untrusted text for error messages."""
    shown = text[:limit].encode("unicode_escape", "backslashreplace").decode("ascii")
    return shown + (f"... ({len(text)} chars)" if len(text) > limit else "")


class DuplicateKeyError(ValueError):
    """A JSON object that gives one key twice (JSON leaves the meaning open; we refuse it)."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"key {preview(key)!r} given twice")
        out[key] = value
    return out


def load_json(text: str) -> Any:
    """``json.loads`` that rejects an object giving a key twice (:class:`DuplicateKeyError`)
    and reads every non-integer number as an exact :class:`~decimal.Decimal` (so that
    ``2.0`` and ``2e0`` can count as the integer 2, as JSON Schema counts them)."""
    return json.loads(text, object_pairs_hook=_unique_pairs, parse_float=Decimal)


def json_integer(value: Any) -> int | None:
    """``value`` as an integer argument: a JSON integer, or a number with an integral value
    (``2.0``, ``2e0``) within 18 digits, as JSON Schema's ``integer`` admits; else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal) and value.is_finite() and (value.is_zero() or value.adjusted() < 18):
        integral = value.to_integral_value()
        return int(integral) if integral == value else None
    return None


def dump_json(value: Any) -> str:
    """``json.dumps`` of a value :func:`load_json` read (its numbers written back as numbers)."""
    return json.dumps(value, ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return _plain_number(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _plain_number(value: Any) -> Any:
    """A decoded JSON value with an integral number as ``int`` and other numbers as ``float``."""
    if isinstance(value, Decimal):
        whole = json_integer(value)
        return whole if whole is not None else float(value)
    return value


def _shown(value: Any) -> str:
    return preview(repr(_plain_number(value)))


def _synonym(name: str, is_tool: bool) -> str:
    if name in SYNONYMS:
        return SYNONYMS[name]
    return f"do_{name}" if is_tool else f"{name}_arg"


def _terse(description: str) -> str:
    first = description.split(".")[0].strip()
    return first[:40]


@dataclass(frozen=True)
class Tool:
    """One tool as a harness shows it: display names bound to a canonical action spec."""

    spec: ActionSpec
    name: str
    arg_names: tuple[str, ...]
    description: str
    arg_descriptions: tuple[str, ...]

    @property
    def params(self) -> tuple[Param, ...]:
        return self.spec.params


class Toolbox:
    """A task's canonical actions seen through one harness's tool factors."""

    def __init__(
        self,
        action_specs: Sequence[ActionSpec],
        *,
        style: str = "json",
        naming: str = "canonical",
        order: str | Sequence[str] = "canonical",
        drop: Sequence[str] = (),
        descriptions: str = "full",
        rename_tools: Mapping[str, str] | None = None,
        rename_args: Mapping[str, str] | None = None,
        lenient: bool = False,
        max_chars: int = 8192,
    ) -> None:
        known = [s.name for s in action_specs]
        unknown = [d for d in drop if d not in known]
        if unknown:
            raise ValueError(f"drop_tools names unknown tools {unknown}; this task's tools are {known}")
        rename_tools = dict(rename_tools or {})
        rename_args = dict(rename_args or {})
        unknown = [t for t in rename_tools if t not in known]
        if unknown:
            raise ValueError(f"rename_tools names unknown tools {unknown}; this task's tools are {known}")
        conflict = [t for t in rename_tools if t in drop]
        if conflict:
            raise ValueError(
                f"rename_tools renames {conflict}, which drop_tools removes; drop or rename, not both"
            )
        all_args = {p for s in action_specs for p in s.param_names}
        unknown = [a for a in rename_args if a not in all_args]
        if unknown:
            raise ValueError(
                f"rename_args names unknown arguments {unknown}; this task's arguments are {sorted(all_args)}"
            )
        tools = []
        for index, spec in enumerate(action_specs, start=1):
            if spec.name in drop:
                continue
            if naming == "canonical":
                name, args = spec.name, spec.param_names
            elif naming == "synonyms":
                name = _synonym(spec.name, True)
                args = tuple(_synonym(a, False) for a in spec.param_names)
            else:
                name = f"tool_{index}"
                args = tuple(f"arg_{i}" for i in range(1, len(spec.params) + 1))
            name = rename_tools.get(spec.name, name)
            args = tuple(rename_args.get(p, a) for p, a in zip(spec.param_names, args))
            if len(set(args)) != len(args):
                raise ValueError(f"rename_args gives tool {name!r} two arguments named alike: {args}")
            if descriptions == "full":
                desc, arg_desc = spec.description, tuple(p.description for p in spec.params)
            elif descriptions == "terse":
                desc = _terse(spec.description)
                arg_desc = tuple(_terse(p.description) for p in spec.params)
            else:
                desc, arg_desc = "", tuple("" for _ in spec.params)
            tools.append(Tool(spec, name, args, desc, arg_desc))
        for tool in tools:
            shown = [(tool.name, tool.spec.name, True)]
            shown += [(a, p.name, False) for a, p in zip(tool.arg_names, tool.params)]
            for name, canonical, is_tool in shown:
                if reserved_word(style, name, is_tool):
                    factor = "rename_tools" if is_tool else "rename_args"
                    raise ValueError(
                        f"{'tool' if is_tool else 'argument'} name {name!r} is a reserved word of the "
                        f"{style!r} tool style, so an action using it could never be parsed; "
                        f"choose another name (e.g. {factor}: {{{canonical}: {name}_}})"
                    )
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool naming {naming!r} gives clashing tool names {names}")
        self.tools: tuple[Tool, ...] = tuple(_ordered(tools, order, known))
        self.style = style
        self.lenient = lenient
        self.max_chars = max_chars
        self._by_name = {t.name: t for t in self.tools}
        self._by_canonical = {t.spec.name: t for t in self.tools}
        self._formatted: dict[Action, str] = {}

    # -- schemas ------------------------------------------------------------------------

    def json_schema(self, tool: Tool) -> dict[str, Any]:
        props = {}
        for param, name, desc in zip(tool.params, tool.arg_names, tool.arg_descriptions):
            prop: dict[str, Any] = param.json_schema()
            if desc:
                prop["description"] = desc
            props[name] = prop
        return {
            "type": "object",
            "properties": props,
            "required": list(tool.arg_names),
            "additionalProperties": False,
        }

    def openai_tools(self) -> list[dict[str, Any]]:
        """Tools in the OpenAI function-calling shape (what ``vllm serve`` accepts)."""
        return [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": self.json_schema(t),
                },
            }
            for t in self.tools
        ]

    def anthropic_tools(self) -> list[dict[str, Any]]:
        """Tools in the Anthropic Messages API shape."""
        return [
            {"name": t.name, "description": t.description, "input_schema": self.json_schema(t)}
            for t in self.tools
        ]

    def text_schema(self) -> str:
        """The tools as this style writes them, for the system prompt."""
        lines = []
        for t in self.tools:
            example = self.format(
                Action(
                    t.spec.name,
                    tuple(
                        (p.name, p.name if p.type == "str" and not p.choices else p.example())
                        for p in t.params
                    ),
                )
            )
            lines.append(f"- {example}" + (f"  # {t.description}" if t.description else ""))
            for arg, param, desc in zip(t.arg_names, t.params, t.arg_descriptions):
                typ = {"int": "integer", "str": "string", "float": "number"}.get(param.type, param.type)
                if param.choices:
                    typ += ", one of " + ", ".join(map(_written_value, param.choices))
                lines.append(f"    {arg} ({typ})" + (f": {desc}" if desc else ""))
        return "\n".join(lines)

    def format_hint(self) -> str:
        """One sentence telling the agent how to write an action in this style."""
        if self.style in STYLES:
            return STYLES[self.style].hint
        return {
            "json": 'Reply with one JSON object: {"name": <tool>, "arguments": {...}}.',
            "xml": "Reply with one XML element named after the tool, one child element per "
            "argument, e.g. <tool><arg>value</arg></tool>.",
            "python": "Reply with one Python function call with keyword arguments, e.g. tool(arg=1).",
            "python_positional": "Reply with one Python function call with positional arguments, "
            "element ids written as strings, e.g. tool('12', 'text').",
            "bracket": "Reply with one action: the tool name, then each argument in square "
            "brackets, e.g. tool [12] [text].",
            "json_flat": f'Reply with one JSON object: {{"{FLAT_KEY}": <tool>, <argument>: <value>, ...}}.',
            "command": "Reply with one command line: the tool name followed by its arguments "
            "in order, shell-quoted where needed.",
        }[self.style]

    # -- writing ------------------------------------------------------------------------

    def format(self, action: Action) -> str:
        """Write a canonical action in this toolbox's style and names (memoized)."""
        text = self._formatted.get(action)
        if text is None:
            if len(self._formatted) >= 8192:
                self._formatted.clear()
            text = self._formatted[action] = self._format(action)
        return text

    def _format(self, action: Action) -> str:
        tool = self._by_canonical.get(action.name)
        if tool is None:
            raise KeyError(f"action {action.name!r} is not a tool of this harness")
        values = [self._written_arg(p, action[p.name]) for p in tool.params]
        pairs = list(zip(tool.arg_names, values))
        if self.style == "json":
            return json.dumps({"name": tool.name, "arguments": dict(pairs)}, ensure_ascii=False)
        if self.style == "python":
            inner = ", ".join(f"{k}={v!r}" for k, v in pairs)
            return f"{tool.name}({inner})"
        if self.style == "python_positional":
            return f"{tool.name}({', '.join(repr(str(v)) for _, v in pairs)})"
        if self.style == "bracket":
            return " ".join([tool.name, *(f"[{v}]" for _, v in pairs)])
        if self.style == "json_flat":
            return json.dumps({FLAT_KEY: tool.name, **dict(pairs)}, ensure_ascii=False)
        if self.style == "xml":
            inner = "".join(f"<{k}>{_xml_escape(str(v))}</{k}>" for k, v in pairs)
            return f"<{tool.name}>{inner}</{tool.name}>"
        if self.style in STYLES:
            return STYLES[self.style].write(tool.name, pairs)
        parts = [tool.name] + [str(v) if isinstance(v, int) else _shell_quote(v) for _, v in pairs]
        return " ".join(parts)

    def _written_arg(self, param: Param, value: Any) -> Any:
        """A value as this style writes it: an int or str as itself, a number or a list as a
        JSON value where the style writes JSON or Python, else as JSON text."""
        if param.is_text_or_int:
            return value
        value = list(value) if isinstance(value, tuple) else value
        return value if self.style in ("json", "json_flat", "python") else dump_json(value)

    def call(self, action: Action) -> tuple[str, dict[str, Any]]:
        """A canonical action as a native function call: the tool's name and its arguments."""
        tool = self._by_canonical.get(action.name)
        if tool is None:
            raise KeyError(f"action {action.name!r} is not a tool of this harness")
        return tool.name, {
            n: list(v) if isinstance(v := action[p.name], tuple) else v
            for p, n in zip(tool.params, tool.arg_names)
        }

    def write_call(self, name: Any, arguments: Any) -> str:
        """Write a model's native tool call in this style, without checking it.

        ``arguments`` is the JSON text (or an already decoded value) the model returned.
        Whatever is wrong with the call (unknown tool, arguments that are not a JSON
        object, a wrong or missing argument) is left for :meth:`parse` to report.
        """
        name = str(name)
        if isinstance(arguments, str):
            try:
                arguments = load_json(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError):
                pass  # left as text: the parser reports it (a key given twice included)
        if isinstance(arguments, dict):
            arguments = {k: _plain_number(v) for k, v in arguments.items()}
        if self.style == "json":
            return dump_json({"name": name, "arguments": arguments})
        if self.style == "json_flat":
            if not isinstance(arguments, dict) or FLAT_KEY in arguments:
                # Not an object of arguments: written so that the parser reports it.
                return dump_json({FLAT_KEY: name, "arguments": arguments})
            return dump_json({FLAT_KEY: name, **arguments})
        if self.style in STYLES:
            if not isinstance(arguments, dict):
                return f"{name} {arguments!r}"  # left for parse to report
            return STYLES[self.style].write(name, [(str(k), v) for k, v in arguments.items()])
        if not isinstance(arguments, dict):
            # Not an object: written so that the style's parser reports a malformed call.
            raw = arguments if isinstance(arguments, str) else dump_json(arguments)
            if self.style in ("python", "python_positional"):
                return f"{name}({raw}"
            if self.style == "bracket":
                return f"{name} [{raw}"
            if self.style == "xml":
                return f"<{name}>{_xml_escape(raw)}"
            return f"{name} {_shell_quote(raw)} '"
        pairs = [(str(k), v) for k, v in arguments.items()]
        if self.style in ("python", "python_positional"):
            return f"{name}({', '.join(f'{k}={v!r}' for k, v in pairs)})"
        if self.style == "xml":
            inner = "".join(f"<{k}>{_xml_escape(_text_value(v))}</{k}>" for k, v in pairs)
            return f"<{name}>{inner}</{name}>"
        tool = self._by_name.get(name)
        if tool is not None:  # positional: the tool's argument order; extras go last
            known = [(k, arguments[k]) for k in tool.arg_names if k in arguments]
            pairs = known + [(k, v) for k, v in pairs if k not in tool.arg_names]
            if len(known) < len(tool.arg_names) and len(pairs) > len(known):
                # Names that cannot be placed: written so that the parser reports them.
                if self.style == "bracket":
                    return f"{name} [{dump_json(arguments)}"
                return f"{name} {_shell_quote(dump_json(arguments))} '"
        if self.style == "bracket":
            return " ".join([name, *(f"[{_written_value(v)}]" for _, v in pairs)])
        values = [
            str(v) if isinstance(v, int) and not isinstance(v, bool) else _shell_quote(_text_value(v))
            for _, v in pairs
        ]
        return " ".join([_shell_quote(name), *values])

    # -- parsing ------------------------------------------------------------------------

    def parse(self, text: str) -> Action:
        """Parse agent output into a canonical action, or raise :class:`ActionError`.

        The whole (stripped) text is tried first. If it is not one action, the text is
        searched for action spans (left to right, non-overlapping, each span skipping what
        it encloses, such as a fence inside a quoted argument). Strict: several complete
        actions separated only by whitespace, ``;``, ``,`` or list brackets are a
        ``multiple_actions`` error; anything else keeps the whole text's error. Lenient: the
        spans inside code fences if there are any, else all spans; exactly one that parses
        is the action, two or more are ``multiple_actions``. Names are compared exactly
        under both parsers (no Unicode normalization): lenient forgives layout, not names.
        Every step is linear in the length of the text.
        """
        if not text.strip():
            raise ActionError("empty", "empty action: reply with exactly one tool call")
        if len(text) > self.max_chars:
            raise ActionError(
                "too_long",
                f"action is {len(text)} characters long; the limit is {self.max_chars}",
            )
        parser = {
            "json": self._parse_json,
            "xml": self._parse_xml,
            "python": self._parse_python,
            "command": self._parse_command,
            "python_positional": self._parse_python_positional,
            "bracket": self._parse_bracket,
            "json_flat": self._parse_json_flat,
        }.get(self.style, self._parse_custom)
        try:
            action = parser(text.strip())
        except ActionError as err:
            whole = err
        else:
            if self.style == "bracket":
                self._one_bracket_action(text, action)
            return action
        # A registered style reads whole replies only: it has no span scanner.
        spans = _action_spans(text, self.style, self._by_name) if self.style in TOOL_STYLES else []
        if not self.lenient:
            if len(spans) >= 2 and _only_separators(text, spans):
                parsed = [self._try(parser, text[s:e]) for s, e, _ in spans]
                if all(isinstance(p, Action) for p in parsed):
                    raise self._multiple(len(parsed))
            if whole.kind == "extra_argument" and self.style == "command":
                count = self._command_count(text.strip())
                if count >= 2:
                    raise self._multiple(count)
            raise whole
        chosen = [sp for sp in spans if sp[2]] or spans
        found: list[Action] = []
        # Keep only the most specific error (a recognised tool beats "malformed"): holding
        # every error of a long text would keep its frames alive and slow the collector.
        best = whole
        first, last = len(text) - len(text.lstrip()), len(text.rstrip())
        for start, end, _ in chosen:
            candidate = text[start:end]
            result = whole if start <= first and end >= last else self._try(parser, candidate)
            if isinstance(result, Action):
                found.append(result)
                continue
            if best.kind == "malformed" != result.kind:
                best = result
            if result.kind == "extra_argument" and self.style == "command":
                count = self._command_count(candidate)
                if count >= 2:
                    raise self._multiple(count)
        if len(found) >= 2:
            raise self._multiple(len(found))
        if found:
            return found[0]
        raise best

    @staticmethod
    def _try(parser: Any, text: str) -> Action | ActionError:
        try:
            return parser(text.strip())
        except ActionError as err:
            err.__traceback__ = None
            return err

    @staticmethod
    def _multiple(count: int) -> ActionError:
        return ActionError(
            "multiple_actions",
            f"found {count} actions; this harness takes exactly one action per turn",
        )

    def _one_bracket_action(self, text: str, action: Action) -> None:
        """Raise ``multiple_actions`` when a bracket reply's last argument (which runs to the
        last ``]``) swallowed further actions: ``type [2] [Iris]\nclick [3]``."""
        if text.count("]") <= len(self._by_canonical[action.name].arg_names):
            return
        spans = _action_spans(text, "bracket", self._by_name)
        if len(spans) >= 2 and all(
            isinstance(self._try(self._parse_bracket, text[s:e]), Action) for s, e, _ in spans
        ):
            raise self._multiple(len(spans))

    def _command_count(self, text: str) -> int:
        """How many complete commands a command-style line holds (``click 1 click 2`` is 2)."""
        try:
            tokens = _split_command(text.strip().lstrip("$> ").strip("`"))
        except ValueError:
            return 0
        count = i = 0
        while i < len(tokens):
            tool = self._by_name.get(tokens[i])
            if tool is None or i + 1 + len(tool.arg_names) > len(tokens):
                return 0
            i += 1 + len(tool.arg_names)
            count += 1
        return count

    def _tool(self, name: Any) -> Tool:
        if not isinstance(name, str) or name not in self._by_name:
            raise ActionError(
                "unknown_tool",
                f"unknown tool {preview(str(name))}; available tools: {list(self._by_name)}",
            )
        return self._by_name[name]

    def _build(self, tool: Tool, given: dict[str, Any], from_text: bool) -> Action:
        extra = [k for k in given if k not in tool.arg_names]
        if extra:
            raise ActionError(
                "extra_argument",
                f"tool {tool.name!r} got unexpected argument(s) {[preview(str(k)) for k in extra]}; "
                f"its arguments are {list(tool.arg_names)}",
            )
        missing = [k for k in tool.arg_names if k not in given]
        if missing:
            raise ActionError(
                "missing_argument",
                f"tool {tool.name!r} is missing argument(s) {missing}; "
                f"its arguments are {list(tool.arg_names)}",
            )
        args = []
        for param, name in zip(tool.params, tool.arg_names):
            args.append((param.name, self._coerce(tool, name, param, given[name], from_text)))
        return Action(tool.spec.name, tuple(args))

    def _coerce(self, tool: Tool, name: str, param: Param, value: Any, from_text: bool) -> Any:
        value = self._coerce_type(tool, name, param, value, from_text)
        if param.choices and value not in param.choices:
            raise ActionError(
                "wrong_type",
                f"argument {name!r} of tool {tool.name!r} must be one of "
                f"{[_written_value(c) for c in param.choices]}, got {_shown(value)}",
            )
        return value

    def _coerce_type(self, tool: Tool, name: str, param: Param, value: Any, from_text: bool) -> Any:
        if not param.is_text_or_int:
            try:
                return param.coerce(_plain_number(value) if not isinstance(value, str) else value)
            except (ValueError, TypeError, RecursionError) as err:
                raise ActionError(
                    "wrong_type", f"argument {name!r} of tool {tool.name!r}: {err}, got {_shown(value)}"
                ) from None
        if param.type == "int":
            whole = json_integer(value)
            if whole is not None:
                return whole
            if isinstance(value, str) and (from_text or self.lenient):
                stripped = value.strip()
                if re.fullmatch(r"[+-]?[0-9]{1,18}", stripped):
                    return int(stripped)
            raise ActionError(
                "wrong_type",
                f"argument {name!r} of tool {tool.name!r} must be an integer, got {_shown(value)}",
            )
        if isinstance(value, str):
            return value
        if self.lenient and isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            return str(_plain_number(value))
        raise ActionError(
            "wrong_type",
            f"argument {name!r} of tool {tool.name!r} must be a string, got {_shown(value)}",
        )

    def _parse_custom(self, text: str) -> Action:
        style = STYLES[self.style]
        try:
            name, given = style.read(text)
        except ActionError:
            raise
        except Exception as err:  # noqa: BLE001 - a plugin's reader may raise anything
            raise ActionError("malformed", f"not one {style.name} action ({err}): {preview(text)}") from None
        if not isinstance(given, Mapping):
            raise ActionError("malformed", f"not one {style.name} action: {preview(text)}")
        return self._build(self._tool(name), dict(given), from_text=style.values_are_text)

    def _load_json(self, text: str) -> Any:
        """The JSON value of a reply (lenient: trailing commas forgiven), or a ``malformed`` error."""
        try:
            return load_json(text)
        except DuplicateKeyError as err:
            raise ActionError("malformed", f"{err} in the call object: give each key once") from None
        except (ValueError, RecursionError) as err:
            if self.lenient and "," in text:
                try:
                    return load_json(_TRAILING_COMMA.sub(r"\1", text))
                except (ValueError, RecursionError):
                    pass
            raise ActionError("malformed", f"malformed JSON ({err}): {preview(text)}") from None

    def _parse_json(self, text: str) -> Action:
        data = self._load_json(text)
        if not isinstance(data, dict) or "name" not in data:
            raise ActionError(
                "malformed",
                f'expected a JSON object {{"name": <tool>, "arguments": {{...}}}}, got {preview(text)}',
            )
        extra_keys = set(data) - {"name", "arguments"}
        if extra_keys and not self.lenient:
            raise ActionError(
                "malformed", f"unexpected key(s) {sorted(map(str, extra_keys))} in the call object"
            )
        tool = self._tool(data["name"])
        arguments = data.get("arguments", {})
        if isinstance(arguments, str) and self.lenient:
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
        return self._build(tool, arguments, from_text=False)

    def _parse_python_positional(self, text: str) -> Action:
        """BrowserGym-style calls: positional (or keyword) arguments; ids may be strings."""
        return self._parse_python(text, positional=True)

    def _parse_bracket(self, text: str) -> Action:
        """WebArena-style ``tool [a] [b]``: each argument in brackets; the last runs to the
        last ``]`` (as WebArena's own regexes read ``type [id] [text]``), so it may hold ``]``
        (unless what it holds is further actions: :meth:`parse` answers ``multiple_actions``)."""
        head = _BRACKET_NAME.match(text)
        if head is None:
            raise ActionError("malformed", f"expected an action like tool [argument], got {preview(text)}")
        tool = self._tool(head.group(0))
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
                inner = _balanced_end(text, pos + 1, "[", "]")  # a JSON list inside the brackets
                end = inner if inner > 0 and text.startswith("]", inner) else -1
            if end <= pos:
                raise ActionError(
                    "malformed", f"argument {tool.arg_names[i]!r} has no closing ]: {preview(text)}"
                )
            values.append(text[pos + 1 : end])
            pos = end + 1
        rest = text[pos:].strip()
        if rest:
            kind = "extra_argument" if rest.startswith("[") else "malformed"
            raise ActionError(
                kind, f"unexpected text after {tool.name!r} and its {n} argument(s): {preview(rest)}"
            )
        return self._build(tool, dict(zip(tool.arg_names, values)), from_text=True)

    def _parse_json_flat(self, text: str) -> Action:
        """MiniWoB++-style ``{"action_type": tool, arg: value, ...}``."""
        data = self._load_json(text)
        if not isinstance(data, dict) or FLAT_KEY not in data:
            raise ActionError(
                "malformed", f'expected a JSON object {{"{FLAT_KEY}": <tool>, ...}}, got {preview(text)}'
            )
        tool = self._tool(data.pop(FLAT_KEY))
        return self._build(tool, data, from_text=False)

    def _parse_python(self, text: str, positional: bool = False) -> Action:
        try:
            node = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise ActionError("malformed", f"not a Python call: {preview(text)}") from None
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ActionError("malformed", f"expected a call like tool(arg=...), got {preview(text)}")
        # Python folds identifiers to NFKC (a full-width name reads as the ASCII one); the
        # harness accepts only the names it wrote, so compare the text as written.
        rows = None if text.isascii() else re.split(rb"\r\n|\r|\n", text.encode("utf-8", "surrogatepass"))
        tool = self._tool(_written(rows, node.func, node.func.id))
        given: dict[str, Any] = {}
        if node.args:
            if not (self.lenient or positional):
                raise ActionError(
                    "malformed",
                    f"use keyword arguments: {tool.name}({', '.join(a + '=...' for a in tool.arg_names)})",
                )
            if len(node.args) > len(tool.arg_names):
                raise ActionError(
                    "extra_argument", f"tool {tool.name!r} takes {len(tool.arg_names)} argument(s)"
                )
            for name, arg in zip(tool.arg_names, node.args):
                given[name] = _literal(arg)
        for kw in node.keywords:
            if kw.arg is None:
                raise ActionError("malformed", "**kwargs are not allowed in an action")
            name = _written(rows, kw, kw.arg)
            if name in given:
                raise ActionError("malformed", f"argument {preview(name)} given twice")
            given[name] = _literal(kw.value)
        return self._build(tool, given, from_text=positional)

    def _parse_xml(self, text: str) -> Action:
        text = text.strip()
        head = _XML_OPEN.match(text)
        if head is None or not text.endswith(f"</{head.group(1)}>"):
            raise ActionError(
                "malformed", f"expected one element like <tool><arg>value</arg></tool>, got {preview(text)}"
            )
        tool = self._tool(head.group(1))
        body = text[head.end() : len(text) - len(head.group(1)) - 3]
        given: dict[str, Any] = {}
        pos = 0
        while True:
            arg = _XML_OPEN.search(body, pos)
            if arg is None:
                break
            if body[pos : arg.start()].strip():
                raise ActionError(
                    "malformed", f"unexpected text inside <{tool.name}>: {preview(body[pos : arg.start()])}"
                )
            close = body.find(f"</{arg.group(1)}>", arg.end())
            if close < 0:
                raise ActionError("malformed", f"element <{preview(arg.group(1))}> is not closed")
            if arg.group(1) in given:
                raise ActionError("malformed", f"argument {arg.group(1)!r} given twice")
            given[arg.group(1)] = _xml_unescape(body[arg.end() : close])
            pos = close + len(arg.group(1)) + 3
        if body[pos:].strip():
            raise ActionError("malformed", f"unexpected text inside <{tool.name}>: {preview(body[pos:])}")
        return self._build(tool, given, from_text=True)

    def _parse_command(self, text: str) -> Action:
        try:
            tokens = _split_command(text)
        except ValueError as err:
            raise ActionError("malformed", f"cannot split command ({err}): {preview(text)}") from None
        if not tokens:
            raise ActionError("empty", "empty command")
        tool = self._tool(tokens[0])
        values = tokens[1:]
        if len(values) > len(tool.arg_names):
            raise ActionError(
                "extra_argument",
                f"tool {tool.name!r} takes {len(tool.arg_names)} argument(s) "
                f"({' '.join(tool.arg_names)}), got {len(values)}",
            )
        return self._build(tool, dict(zip(tool.arg_names, values)), from_text=True)


_XML_OPEN = re.compile(r"<([A-Za-z_][\w.-]*)>")
_XML_ENTITY = re.compile(r"&(#x[0-9A-Fa-f]{1,6}|#\d{1,7}|lt|gt|amp|quot|apos);")
_XML_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
_SHELL_SAFE = re.compile(r"[\w@%+=:,./-]+\Z", re.ASCII)


def _xml_escape(text: str) -> str:
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if out.isprintable():
        return out
    return "".join(ch if ch.isprintable() else f"&#x{ord(ch):x};" for ch in out)


def _xml_unescape(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        ent = m.group(1)
        if ent in _XML_NAMED:
            return _XML_NAMED[ent]
        code = int(ent[2:], 16) if ent.startswith("#x") else int(ent[1:])
        return chr(code) if code <= 0x10FFFF else m.group(0)

    return _XML_ENTITY.sub(sub, text) if "&" in text else text


def _written_value(value: Any) -> str:
    """A decoded JSON value as text (an integer as digits, a string as itself)."""
    return value if isinstance(value, str) else dump_json(value)


def _text_value(value: Any) -> str:
    """A native call's argument as text: a string as itself, a list or a number as JSON text."""
    if isinstance(value, str):
        return value
    return dump_json(value) if isinstance(value, (list, tuple, dict, float)) else str(value)


def _shell_quote(text: str) -> str:
    if text and _SHELL_SAFE.match(text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        raise ActionError("malformed", "arguments must be literals (numbers or strings)") from None


def _ordered(tools: list[Tool], order: str | Sequence[str], known: Sequence[str]) -> list[Tool]:
    if order == "canonical":
        return tools
    if order == "reversed":
        return tools[::-1]
    if order == "alphabetical":
        return sorted(tools, key=lambda t: t.name)
    wanted = list(order)
    repeated = sorted({n for n in wanted if wanted.count(n) > 1})
    unknown = [n for n in wanted if n not in known]
    missing = [n for n in known if n not in wanted]
    if repeated or unknown or missing:
        raise ValueError(
            f"tool_order must list each of this task's tools {list(known)} exactly once; "
            f"missing {missing}, repeated {repeated}, unknown {unknown}"
        )
    by_name = {t.spec.name: t for t in tools}
    return [by_name[n] for n in wanted if n in by_name]


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_SEPARATORS = re.compile(r"[\s;,\[\]]*\Z")
_COMMAND_PREFIX = " \t$>`"


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


_SHELL_SPACE = " \t\r\n"
_SHELL_WORD_END = _SHELL_SPACE + "'\"\\"


def _split_command(text: str) -> list[str]:
    """Split a command line into words as ``shlex.split`` does (POSIX quotes and backslashes).

    Written out because it must run in linear time with small constants on any input.
    """
    words: list[str] = []
    current: list[str] = []
    in_word = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in _SHELL_SPACE:
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            i += 1
            continue
        in_word = True
        if ch == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ValueError("No closing quotation")
            current.append(text[i + 1 : end])
            i = end + 1
        elif ch == '"':
            i += 1
            while True:
                stop = _DQUOTE_STOP.search(text, i)
                if stop is None:
                    raise ValueError("No closing quotation")
                current.append(text[i : stop.start()])
                i = stop.start()
                if text[i] == '"':
                    i += 1
                    break
                if i + 1 < n and text[i + 1] in '"\\':
                    current.append(text[i + 1])
                else:
                    current.append(text[i : i + 2])
                i += 2
        elif ch == "\\":
            if i + 1 >= n:
                raise ValueError("No escaped character")
            current.append(text[i + 1])
            i += 2
        else:
            m = _SHELL_RUN.match(text, i)
            current.append(m.group(0))  # type: ignore[union-attr]
            i = m.end()  # type: ignore[union-attr]
    if in_word:
        words.append("".join(current))
    return words


_DQUOTE_STOP = re.compile(r'["\\]')
_SHELL_RUN = re.compile(r"[^ \t\r\n'\"\\]+")


def _fences(text: str) -> list[tuple[int, int]]:
    """Regions between pairs of triple backticks, found with one forward scan."""
    regions, pos = [], 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            return regions
        end = text.find("```", start + 3)
        if end < 0:
            return regions
        regions.append((start + 3, end))
        pos = end + 3


def _skip_quoted(text: str, i: int, quote: str, escapes: bool = True) -> int:
    """Index just past the quote closing the one at ``i`` (with backslash escapes), or -1."""
    j = i + 1
    while True:
        k = text.find(quote, j)
        if k < 0:
            return -1
        if not escapes:
            return k + 1
        backslashes = 0
        while text[k - 1 - backslashes] == "\\" and k - 1 - backslashes > i:
            backslashes += 1
        if backslashes % 2 == 0:
            return k + 1
        j = k + 1


def _balanced_end(text: str, start: int, opener: str, closer: str) -> int:
    """End of the bracketed group opened at ``start`` (quote-aware), or -1 if it never closes."""
    depth, i, n = 0, start, len(text)
    special = re.compile("[" + re.escape(opener + closer) + "'\"]")
    while i < n:
        m = special.search(text, i)
        if m is None:
            return -1
        ch, i = m.group(0), m.start()
        if ch in "'\"":
            i = _skip_quoted(text, i, ch)
            if i < 0:
                return -1
            continue
        depth += 1 if ch == opener else -1
        i += 1
        if depth == 0:
            return i
    return -1


def _action_spans(text: str, style: str, tools: Mapping[str, Tool]) -> list[tuple[int, int, bool]]:
    """Non-overlapping spans of ``text`` that look like one action each: (start, end, fenced).

    One left-to-right pass: a span skips everything it encloses (so a fence or a call inside
    a quoted argument is not a second action), and a group that never closes ends the scan,
    which keeps the work linear in the length of the text.
    """
    spans: list[tuple[int, int]] = []
    names = sorted(tools, key=len, reverse=True)
    if not names:
        return []
    if style in ("json", "json_flat"):
        pos = 0
        while (start := text.find("{", pos)) >= 0:
            end = _balanced_end(text, start, "{", "}")
            if end < 0:
                break
            spans.append((start, end))
            pos = end
    elif style in ("python", "python_positional"):
        head = re.compile(r"(?<![\w.])(?:" + "|".join(map(re.escape, names)) + r")[ \t]*\(")
        pos = 0
        while (m := head.search(text, pos)) is not None:
            end = _balanced_end(text, m.end() - 1, "(", ")")
            if end < 0:
                break
            spans.append((m.start(), end))
            pos = end
    elif style == "bracket":
        spans = _bracket_spans(text, tools, names)
    elif style == "xml":
        head = re.compile("<(" + "|".join(map(re.escape, names)) + ")>")
        closings: dict[str, list[int]] = {}
        pos = 0
        while (m := head.search(text, pos)) is not None:
            name = m.group(1)
            if name not in closings:
                closings[name] = [c.start() for c in re.finditer(re.escape(f"</{name}>"), text)]
            found = closings[name]
            k = bisect.bisect_left(found, m.end())
            if k == len(found):
                pos = m.end()
                continue
            end = found[k] + len(name) + 3
            spans.append((m.start(), end))
            pos = end
    else:
        pos, n = 0, len(text)
        unclosed: dict[str, int] = {}
        while pos < n:
            line_end = text.find("\n", pos)
            line_end = n if line_end < 0 else line_end
            start = pos
            while start < line_end and text[start] in _COMMAND_PREFIX:
                start += 1
            word_end = start
            while word_end < line_end and not text[word_end].isspace() and text[word_end] not in ";`":
                word_end += 1
            if text[start:word_end] not in tools:
                pos = line_end + 1
                continue
            end = _command_end(text, word_end, unclosed)
            spans.append((start, end))
            pos = end + 1
    fences = _fences(text)
    out = []
    for start, end in spans:
        while end > start and text[end - 1] in " \t`":
            end -= 1
        k = bisect.bisect_right(fences, (start, len(text) + 1)) - 1
        fenced = k >= 0 and fences[k][0] <= start and end <= fences[k][1]
        out.append((start, end, fenced))
    return out


_BRACKET_NAME = re.compile(r"[^\s\[\]]+")
_BRACKET_STOP = re.compile(r"[\]\n]")


def _bracket_spans(text: str, tools: Mapping[str, Tool], names: list[str]) -> list[tuple[int, int]]:
    """Spans of ``tool [a] [b]`` actions, each argument closed on its own line (linear time).

    A tool without arguments counts only as a whole line. The position of the next ``]`` or
    newline is remembered, so a line of unclosed brackets is scanned once, not once per name.
    """
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
            ok = not text[line_start : m.start()].strip(_COMMAND_PREFIX) and not text[
                m.end() : line_end
            ].strip(" \t`")
        if ok:
            spans.append((m.start(), i))
            pos = i
        else:
            pos = m.end()
    return spans


def _command_end(text: str, i: int, unclosed: dict[str, int]) -> int:
    """End of the command whose name ends at ``i``: the first unquoted newline, ``;`` or ``&&``.

    A quote that never closes ends the command at its line. ``unclosed`` remembers, per
    quote character, a position from which no closing quote exists, so later lines do not
    search again (that would be quadratic).
    """
    n = len(text)
    special = re.compile(r"[\n;&'\"\\]")
    while i < n:
        m = special.search(text, i)
        if m is None:
            return n
        ch, i = m.group(0), m.start()
        if ch in "\n;" or (ch == "&" and text.startswith("&&", i)):
            return i
        if ch == "&":
            i += 1
        elif ch == "\\":
            i += 2
        else:
            end = -1 if i >= unclosed.get(ch, n + 1) else _skip_quoted(text, i, ch, escapes=ch == '"')
            if end < 0:
                unclosed[ch] = min(i, unclosed.get(ch, n + 1))
                line_end = text.find("\n", i)
                return n if line_end < 0 else line_end
            i = end
    return n


def _only_separators(text: str, spans: list[tuple[int, int, bool]]) -> bool:
    """Whether nothing but whitespace, ``;``, ``,`` and list brackets lies around the spans."""
    pos = 0
    for start, end, _ in spans:
        if not _SEPARATORS.match(text[pos:start]):
            return False
        pos = end
    return bool(_SEPARATORS.match(text[pos:]))


def _register_tool_style_plugin(name: str, obj: Any) -> None:
    """A ``harness_gym.tool_styles`` entry point: a :class:`ToolStyle` of the same name."""
    if not isinstance(obj, ToolStyle):
        raise PluginError(
            f"a harness_gym.tool_styles entry point must name a harness_gym.core.tools.ToolStyle, got {obj!r}"
        )
    if obj.name != name:
        raise PluginError(f"entry point {name!r} names the tool style {obj.name!r}; use one name for both")
    register_tool_style(obj)


set_loader("tool_styles", _register_tool_style_plugin)
