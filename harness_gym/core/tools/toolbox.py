"""The toolbox: a task's canonical actions seen through a harness's tool factors.

A :class:`Toolbox` binds a task's :class:`~harness_gym.core.task.ActionSpec` list to the
tool naming, order, set (dropped tools), descriptions and style. It writes schemas
(OpenAI-style function tools, Anthropic-style tools and a text form for the system prompt),
formats a canonical action in the style, and parses agent output back; the style
(:class:`~harness_gym.core.tools.style.Style`) knows only its syntax. Parsing never raises
anything but :class:`~harness_gym.core.tools.errors.ActionError`, whatever the input.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from harness_gym.core.task import Action, ActionSpec, Param
from harness_gym.core.tools.errors import ActionError, preview
from harness_gym.core.tools.json_text import (
    dump_json,
    json_integer,
    load_json,
    plain_number,
    shown,
    written_value,
)
from harness_gym.core.tools.registry import get_style
from harness_gym.core.tools.scan import fences, only_separators
from harness_gym.core.tools.style import Style
from harness_gym.core.tools.tool import Tool

TOOL_NAMINGS = ("canonical", "synonyms", "opaque")
TOOL_DESCRIPTIONS = ("full", "terse", "none")
#: The style whose call objects native-channel replies are.
NATIVE_STYLE = "json"
#: UTF-16 surrogates: a Python string holding one (a lone ``\ud800``, raw or from a JSON or
#: Python escape) cannot be encoded as UTF-8, so no observation, export or request could carry it.
#: What may separate two actions in one reply (see :func:`only_separators`).
_SEPARATORS = " \t\r\n,;"
_SURROGATE = re.compile("[\ud800-\udfff]")

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


def _synonym(name: str, is_tool: bool) -> str:
    if name in SYNONYMS:
        return SYNONYMS[name]
    return f"do_{name}" if is_tool else f"{name}_arg"


def _terse(description: str) -> str:
    first = description.split(".")[0].strip()
    return first[:40]


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
        syntax = get_style(style)
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
                if syntax.reserved_word(name, is_tool):
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
        self.syntax: Style = syntax
        self.lenient = lenient
        self.max_chars = max_chars
        #: The tools by the names this harness shows, and by their canonical names.
        self.by_name: dict[str, Tool] = {t.name: t for t in self.tools}
        self.by_canonical: dict[str, Tool] = {t.spec.name: t for t in self.tools}
        self._formatted: dict[Action, str] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (or copied) with its style by name, as the registry holds it."""
        state = self.__dict__.copy()
        del state["syntax"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.syntax = get_style(self.style)

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
                    typ += ", one of " + ", ".join(map(written_value, param.choices))
                lines.append(f"    {arg} ({typ})" + (f": {desc}" if desc else ""))
        return "\n".join(lines)

    @property
    def native_syntax(self) -> Style:
        """The style of a reply on the native channel: a call object as ``json`` writes it."""
        return get_style(NATIVE_STYLE)

    def format_hint(self) -> str:
        """One sentence telling the agent how to write an action in this style."""
        return self.syntax.hint

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
        tool = self.by_canonical.get(action.name)
        if tool is None:
            raise KeyError(f"action {action.name!r} is not a tool of this harness")
        values = [self._written_arg(p, action[p.name]) for p in tool.params]
        return self.syntax.write(tool.name, list(zip(tool.arg_names, values)))

    def _written_arg(self, param: Param, value: Any) -> Any:
        """A value as this style writes it: an int or str as itself, a number or a list as a
        value where the style writes JSON or Python values, else as JSON text."""
        if param.is_text_or_int:
            return value
        value = list(value) if isinstance(value, tuple) else value
        return value if self.syntax.native_values else dump_json(value)

    def call(self, action: Action) -> tuple[str, dict[str, Any]]:
        """A canonical action as a native function call: the tool's name and its arguments."""
        tool = self.by_canonical.get(action.name)
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
            arguments = {k: plain_number(v) for k, v in arguments.items()}
        return self.syntax.write_call(self, name, arguments)

    def positional(self, name: str, arguments: dict[str, Any]) -> list[tuple[str, Any]] | None:
        """A native call's arguments in the order of the tool named ``name`` (extras last, an
        unknown tool's as given), or ``None`` when some cannot be placed (an argument missing
        while an unknown one is given)."""
        pairs = [(str(k), v) for k, v in arguments.items()]
        tool = self.by_name.get(name)
        if tool is not None:
            known = [(k, arguments[k]) for k in tool.arg_names if k in arguments]
            pairs = known + [(k, v) for k, v in pairs if k not in tool.arg_names]
            if len(known) < len(tool.arg_names) and len(pairs) > len(known):
                return None
        return pairs

    # -- parsing ------------------------------------------------------------------------

    def parse(self, text: str) -> Action:
        """Parse agent output into a canonical action, or raise :class:`ActionError`; a lone
        surrogate in the text is ``malformed``, one in an argument (from a ``\\ud800`` escape)
        ``wrong_type``: not text (see :meth:`_parse`)."""
        if _SURROGATE.search(text):
            raise ActionError("malformed", _surrogate_message(text))
        action = self._parse(text)
        for _, value in action.args:
            bad = _surrogate_in(value)
            if bad is not None:
                raise ActionError("wrong_type", _surrogate_message(bad))
        return action

    def _parse(self, text: str) -> Action:
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
        syntax = self.syntax
        try:
            action = syntax.read(self, text.strip())
        except ActionError as err:
            whole = err
        else:
            syntax.check_whole(self, text, action)
            return action
        spans = self.spans(text)
        if not self.lenient:
            if len(spans) >= 2 and only_separators(text, spans):
                parsed = [self._try(text[s:e]) for s, e, _ in spans]
                if all(isinstance(p, Action) for p in parsed):
                    raise self.multiple(len(parsed))
            if whole.kind == "extra_argument":
                count = syntax.count_actions(self, text.strip())
                if count >= 2:
                    raise self.multiple(count)
            raise whole
        chosen = [sp for sp in spans if sp[2]] or spans
        found: list[Action] = []
        # Keep only the most specific error (a recognised tool beats "malformed"): holding
        # every error of a long text would keep its frames alive and slow the collector.
        best = whole
        first, last = len(text) - len(text.lstrip()), len(text.rstrip())
        found_at: list[int] = []
        near = 0  # spans that are one action once the separators after them are dropped
        for start, end, _ in chosen:
            candidate = text[start:end]
            result = whole if start <= first and end >= last else self._try(candidate)
            if isinstance(result, Action):
                found.append(result)
                found_at.append(start)
                continue
            trimmed = candidate.rstrip(_SEPARATORS)
            if len(chosen) >= 2 and trimmed != candidate.rstrip() and isinstance(self._try(trimmed), Action):
                near += 1  # counted, never run: "select 5 Havana\t," then another action
            if best.kind == "malformed" != result.kind:
                best = result
            if result.kind == "extra_argument":
                count = syntax.count_actions(self, candidate)
                if count >= 2:
                    raise self.multiple(count)
        if len(found) + (near if found else 0) >= 2:
            raise self.multiple(len(found) + near)
        if found and whole.kind == "extra_argument" and found_at[0] <= first:
            raise whole  # one call with an argument too many (type [2] [a] [b]), not prose around one
        if found:
            return found[0]
        raise best

    def _try(self, text: str) -> Action | ActionError:
        try:
            return self.syntax.read(self, text.strip())
        except ActionError as err:
            err.__traceback__ = None
            return err

    def try_read(self, text: str) -> bool:
        """Whether ``text`` (stripped) reads as one action in this style."""
        return isinstance(self._try(text), Action)

    @staticmethod
    def multiple(count: int) -> ActionError:
        """The ``multiple_actions`` error for ``count`` actions in one reply."""
        return ActionError(
            "multiple_actions",
            f"found {count} actions; this harness takes exactly one action per turn",
        )

    def spans(self, text: str) -> list[tuple[int, int, bool]]:
        """Non-overlapping spans of ``text`` that look like one action each: (start, end, fenced).

        The style finds them in one left-to-right pass: a span skips everything it encloses
        (so a fence or a call inside a quoted argument is not a second action), and a group
        that never closes ends the scan, which keeps the work linear in the length of the text.
        """
        if not self.by_name:
            return []
        spans = self.syntax.spans(text, self.by_name)
        regions = fences(text)
        out = []
        for start, end in spans:
            while end > start and text[end - 1] in " \t`":
                end -= 1
            k = bisect.bisect_right(regions, (start, len(text) + 1)) - 1
            fenced = k >= 0 and regions[k][0] <= start and end <= regions[k][1]
            out.append((start, end, fenced))
        return out

    def tool_named(self, name: Any) -> Tool:
        """The tool this harness shows as ``name``, or an ``unknown_tool`` error."""
        if not isinstance(name, str) or name not in self.by_name:
            raise ActionError(
                "unknown_tool",
                f"unknown tool {preview(str(name))}; available tools: {list(self.by_name)}",
            )
        return self.by_name[name]

    def build(self, tool: Tool, given: dict[str, Any], from_text: bool) -> Action:
        """The canonical action of ``tool`` with ``given`` arguments (by shown name), checked
        and typed; ``from_text``: string values of integer arguments are read as integers."""
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
                f"{[written_value(c) for c in param.choices]}, got {shown(value)}",
            )
        return value

    def _coerce_type(self, tool: Tool, name: str, param: Param, value: Any, from_text: bool) -> Any:
        if not param.is_text_or_int:
            try:
                return param.coerce(plain_number(value) if not isinstance(value, str) else value)
            except (ValueError, TypeError, RecursionError) as err:
                raise ActionError(
                    "wrong_type", f"argument {name!r} of tool {tool.name!r}: {err}, got {shown(value)}"
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
                f"argument {name!r} of tool {tool.name!r} must be an integer, got {shown(value)}",
            )
        if isinstance(value, str):
            return value
        if self.lenient and isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            return str(plain_number(value))
        raise ActionError(
            "wrong_type",
            f"argument {name!r} of tool {tool.name!r} must be a string, got {shown(value)}",
        )


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


def _surrogate_in(value: Any) -> str | None:
    """The first string inside ``value`` (a string, or nested lists / tuples / dicts of them)
    that holds a surrogate, else None."""
    if isinstance(value, str):
        return value if _SURROGATE.search(value) else None
    if isinstance(value, Mapping):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _surrogate_in(item)
            if found is not None:
                return found
    return None


def _surrogate_message(text: str) -> str:
    found = _SURROGATE.search(text)
    code = f"U+{ord(found.group()):04X}" if found else "a surrogate"
    return (
        f"the reply holds a lone UTF-16 surrogate ({code}), which is not a character and cannot be "
        f"encoded: write text only ({preview(text)})"
    )
