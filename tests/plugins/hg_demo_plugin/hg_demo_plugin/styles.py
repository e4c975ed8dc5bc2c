"""The slash tool style: ``/tool arg=value ...`` with JSON-encoded values.

It gives a per-tool ``pattern`` (the grammar for constrained decoding when a step has more
legal actions than the grammar lists) and no ``find``: the lenient parser finds a slash
command inside prose on a line of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from harness_gym.core.tools import ToolStyle

_HEAD = re.compile(r"/([A-Za-z_]\w*)")
_ARG = re.compile(r"\s+([A-Za-z_]\w*)=(\"(?:[^\"\\]|\\.)*\"|-?\d+)")


def write(tool: str, args: Sequence[tuple[str, Any]]) -> str:
    return "/" + tool + "".join(f" {k}={json.dumps(v, ensure_ascii=False)}" for k, v in args)


def read(text: str) -> tuple[str, dict[str, Any]]:
    head = _HEAD.match(text)
    if head is None:
        raise ValueError("expected /tool arg=value ...")
    args: dict[str, Any] = {}
    pos = head.end()
    while pos < len(text):
        m = _ARG.match(text, pos)
        if m is None:
            raise ValueError(f"cannot read an argument at {text[pos : pos + 20]!r}")
        if m.group(1) in args:
            raise ValueError(f"argument {m.group(1)!r} given twice")
        args[m.group(1)] = json.loads(m.group(2))
        pos = m.end()
    return head.group(1), args


def pattern(tool: str, params: Sequence[tuple[str, Any]], max_string: int) -> str:
    """One tool's calls: integers as JSON writes them, strings as JSON strings on one line."""
    string = f'"([^"\\\\\\x00-\\x1f]|\\\\["\\\\/bfnrt]|\\\\u[0-9a-fA-F]{{4}}){{0,{max_string}}}"'
    values = "".join(
        f" {re.escape(arg)}=({'-?(0|[1-9][0-9]{0,17})' if param.type == 'int' else string})"
        for arg, param in params
    )
    return re.escape("/" + tool) + values


SLASH = ToolStyle(
    name="slash",
    write=write,
    read=read,
    hint="Reply with one slash command: /tool arg=value ..., strings in double quotes, e.g. /pick index=2.",
    pattern=pattern,
)
