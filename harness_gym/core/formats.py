"""Observation formats: how an ordered list of named fields becomes text.

Each renderer takes ``[(name, value), ...]`` with JSON-like values (str, int, float, bool,
None, list, dict) and returns a string. Renderers are pure and deterministic; they never
look inside a value for task meaning, so any task's fields render in any format.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

from harness_gym.core.json_dumps import dumps_function
from harness_gym.core.plugins import LiveLevels, PluginError, set_loader
from harness_gym.core.xml_text import escape as _xml_escape
from harness_gym.core.xml_text import quoteattr

Fields = Sequence[tuple[str, Any]]

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_ .,;!?'()/@+-]*\Z")
_YAML_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "none", "~", "y", "n"}
_XML_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")


#: ``json.dumps(value, ensure_ascii=False)``, from an encoder built once.
_json_text = dumps_function(ensure_ascii=False)


def _quoted(text: str) -> str:
    return _json_text(text)


def _inline(value: Any) -> str:
    """A scalar on one line: plain when safe, JSON-quoted otherwise."""
    if type(value) is str:  # the common case first
        return _inline_text(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return _inline_text(str(value))


@functools.lru_cache(maxsize=65536)
def _inline_text(text: str) -> str:
    # Memoized: observations repeat the same labels step after step.
    if text and _PLAIN.match(text) and not text.endswith(" "):
        return text
    return _quoted(text)


def render_json(fields: Fields) -> str:
    return _json_text(dict(fields))


_YAML_UNPRINTABLE = re.compile("[^\t\n\r\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _yaml_quoted(text: str) -> str:
    """A YAML double-quoted scalar (JSON escapes are valid YAML; escape what YAML forbids)."""
    quoted = _quoted(text)
    return _YAML_UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", quoted)


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, str):
        return _yaml_text(value)
    return _inline(value)


@functools.lru_cache(maxsize=65536)
def _yaml_text(value: str) -> str:
    # Memoized, like _inline_text: the same labels and keys come back every step.
    plain = (
        value
        and _PLAIN.match(value)
        and value.lower() not in _YAML_RESERVED
        and not value[0].isdigit()
        and value[0] not in "-?"
        and ": " not in value
        and not value.endswith(" ")
    )
    return value if plain else _yaml_quoted(value)


def _yaml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _yaml_scalar(value)


def _yaml_entry(head: str, value: Any, indent: int, out: list[str]) -> None:
    """Emit ``head`` (``"key:"`` or ``"-"``) and its value at ``indent`` spaces."""
    pad = " " * indent
    kind = type(value)  # the common scalars first, as _yaml_value writes them
    if kind is str:
        out.append(f"{pad}{head} {_yaml_text(value)}")
        return
    if kind is int:
        out.append(f"{pad}{head} {value!r}")
        return
    if not (isinstance(value, (dict, list)) and value):  # _nested, inlined: the hot path
        out.append(f"{pad}{head} {_yaml_value(value)}")
        return
    body: list[str] = []
    _yaml_block(value, indent + 2, body)
    if head == "-":
        # Compact form: the first line of the item sits on the dash's line.
        body[0] = f"{pad}- {body[0][indent + 2 :]}"
        out.extend(body)
    else:
        out.append(f"{pad}{head}")
        out.extend(body)


def _yaml_block(value: Any, indent: int, out: list[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _yaml_entry(
                f"{_yaml_text(key) if type(key) is str else _yaml_scalar(str(key))}:", item, indent, out
            )
    else:
        for item in value:
            _yaml_entry("-", item, indent, out)


def render_yaml(fields: Fields) -> str:
    out: list[str] = []
    for name, value in fields:
        _yaml_entry(f"{_yaml_scalar(name)}:", value, 0, out)
    return "\n".join(out)


def _md_lines(value: Any, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}- **{key}**:")
                _md_lines(item, depth + 1, out)
            else:
                out.append(f"{pad}- **{key}**: {_inline(_empty(item))}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and item:
                parts, nested = [], []  # one pass: scalars on the item's line, nested below
                for k, v in item.items():
                    kind = type(v)  # the common scalars first, as _inline writes them
                    if kind is str:
                        parts.append(f"{k}={_inline_text(v)}")
                    elif kind is int:
                        parts.append(f"{k}={v!r}")
                    elif isinstance(v, (dict, list)) and v:
                        nested.append((k, v))
                    else:
                        parts.append(f"{k}={_inline(v)}")
                out.append(f"{pad}- " + " ".join(parts))
                for k, v in nested:
                    out.append(f"{pad}  - {k}:")
                    _md_lines(v, depth + 2, out)
            elif isinstance(item, list) and item:
                out.append(f"{pad}-")
                _md_lines(item, depth + 1, out)
            else:
                out.append(f"{pad}- {_inline(_empty(item))}")
    else:
        out.append(pad + _inline(value))


def _nested(value: Any) -> bool:
    return isinstance(value, (dict, list)) and bool(value)


def _empty(value: Any) -> Any:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return value


def render_markdown(fields: Fields) -> str:
    out: list[str] = []
    for name, value in fields:
        if out:
            out.append("")
        out.append(f"## {name}")
        if isinstance(value, (dict, list)):
            if value:
                _md_lines(value, 0, out)
            else:
                out.append("(empty)")
        else:
            out.append(str(value) if isinstance(value, str) and value else _inline(value))
    return "\n".join(out)


def _kv_lines(value: Any, path: str, out: list[str]) -> None:
    # Scalar items are written here rather than by a recursive call (the same lines, fewer calls).
    if isinstance(value, dict) and value:
        for key, item in value.items():
            kind = type(item)  # the common scalars first, as _inline writes them
            if kind is str:
                out.append(f"{path}.{key} = {_inline_text(item)}")
            elif kind is int:
                out.append(f"{path}.{key} = {item!r}")
            elif isinstance(item, (dict, list)):
                _kv_lines(item, f"{path}.{key}", out)
            else:
                out.append(f"{path}.{key} = {_inline(item)}")
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            if isinstance(item, (dict, list)):
                _kv_lines(item, f"{path}[{i}]", out)
            else:
                out.append(f"{path}[{i}] = {_inline(item)}")
    elif isinstance(value, (dict, list)):
        out.append(f"{path} = {_empty(value)}")
    else:
        out.append(f"{path} = {_inline(value)}")


def render_key_value(fields: Fields) -> str:
    out: list[str] = []
    for name, value in fields:
        _kv_lines(value, name, out)
    return "\n".join(out)


@functools.lru_cache(maxsize=4096)
def _xml_tag(name: str) -> tuple[str, str]:
    if _XML_NAME.match(name) and not name.lower().startswith("xml"):
        return f"<{name}>", f"</{name}>"
    return f"<field name={quoteattr(_xml_chars(name))}>", "</field>"


@functools.lru_cache(maxsize=65536)
def _xml_text(text: str) -> str:
    return _xml_escape(_xml_chars(text))


def _xml_chars(text: str) -> str:
    # XML 1.0 cannot carry most control characters, lone surrogates, U+FFFE or U+FFFF
    # (its Char production): escape them visibly.
    cleaned = (
        "".join(
            ch
            if (ch in "\t\n" or ord(ch) >= 0x20)
            and not 0xD800 <= ord(ch) <= 0xDFFF
            and ch not in "\ufffe\uffff"
            else f"\\u{ord(ch):04x}"
            for ch in text
        )
        if not text.isprintable()
        else text
    )
    return cleaned


def _xml_value(value: Any, out: list[str]) -> None:
    # String items are written here rather than by a recursive call (the same text, fewer calls).
    if isinstance(value, dict):
        for key, item in value.items():
            open_, close = _xml_tag(str(key))
            if type(item) is str:
                out += (open_, _xml_text(item), close)
            else:
                out.append(open_)
                _xml_value(item, out)
                out.append(close)
    elif isinstance(value, list):
        for item in value:
            if type(item) is str:
                out += ("<item>", _xml_text(item), "</item>")
            else:
                out.append("<item>")
                _xml_value(item, out)
                out.append("</item>")
    elif isinstance(value, str):
        out.append(_xml_text(value))
    else:
        out.append(_inline(value))


def render_xml(fields: Fields) -> str:
    out = ["<observation>"]
    for name, value in fields:
        open_, close = _xml_tag(name)
        out.append(open_)
        _xml_value(value, out)
        out.append(close)
    out.append("</observation>")
    return "".join(out)


def _html_value(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        out.append("<dl>")
        for key, item in value.items():
            out.append(f"<dt>{_xml_escape(str(key))}</dt><dd>")
            _html_value(item, out)
            out.append("</dd>")
        out.append("</dl>")
    elif isinstance(value, list):
        out.append("<ul>")
        for item in value:
            out.append("<li>")
            _html_value(item, out)
            out.append("</li>")
        out.append("</ul>")
    elif isinstance(value, str):
        out.append(_xml_escape(value))
    else:
        out.append(_inline(value))


def render_html(fields: Fields) -> str:
    out = ["<main>"]
    for name, value in fields:
        out.append(f"\n<section data-field={quoteattr(name)}><h2>{_xml_escape(name)}</h2>")
        _html_value(value, out)
        out.append("</section>")
    out.append("\n</main>")
    return "".join(out)


#: Keys an accessibility-tree line shows in its head: ``[ref] tag 'text'``.
_AX_HEAD = ("ref", "tag", "text")


def _ax_quoted(text: str) -> str:
    """A string as Python's ``repr`` writes it (one line, escaped), as BrowserGym's and
    WebArena's accessibility-tree dumps write names."""
    return repr(text)


def _ax_scalar(value: Any) -> str:
    """A leaf: strings quoted, empty containers as ``[]`` / ``{}``, other scalars bare."""
    if isinstance(value, (dict, list)):
        return _empty(value)
    return _ax_quoted(value) if isinstance(value, str) else _inline(value)


def _ax_node(node: dict[str, Any], depth: int, out: list[str]) -> None:
    """One element line, ``[ref] tag 'text' key: value ...``, then its children one tab deeper."""
    parts = []
    if "ref" in node and not _nested(node["ref"]):
        ref = node["ref"]
        parts.append(f"[{ref!r}]" if type(ref) is int else f"[{_inline(_empty(ref))}]")
    if "tag" in node and not _nested(node["tag"]):
        tag = node["tag"]
        parts.append(tag if isinstance(tag, str) and tag and _PLAIN.match(tag) else _ax_scalar(tag))
    if "text" in node and not _nested(node["text"]):
        parts.append(_ax_scalar(node["text"]))
    nested = []
    for key, value in node.items():
        kind = type(value)
        if kind is str or kind is int:  # the common scalars first, as _ax_scalar writes them
            if key not in _AX_HEAD:
                parts.append(f"{key}: {value!r}")
        elif key in _AX_HEAD and not _nested(value):
            continue
        elif isinstance(value, list) and value and not any(_nested(v) for v in value):
            parts.append(f"{key}: [{', '.join(_ax_scalar(v) for v in value)}]")
        elif _nested(value):
            nested.append((key, value))
        else:
            parts.append(f"{key}: {_ax_scalar(value)}")
    out.append("\t" * depth + (" ".join(parts) if parts else "{}"))
    for key, value in nested:
        if key != "children":
            out.append("\t" * (depth + 1) + f"{key}:")
            _ax_value(value, depth + 2, out)
        else:
            _ax_value(value, depth + 1, out)


def _ax_value(value: Any, depth: int, out: list[str]) -> None:
    if isinstance(value, dict):
        _ax_node(value, depth, out)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, list):
                out.append("\t" * depth + ("-" if item else "[]"))
                _ax_value(item, depth + 1, out)
            else:
                _ax_value(item, depth, out)
    else:
        out.append("\t" * depth + _ax_scalar(value))


def render_axtree(fields: Fields) -> str:
    """An accessibility-tree-like text, as WebArena and BrowserGym show pages to models.

    A scalar field is one ``name: value`` line; a nested one is ``name:`` followed by one
    line per element, ``[ref] tag 'text' key: value ...`` (the ``ref``, ``tag`` and ``text``
    keys, when present, make the line's head), children one tab deeper.
    """
    out: list[str] = []
    for name, value in fields:
        if _nested(value):
            out.append(f"{name}:")
            _ax_value(value, 0, out)
        elif isinstance(value, str) and "\n" not in value and "\r" not in value:
            out.append(f"{name}: {value}")
        else:
            out.append(f"{name}: {_ax_scalar(value)}")
    return "\n".join(out)


#: Observation format name -> renderer.
RENDERERS: dict[str, Callable[[Fields], str]] = {
    "json": render_json,
    "markdown": render_markdown,
    "xml": render_xml,
    "yaml": render_yaml,
    "key_value": render_key_value,
    "html": render_html,
    "axtree": render_axtree,
}

#: The field under which a harness shows earlier steps (see :meth:`BoundHarness.render`).
HISTORY_FIELD = "history"


def _json_splice(head: str, items: Sequence[str]) -> str:
    body = f'"{HISTORY_FIELD}": [' + ", ".join(items) + "]}"
    return "{" + body if head == "{}" else head[:-1] + ", " + body


def _xml_item(entry: Any) -> str:
    out = ["<item>"]
    _xml_value(entry, out)
    out.append("</item>")
    return "".join(out)


def _xml_splice(head: str, items: Sequence[str]) -> str:
    return (
        head[: -len("</observation>")]
        + f"<{HISTORY_FIELD}>"
        + "".join(items)
        + f"</{HISTORY_FIELD}></observation>"
    )


def _markdown_item(entry: Any) -> str:
    out: list[str] = []
    _md_lines([entry], 0, out)
    return "\n".join(out)


def _markdown_splice(head: str, items: Sequence[str]) -> str:
    body = f"## {HISTORY_FIELD}\n" + ("\n".join(items) if items else "(empty)")
    return head + "\n\n" + body if head else body


def _key_value_item(entry: Any) -> tuple[str, ...]:
    # The item's lines with an empty path: each line starts with the item's path (prefixed on join).
    out: list[str] = []
    _kv_lines(entry, "", out)
    return tuple(out)


def _key_value_splice(head: str, items: Sequence[tuple[str, ...]]) -> str:
    lines = [f"{HISTORY_FIELD}[{i}]{line}" for i, item in enumerate(items) for line in item]
    body = "\n".join(lines) if items else f"{HISTORY_FIELD} = []"
    return head + "\n" + body if head else body


#: Formats that write a last ``history`` field from its items written one by one, so that a
#: history's items are written once rather than at every step: format -> (write one item,
#: join the text of the other fields with the items' writings, in the order shown).
#: ``join(render(pairs), [item(e) for e in entries])`` is exactly
#: ``render([*pairs, ("history", entries)])`` when no field of ``pairs`` is named
#: ``history`` (``tests/test_formats_history.py``).
HISTORY_SPLICES: dict[str, tuple[Callable[[Any], Any], Callable[[str, Sequence[Any]], str]]] = {
    "json": (_json_text, _json_splice),
    "xml": (_xml_item, _xml_splice),
    "markdown": (_markdown_item, _markdown_splice),
    "key_value": (_key_value_item, _key_value_splice),
}

#: Formats added to reproduce real systems (WebArena and BrowserGym page text): full levels,
#: but left out of ``DEFAULT_SPACE`` so that its designs stay as they were.
CONVENTION_FORMATS = ("axtree",)


#: The formats this package defines (a plugin's format cannot take these names).
BUILTIN_FORMATS: tuple[str, ...] = tuple(RENDERERS)

#: Every ``obs_format`` level: built-in, registered, and installed plugins' (loaded on demand).
FORMATS = LiveLevels(RENDERERS, "formats")


def register_format(name: str, renderer: Callable[[Fields], str]) -> None:
    """Add an observation format: a new level of the ``obs_format`` factor.

    The renderer must be pure and deterministic and must show every field it is given, in
    the given order (field order is a separate factor).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"observation format name {name!r} must be an identifier such as toml_like")
    if not callable(renderer):
        raise TypeError(f"observation format {name!r}: the renderer must be callable (fields -> str)")
    if name in BUILTIN_FORMATS and RENDERERS.get(name) is not renderer:
        raise ValueError(f"observation format {name!r} is a built-in level; choose another name")
    if name in RENDERERS and RENDERERS[name] is not renderer:
        raise ValueError(f"observation format {name!r} is already registered")
    RENDERERS[name] = renderer


def _register_format_plugin(name: str, obj: Any) -> None:
    """A ``harness_gym.formats`` entry point: a renderer (fields -> str)."""
    if not callable(obj):
        raise PluginError(f"a harness_gym.formats entry point must name a renderer (fields -> str): {obj!r}")
    register_format(name, obj)


set_loader("formats", _register_format_plugin)
