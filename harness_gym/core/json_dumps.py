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


class JsonDumps:
    """``value -> text`` equal to ``json.dumps(value, <these options>)``.

    An object rather than a closure so that envs holding one pickle (vector envs send them to
    worker processes): it pickles as its options and rebuilds its C encoder on the other side.
    """

    def __init__(
        self,
        *,
        ensure_ascii: bool = True,
        sort_keys: bool = False,
        separators: tuple[str, str] = (", ", ": "),
        default: Callable[[Any], Any] | None = None,
    ) -> None:
        self._options = {
            "ensure_ascii": ensure_ascii,
            "sort_keys": sort_keys,
            "separators": tuple(separators),
            "default": default,
        }
        encoder = json.JSONEncoder(**self._options)
        if _c_make_encoder is None:  # pragma: no cover - depends on the interpreter
            self._basestring = None
            self._encode = encoder.encode
            return
        self._basestring = (
            json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
        )
        item_separator, key_separator = separators
        c_encode = _c_make_encoder(
            None,
            encoder.default,
            self._basestring,
            None,
            key_separator,
            item_separator,
            sort_keys,
            False,
            True,
        )
        self._encode = lambda value: "".join(c_encode(value, 0))

    def __call__(self, value: Any) -> str:
        if self._basestring is not None and isinstance(value, str):
            return self._basestring(value)
        return self._encode(value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._options,))


def _rebuild(options: dict[str, Any]) -> JsonDumps:
    return JsonDumps(**options)


def dumps_function(
    *,
    ensure_ascii: bool = True,
    sort_keys: bool = False,
    separators: tuple[str, str] = (", ", ": "),
    default: Callable[[Any], Any] | None = None,
) -> JsonDumps:
    """A picklable function ``value -> text`` equal to ``json.dumps(value, <these options>)``."""
    return JsonDumps(ensure_ascii=ensure_ascii, sort_keys=sort_keys, separators=separators, default=default)
