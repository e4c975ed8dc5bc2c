"""Reading and writing result rows: JSON Lines as they come, Parquet or CSV tables at the end.

Every row is checked against the row schema (:mod:`harness_gym.rows.schema`) as it is
written, so a column no one registered is an error, not a column that vanishes on the way
back. Tables are typed from the schema; JSON columns are JSON text in tables.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from harness_gym.rows.schema import arrow_schema, check_row, column, column_names, encode, plain

TABLE_SUFFIXES = (".parquet", ".csv")
#: The files of a folder of rows: its record (what wrote the rows, their columns), the rows as
#: JSON Lines, and the same rows as a Parquet table.
SWEEP_FILE = "sweep.json"
ROWS_JSONL = "episodes.jsonl"
ROWS_PARQUET = "episodes.parquet"


def row_line(row: Mapping[str, Any]) -> str:
    """A row as one JSON Lines line (checked against the schema)."""
    check_row(row)
    return json.dumps(row, separators=(",", ":"), ensure_ascii=False, default=plain) + "\n"


def append_rows(fh: IO[str], rows: Iterable[Mapping[str, Any]]) -> int:
    """Append rows to an open JSON Lines file and flush; return how many.

    Every row is checked before any is written, so a bad row leaves the file as it was.
    """
    lines = [row_line(row) for row in rows]
    fh.write("".join(lines))
    fh.flush()
    return len(lines)


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write rows as a new JSON Lines file, atomically."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        append_rows(fh, rows)
    os.replace(tmp, path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON Lines file (a damaged line, such as a torn last write, is skipped)."""
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                rows.append(row)
    return rows


def to_table(rows: Sequence[Mapping[str, Any]], base: Sequence[str] = (), check: bool = True) -> Any:
    """Rows as a typed Arrow table (``base`` columns first, also when there are no rows).

    With ``check=False`` (reading what another version or an unimported module wrote) a
    column no one registered keeps the type its values have instead of raising.
    """
    import pyarrow as pa

    if check:
        for row in rows:
            check_row(row)
    names = column_names(rows, base)
    flat = [encode(r) for r in rows]
    unknown = [n for n in names if column(n) is None]
    inferred = (
        pa.Table.from_pylist([{n: r.get(n) for n in unknown} for r in flat]).schema if unknown else None
    )
    return pa.Table.from_pylist(flat, schema=arrow_schema(names, inferred))


def write_table(rows: Sequence[Mapping[str, Any]], path: Path, base: Sequence[str] = ()) -> None:
    """Write rows as Parquet (``.parquet``) or CSV (``.csv``), atomically."""
    table = to_table(rows, base)
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, tmp)
    elif path.suffix == ".csv":
        import pyarrow.csv as pcsv

        pcsv.write_csv(table, tmp)
    else:
        raise ValueError(f"row tables are {' or '.join(TABLE_SUFFIXES)} files, not {path.name}")
    os.replace(tmp, path)


def read_table(path: Path) -> Any:
    """A Parquet or CSV table of rows as a pandas DataFrame, typed from the schema."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        return table.cast(arrow_schema(table.column_names, table.schema)).to_pandas()
    import csv

    import pyarrow.csv as pcsv

    with path.open(newline="", encoding="utf-8") as fh:
        names = next(csv.reader(fh), [])
    schema = arrow_schema(names)
    options = pcsv.ConvertOptions(
        column_types={f.name: f.type for f in schema},
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )
    return pcsv.read_csv(path, convert_options=options).to_pandas()


def rows_frame(rows: Sequence[Mapping[str, Any]], base: Sequence[str] = ()) -> Any:
    """Rows read back as a pandas DataFrame typed from the schema (JSON columns as JSON text)."""
    return to_table(rows, base, check=False).to_pandas()
