"""The slash tool style: ``/tool arg=value ...`` with JSON-encoded values."""

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


SLASH = ToolStyle(
    name="slash",
    write=write,
    read=read,
    hint="Reply with one slash command: /tool arg=value ..., strings in double quotes, e.g. /pick index=2.",
)
