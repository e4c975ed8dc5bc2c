"""Result rows: one schema (each column defined once) and one store (JSON Lines, Parquet, CSV).

Sweeps, searches and multi-agent sweeps write their rows through here; see
:mod:`harness_gym.rows.schema` for the columns and the hook that adds more.
"""

from harness_gym.rows.schema import (
    LLM_COLUMNS,
    SWEEP_COLUMNS,
    Column,
    RowSchemaError,
    check_row,
    register_columns,
    registered,
    sweep_columns,
)
from harness_gym.rows.store import (
    ROWS_JSONL,
    ROWS_PARQUET,
    SWEEP_FILE,
    append_rows,
    read_jsonl,
    read_table,
    rows_frame,
    write_jsonl,
    write_table,
)

__all__ = [
    "LLM_COLUMNS",
    "ROWS_JSONL",
    "ROWS_PARQUET",
    "SWEEP_FILE",
    "SWEEP_COLUMNS",
    "Column",
    "RowSchemaError",
    "append_rows",
    "check_row",
    "read_jsonl",
    "read_table",
    "register_columns",
    "registered",
    "rows_frame",
    "sweep_columns",
    "write_jsonl",
    "write_table",
]
