"""JSON text with the bytes of :func:`json.dumps`, from an encoder built once.

``json.dumps`` with any keyword argument builds a new :class:`json.JSONEncoder` (and its C
encoder) on every call, which costs more than encoding a small observation. The encoders here
are built once per set of options and give exactly the text ``json.dumps`` gives with those
options (``tests/test_json_dumps.py`` checks them against it). They do not check for circular
containers (a cycle is a RecursionError rather than a ValueError); observation fields and
task states are trees.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

try:  # CPython's C encoder; other interpreters fall back to json.dumps
    from json.encoder import c_make_encoder as _c_make_encoder
except ImportError:  # pragma: no cover - depends on the interpreter
    _c_make_encoder = None


def dumps_function(
    *,
    ensure_ascii: bool = True,
    sort_keys: bool = False,
    separators: tuple[str, str] = (", ", ": "),
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """A function ``value -> text`` equal to ``json.dumps(value, <these options>)``."""
    encoder = json.JSONEncoder(
        ensure_ascii=ensure_ascii, sort_keys=sort_keys, separators=separators, default=default
    )
    if _c_make_encoder is None:  # pragma: no cover - depends on the interpreter
        return encoder.encode
    basestring = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    item_separator, key_separator = separators
    c_encode = _c_make_encoder(
        None, encoder.default, basestring, None, key_separator, item_separator, sort_keys, False, True
    )

    def dumps(value: Any) -> str:
        if isinstance(value, str):
            return basestring(value)
        return "".join(c_encode(value, 0))

    return dumps
