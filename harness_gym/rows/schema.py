"""The columns of result rows (sweep, search and multi-agent), each defined once.

A :class:`Column` names its type (``int``, ``float``, ``bool``, ``str`` or ``json``: any
JSON value, kept as is in JSON Lines and written as JSON text in Parquet and CSV) and says
what it holds. A name ending in ``*`` is a family of columns (``level_*``: one per factor).
Modules that add columns call :func:`register_columns` at import (search's cost columns,
the multi-agent columns); a plugin does the same. Writing a row with a column that no one
registered, or a value of the wrong type, raises :class:`RowSchemaError`: nothing is
dropped silently.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TYPES = ("int", "float", "bool", "str", "json")


class RowSchemaError(ValueError):
    """A row has a column no one registered, or a value its column's type does not allow."""


@dataclass(frozen=True)
class Column:
    """One row column: its name (``prefix*`` for a family), type and meaning."""

    name: str
    type: str
    description: str

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"column {self.name!r}: type {self.type!r} is not one of {TYPES}")

    @property
    def is_json(self) -> bool:
        """Whether the value is written as JSON text in Parquet and CSV."""
        return self.type == "json"

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` (``None`` always is) fits this column's type."""
        if value is None or self.type == "json":
            return True
        if self.type == "str":
            return isinstance(value, str)
        kind_of = type(value)
        is_bool = isinstance(value, bool) or (
            kind_of.__module__ == "numpy" and kind_of.__name__.startswith("bool")
        )
        if self.type == "bool":
            return is_bool
        kind = numbers.Integral if self.type == "int" else numbers.Real  # numpy scalars included
        return isinstance(value, kind) and not is_bool


_COLUMNS: dict[str, Column] = {}
_FOUND: dict[str, Column | None] = {}  # name -> its column, families resolved (cleared on register)


def register_columns(*columns: Column) -> None:
    """Add columns to the schema (again with the same definition is a no-op)."""
    for column in columns:
        old = _COLUMNS.get(column.name)
        if old is not None and old.type != column.type:
            raise RowSchemaError(
                f"column {column.name!r} is already registered as {old.type!r}; "
                f"cannot make it {column.type!r}"
            )
        _COLUMNS.setdefault(column.name, column)
    _FOUND.clear()


def column(name: str) -> Column | None:
    """The registered column called ``name`` (or the family it belongs to), or None."""
    if name not in _FOUND:
        found = _COLUMNS.get(name)
        if found is None:
            families = (c for k, c in _COLUMNS.items() if k.endswith("*") and name.startswith(k[:-1]))
            found = next((c for c in families if len(name) >= len(c.name)), None)
        _FOUND[name] = found
    return _FOUND[name]


def registered() -> list[Column]:
    """Every registered column, in registration order."""
    return list(_COLUMNS.values())


def check_row(row: Mapping[str, Any]) -> None:
    """Raise :class:`RowSchemaError` if a column of ``row`` is unknown or holds the wrong type."""
    for name, value in row.items():
        col = column(name)
        if col is None:
            raise RowSchemaError(
                f"row column {name!r} is not in the row schema; register it with "
                "harness_gym.rows.register_columns(Column(name, type, description))"
            )
        if not col.accepts(value):
            raise RowSchemaError(
                f"row column {name!r} is {col.type}, got {type(value).__name__} {value!r:.80}"
            )


def column_names(rows: Iterable[Mapping[str, Any]], base: Sequence[str] = ()) -> list[str]:
    """The columns of a table of ``rows``: ``base`` first, then each new key as it appears."""
    names = dict.fromkeys(base)
    for row in rows:
        names.update(dict.fromkeys(row))
    return list(names)


def encode(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row for a flat table (Parquet, CSV): JSON columns as JSON text."""
    out = dict(row)
    for name, value in row.items():
        col = column(name)
        if col is not None and col.is_json and value is not None:
            out[name] = json.dumps(value, sort_keys=True, ensure_ascii=False, default=plain)
    return out


def plain(value: Any) -> Any:
    """A JSON-able form of a value ``json`` does not know (numpy scalars and arrays, else text)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def arrow_schema(names: Sequence[str], inferred: Any = None) -> Any:
    """The Arrow schema of a table with these columns (JSON columns as strings).

    A column no one registered (reading a folder another version wrote) takes its type from
    ``inferred`` (an Arrow schema), or string.
    """
    import pyarrow as pa

    arrow = {
        "int": pa.int64(),
        "float": pa.float64(),
        "bool": pa.bool_(),
        "str": pa.string(),
        "json": pa.string(),
    }
    fields = []
    for name in names:
        col = column(name)
        if col is not None:
            fields.append((name, arrow[col.type]))
        elif inferred is not None and name in inferred.names:
            fields.append((name, inferred.field(name).type))
        else:
            fields.append((name, pa.string()))
    return pa.schema(fields)


# -- the columns every sweep row has -------------------------------------------------------

#: The columns of a sweep row, in the order rows carry them (``level_*`` and ``harness``
#: after ``wall_time``, the language-model columns last).
SWEEP_COLUMNS = (
    Column("index", "int", "the cell's position in the sweep"),
    Column("sweep_id", "str", "the content hash of the sweep spec"),
    Column("agent", "str", "the agent's name"),
    Column("task_id", "str", "the task"),
    Column("harness_name", "str", "the harness's short name in the sweep (h00, ...)"),
    Column("harness_id", "str", "the harness's content hash"),
    Column("seed", "int", "the episode seed"),
    Column("episode_return", "float", "the episode's return"),
    Column("success", "bool", "whether the task was solved"),
    Column("steps", "int", "steps taken"),
    Column("invalid_actions", "int", "actions the harness could not parse or apply"),
    Column(
        "parse_failures",
        "int",
        "attempted actions the parser refused (every parse status but ok; core/parse_status.py)",
    ),
    Column("parse_status", "json", "parse status -> count over the episode's attempted actions"),
    Column("ceiling", "float", "the seed ceiling: the best return any policy reaches through the harness"),
    Column("ceiling_method", "str", "how the ceiling was found (exact, oracle, ...)"),
    Column("error", "str", "why the cell has no result (None when it ran)"),
    Column("wall_time", "float", "seconds the cell took"),
    Column("level_*", "str", "the harness's level of each factor of the space"),
    Column("harness", "json", "the full harness spec (replayable)"),
)

#: What rows of language-model agents add (None for other agents).
LLM_COLUMNS = (
    Column("model", "str", "the model name"),
    Column(
        "model_identity",
        "str",
        "the weights: a content hash of a local folder, or what the server reports (llm/identity.py)",
    ),
    Column("backend", "str", "the model backend"),
    Column("sampling", "json", "the sampling parameters"),
    Column("constrained", "str", "the grammar kinds used to constrain decoding"),
    Column("llm_requests", "int", "model requests"),
    Column("cache_hits", "int", "requests answered from the completion cache"),
    Column("prompt_tokens", "int", "prompt tokens"),
    Column("completion_tokens", "int", "completion tokens"),
    Column("reasoning_tokens", "int", "completion tokens spent thinking (where the server counts them)"),
    Column("truncated_replies", "int", "replies cut at max_tokens inside a thinking or tool-call block"),
    Column("server_version", "str", "what the model server reports on GET /version (vLLM), or unknown"),
    Column("llm_latency", "float", "seconds waiting for the model"),
    Column("llm_errors", "json", "error kind -> count"),
    Column("completions", "json", "the episode's raw completions"),
)

register_columns(*SWEEP_COLUMNS, *LLM_COLUMNS)


def sweep_columns(factors: Sequence[str]) -> list[str]:
    """The column names of a sweep's rows for these factors (a table with no rows has these)."""
    names: list[str] = []
    for col in (*SWEEP_COLUMNS, *LLM_COLUMNS):
        if col.name == "level_*":
            names.extend(f"level_{f}" for f in factors)
        else:
            names.append(col.name)
    return names
