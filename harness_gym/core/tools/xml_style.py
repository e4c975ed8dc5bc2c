"""The ``xml`` tool style: one element named after the tool, one child element per argument,
``<tool><arg>value</arg></tool>``."""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness_gym.core.grammar import INT_TEXT, regex_literal
from harness_gym.core.tools.errors import ActionError, preview
from harness_gym.core.tools.json_text import text_value, unparsed
from harness_gym.core.tools.style import Style

if TYPE_CHECKING:
    from harness_gym.core.task import Action
    from harness_gym.core.tools.style import ToolboxView
    from harness_gym.core.tools.tool import Tool

_XML_OPEN = re.compile(r"<([A-Za-z_][\w.-]*)>")
_XML_ENTITY = re.compile(r"&(#x[0-9A-Fa-f]{1,6}|#\d{1,7}|lt|gt|amp|quot|apos);")
_XML_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
#: A character reference the parser turns into a character it accepts: any code point up to
#: U+10FFFF but the surrogates U+D800-U+DFFF (a lone surrogate is refused), written without a
#: lookahead so that constrained decoders take it. Decimal references stop at 4 digits (below
#: the surrogates); the writer uses hex.
_XML_CHAR_REF = (
    "&#x([0-9a-fA-F]{1,3}|[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}"
    "|[1-9a-fA-F][0-9a-fA-F]{4}|10[0-9a-fA-F]{4});|&#[0-9]{1,4};"
)
#: A character of an argument's text as the parser reads it (an entity counts as one).
_XML_CHAR = f"([^<&]|&(lt|gt|amp|quot|apos);|{_XML_CHAR_REF})"


def xml_escape(text: str) -> str:
    """Text as an element's content: ``&``, ``<``, ``>`` and unprintable characters escaped."""
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if out.isprintable():
        return out
    return "".join(ch if ch.isprintable() else f"&#x{ord(ch):x};" for ch in out)


def xml_unescape(text: str) -> str:
    """An element's content as text (the five named entities and character references)."""

    def sub(m: re.Match[str]) -> str:
        ent = m.group(1)
        if ent in _XML_NAMED:
            return _XML_NAMED[ent]
        code = int(ent[2:], 16) if ent.startswith("#x") else int(ent[1:])
        return chr(code) if code <= 0x10FFFF else m.group(0)

    return _XML_ENTITY.sub(sub, text) if "&" in text else text


class XmlStyle(Style):
    name = "xml"
    hint = (
        "Reply with one XML element named after the tool, one child element per "
        "argument, e.g. <tool><arg>value</arg></tool>."
    )

    def write(self, tool: str, pairs: Sequence[tuple[str, Any]]) -> str:
        inner = "".join(f"<{k}>{xml_escape(str(v))}</{k}>" for k, v in pairs)
        return f"<{tool}>{inner}</{tool}>"

    def write_call(self, toolbox: ToolboxView, name: str, arguments: Any) -> str:
        if not isinstance(arguments, dict):
            return f"<{name}>{xml_escape(unparsed(arguments))}"
        inner = "".join(f"<{k}>{xml_escape(text_value(v))}</{k}>" for k, v in arguments.items())
        return f"<{name}>{inner}</{name}>"

    def read(self, toolbox: ToolboxView, text: str) -> Action:
        text = text.strip()
        head = _XML_OPEN.match(text)
        if head is None or not text.endswith(f"</{head.group(1)}>"):
            raise ActionError(
                "malformed", f"expected one element like <tool><arg>value</arg></tool>, got {preview(text)}"
            )
        tool = toolbox.tool_named(head.group(1))
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
            given[arg.group(1)] = xml_unescape(body[arg.end() : close])
            pos = close + len(arg.group(1)) + 3
        if body[pos:].strip():
            raise ActionError("malformed", f"unexpected text inside <{tool.name}>: {preview(body[pos:])}")
        return toolbox.build(tool, given, from_text=True)

    def spans(self, text: str, tools: Mapping[str, Tool]) -> list[tuple[int, int]]:
        """Each ``<tool>...</tool>`` element of a shown tool, to the first closing tag after it."""
        names = sorted(tools, key=len, reverse=True)
        head = re.compile("<(" + "|".join(map(re.escape, names)) + ")>")
        closings: dict[str, list[int]] = {}
        spans, pos = [], 0
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
        return spans

    def tool_pattern(self, toolbox: ToolboxView, tool: Tool, max_string: int) -> str:
        name = regex_literal(tool.name)
        body = "".join(
            f"<{regex_literal(a)}>({INT_TEXT if p.type == 'int' else f'{_XML_CHAR}{{0,{max_string}}}'})"
            f"</{regex_literal(a)}>"
            for a, p in zip(tool.arg_names, tool.params)
        )
        return f"<{name}>{body}</{name}>"


XML = XmlStyle()
