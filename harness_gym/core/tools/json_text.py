"""JSON as the parsers read it: no key given twice, numbers exact, integers as JSON Schema
counts them; and argument values written back as text."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from harness_gym.core.tools.errors import ActionError, preview


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
        return plain_number(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def plain_number(value: Any) -> Any:
    """A decoded JSON value with an integral number as ``int`` and other numbers as ``float``."""
    if isinstance(value, Decimal):
        whole = json_integer(value)
        return whole if whole is not None else float(value)
    return value


def shown(value: Any) -> str:
    """A decoded value as an error message shows it."""
    return preview(repr(plain_number(value)))


def written_value(value: Any) -> str:
    """A decoded JSON value as text (an integer as digits, a string as itself)."""
    return value if isinstance(value, str) else dump_json(value)


def text_value(value: Any) -> str:
    """A native call's argument as text: a string as itself, a list or a number as JSON text."""
    if isinstance(value, str):
        return value
    return dump_json(value) if isinstance(value, (list, tuple, dict, float)) else str(value)


def unparsed(arguments: Any) -> str:
    """Native-call arguments that are not an object, as text a style writes for its parser to
    report (a string as itself, any other value as JSON)."""
    return arguments if isinstance(arguments, str) else dump_json(arguments)


#: A JSON string (kept as it is) or a trailing comma before ``}`` / ``]`` (dropped): the
#: repair never edits text inside a string (``"a,}b"`` stays ``a,}b``). Each alternative
#: starts on a distinct character, so the scan is linear.
_TRAILING_COMMA = re.compile(r'"(?:[^"\\]|\\.)*"|,(\s*[}\]])', re.DOTALL)


def _drop_trailing_commas(text: str) -> str:
    return _TRAILING_COMMA.sub(lambda m: m.group(0) if m.group(1) is None else m.group(1), text)


def load_reply(text: str, lenient: bool) -> Any:
    """The JSON value of a reply (lenient: trailing commas forgiven), or a ``malformed`` error."""
    try:
        return load_json(text)
    except DuplicateKeyError as err:
        raise ActionError("malformed", f"{err} in the call object: give each key once") from None
    except (ValueError, RecursionError) as err:
        if lenient and "," in text:
            try:
                return load_json(_drop_trailing_commas(text))
            except (ValueError, RecursionError):
                pass
        raise ActionError("malformed", f"malformed JSON ({err}): {preview(text)}") from None
