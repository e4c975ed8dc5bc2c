"""Tools: how canonical actions are named, described, written and parsed under a harness.

A :class:`Toolbox` binds a task's canonical :class:`~harness_gym.core.task.ActionSpec` list
to four harness factors: tool naming, tool order, tool set (dropped tools) and tool style.
It writes schemas (OpenAI-style function tools, Anthropic-style tools and a text form for
the system prompt), formats a canonical action in the style, and parses agent output back.
Parsing never raises anything but :class:`ActionError`, whatever the input.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness_gym.core.task import Action, ActionSpec, Param

TOOL_STYLES = ("json", "xml", "python", "command")
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
    )

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def preview(text: str, limit: int = 80) -> str:
    """A short, printable, escape-safe view of untrusted text for error messages."""
    shown = text[:limit].encode("unicode_escape", "backslashreplace").decode("ascii")
    return shown + (f"... ({len(text)} chars)" if len(text) > limit else "")


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
            prop: dict[str, Any] = {"type": "integer" if param.type == "int" else "string"}
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
                Action(t.spec.name, tuple((p.name, 0 if p.type == "int" else p.name) for p in t.params))
            )
            lines.append(f"- {example}" + (f"  # {t.description}" if t.description else ""))
            for arg, param, desc in zip(t.arg_names, t.params, t.arg_descriptions):
                typ = "integer" if param.type == "int" else "string"
                lines.append(f"    {arg} ({typ})" + (f": {desc}" if desc else ""))
        return "\n".join(lines)

    def format_hint(self) -> str:
        """One sentence telling the agent how to write an action in this style."""
        return {
            "json": 'Reply with one JSON object: {"name": <tool>, "arguments": {...}}.',
            "xml": "Reply with one XML element named after the tool, one child element per "
            "argument, e.g. <tool><arg>value</arg></tool>.",
            "python": "Reply with one Python function call with keyword arguments, e.g. tool(arg=1).",
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
        values = [action[p.name] for p in tool.params]
        pairs = list(zip(tool.arg_names, values))
        if self.style == "json":
            return json.dumps({"name": tool.name, "arguments": dict(pairs)}, ensure_ascii=False)
        if self.style == "python":
            inner = ", ".join(f"{k}={v!r}" for k, v in pairs)
            return f"{tool.name}({inner})"
        if self.style == "xml":
            inner = "".join(f"<{k}>{_xml_escape(str(v))}</{k}>" for k, v in pairs)
            return f"<{tool.name}>{inner}</{tool.name}>"
        parts = [tool.name] + [str(v) if isinstance(v, int) else _shell_quote(v) for _, v in pairs]
        return " ".join(parts)

    def call(self, action: Action) -> tuple[str, dict[str, Any]]:
        """A canonical action as a native function call: the tool's name and its arguments."""
        tool = self._by_canonical.get(action.name)
        if tool is None:
            raise KeyError(f"action {action.name!r} is not a tool of this harness")
        return tool.name, {n: action[p.name] for p, n in zip(tool.params, tool.arg_names)}

    def write_call(self, name: Any, arguments: Any) -> str:
        """Write a model's native tool call in this style, without checking it.

        ``arguments`` is the JSON text (or an already decoded value) the model returned.
        Whatever is wrong with the call (unknown tool, arguments that are not a JSON
        object, a wrong or missing argument) is left for :meth:`parse` to report.
        """
        name = str(name)
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError):
                pass
        if self.style == "json":
            return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        if not isinstance(arguments, dict):
            # Not an object: written so that the style's parser reports a malformed call.
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            if self.style == "python":
                return f"{name}({raw}"
            if self.style == "xml":
                return f"<{name}>{_xml_escape(raw)}"
            return f"{name} {_shell_quote(raw)} '"
        pairs = [(str(k), v) for k, v in arguments.items()]
        if self.style == "python":
            return f"{name}({', '.join(f'{k}={v!r}' for k, v in pairs)})"
        if self.style == "xml":
            inner = "".join(f"<{k}>{_xml_escape(str(v))}</{k}>" for k, v in pairs)
            return f"<{name}>{inner}</{name}>"
        tool = self._by_name.get(name)
        if tool is not None:  # positional: the tool's argument order; extras go last
            known = [(k, arguments[k]) for k in tool.arg_names if k in arguments]
            pairs = known + [(k, v) for k, v in pairs if k not in tool.arg_names]
            if len(known) < len(tool.arg_names) and len(pairs) > len(known):
                return f"{name} {_shell_quote(json.dumps(arguments))} '"  # names cannot be placed
        values = [
            str(v) if isinstance(v, int) and not isinstance(v, bool) else _shell_quote(str(v))
            for _, v in pairs
        ]
        return " ".join([_shell_quote(name), *values])

    # -- parsing ------------------------------------------------------------------------

    def parse(self, text: str) -> Action:
        """Parse agent output into a canonical action, or raise :class:`ActionError`."""
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
        }[self.style]
        if not self.lenient:
            return parser(text.strip())
        first_error: ActionError | None = None
        for candidate in _lenient_candidates(text, self.style, list(self._by_name)):
            try:
                return parser(candidate)
            except ActionError as err:
                # Keep the most specific error: a recognised tool beats "malformed".
                if first_error is None or (first_error.kind == "malformed" != err.kind):
                    first_error = err
        raise first_error or ActionError("malformed", f"no action found in {preview(text)}")

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
        if param.type == "int":
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, str) and (from_text or self.lenient):
                stripped = value.strip()
                if re.fullmatch(r"[+-]?\d{1,18}", stripped):
                    return int(stripped)
            raise ActionError(
                "wrong_type",
                f"argument {name!r} of tool {tool.name!r} must be an integer, got {preview(repr(value))}",
            )
        if isinstance(value, str):
            return value
        if self.lenient and isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise ActionError(
            "wrong_type",
            f"argument {name!r} of tool {tool.name!r} must be a string, got {preview(repr(value))}",
        )

    def _parse_json(self, text: str) -> Action:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as err:
            raise ActionError("malformed", f"malformed JSON ({err}): {preview(text)}") from None
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
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError):
                pass
        if not isinstance(arguments, dict):
            raise ActionError(
                "malformed", f'"arguments" must be a JSON object, got {preview(repr(arguments))}'
            )
        return self._build(tool, arguments, from_text=False)

    def _parse_python(self, text: str) -> Action:
        try:
            node = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise ActionError("malformed", f"not a Python call: {preview(text)}") from None
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ActionError("malformed", f"expected a call like tool(arg=...), got {preview(text)}")
        tool = self._tool(node.func.id)
        given: dict[str, Any] = {}
        if node.args:
            if not self.lenient:
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
            given[kw.arg] = _literal(kw.value)
        return self._build(tool, given, from_text=False)

    def _parse_xml(self, text: str) -> Action:
        match = _XML_CALL.fullmatch(text)
        if match is None:
            raise ActionError(
                "malformed", f"expected one element like <tool><arg>value</arg></tool>, got {preview(text)}"
            )
        tool = self._tool(match.group(1))
        given: dict[str, Any] = {}
        body = match.group(2)
        pos = 0
        for arg in _XML_ARG.finditer(body):
            if body[pos : arg.start()].strip():
                raise ActionError(
                    "malformed", f"unexpected text inside <{tool.name}>: {preview(body[pos : arg.start()])}"
                )
            if arg.group(1) in given:
                raise ActionError("malformed", f"argument {arg.group(1)!r} given twice")
            given[arg.group(1)] = _xml_unescape(arg.group(2))
            pos = arg.end()
        if body[pos:].strip():
            raise ActionError("malformed", f"unexpected text inside <{tool.name}>: {preview(body[pos:])}")
        return self._build(tool, given, from_text=True)

    def _parse_command(self, text: str) -> Action:
        try:
            tokens = shlex.split(text, posix=True)
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


_XML_CALL = re.compile(r"\s*<([A-Za-z_][\w.-]*)>(.*)</\1>\s*", re.S)
_XML_ARG = re.compile(r"<([A-Za-z_][\w.-]*)>(.*?)</\1>", re.S)
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


_FENCE = re.compile(r"```[\w-]*\n?(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _lenient_candidates(text: str, style: str, names: list[str]) -> list[str]:
    """Substrings of ``text`` worth trying, best first: fenced blocks, then spans found in prose."""
    sources = [m.group(1).strip() for m in _FENCE.finditer(text)] + [text.strip()]
    out: list[str] = []
    for source in sources:
        out.append(source)
        if style == "json":
            out.extend(_json_objects(source))
        elif style == "python":
            out.extend(_call_spans(source, names))
        elif style == "xml":
            for m in re.finditer(r"<([A-Za-z_][\w.-]*)>.*?</\1>", source, re.S):
                if m.group(1) in names:
                    out.append(m.group(0))
        else:
            lines = source.splitlines()
            for i, line in enumerate(lines):
                line = line.strip().lstrip("$>` ").rstrip("`")
                head = line.split(" ", 1)[0]
                if head in names:
                    out.append(line)
                    out.append("\n".join([line, *lines[i + 1 :]]))
    seen: set[str] = set()
    return [c for c in out if not (c in seen or seen.add(c))][:32]


def _json_objects(text: str) -> list[str]:
    """JSON objects embedded in prose, with trailing commas removed."""
    decoder = json.JSONDecoder()
    found = []
    for start in [m.start() for m in re.finditer(r"\{", text)][:16]:
        chunk = text[start:]
        for variant in (chunk, _TRAILING_COMMA.sub(r"\1", chunk)):
            try:
                _, end = decoder.raw_decode(variant)
            except (ValueError, RecursionError):
                continue
            found.append(variant[:end])
            break
    return found


def _call_spans(text: str, names: list[str]) -> list[str]:
    """Python call expressions ``name(...)`` embedded in prose."""
    spans = []
    for name in names:
        for m in re.finditer(rf"(?<![\w.]){re.escape(name)}\s*\(", text):
            depth, quote, i = 0, "", m.end() - 1
            while i < len(text):
                ch = text[i]
                if quote:
                    if ch == "\\":
                        i += 1
                    elif ch == quote:
                        quote = ""
                elif ch in "'\"":
                    quote = ch
                elif ch == "(":
                    depth += 1
                elif ch == ")":
                    depth -= 1
                    if depth == 0:
                        spans.append(text[m.start() : i + 1])
                        break
                i += 1
    return spans
