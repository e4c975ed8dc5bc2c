"""The ini_like observation format: one ``[name]`` section per field, the value as JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def render_ini_like(fields: Sequence[tuple[str, Any]]) -> str:
    return "\n".join(f"[{name}]\n{json.dumps(value, ensure_ascii=False)}" for name, value in fields)
