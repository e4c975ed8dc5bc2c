"""A sweep's output folder: the spec file, rows appended as JSON Lines, and the Parquet table.

Output folder::

    DIR/sweep.json        the spec and its id (a folder holds the rows of one sweep only)
    DIR/episodes.jsonl    one row per finished cell, appended and flushed as each finishes
    DIR/episodes.parquet  the same rows in cell order, written from the JSON Lines at the end
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness_gym.analysis.sweep.spec import SweepError, SweepSpec
from harness_gym.logging_backends import log_progress
from harness_gym.progress import progress_bar
from harness_gym.rows import (
    ROWS_JSONL,
    ROWS_PARQUET,
    SWEEP_FILE,
    append_rows,
    read_jsonl,
    read_table,
    rows_frame,
    sweep_columns,
    write_table,
)


def claim_folder(out_dir: Path, spec: SweepSpec, overwrite: bool = False) -> None:
    """Make ``out_dir`` this sweep's folder, or fail clearly if it holds another sweep's rows."""
    out_dir.mkdir(parents=True, exist_ok=True)
    meta_path, rows_path = out_dir / SWEEP_FILE, out_dir / ROWS_JSONL
    if overwrite:
        for name in (SWEEP_FILE, ROWS_JSONL, ROWS_PARQUET):
            (out_dir / name).unlink(missing_ok=True)
    theirs: dict[str, Any] | None = None
    if meta_path.exists():
        try:
            theirs = json.loads(meta_path.read_text())
        except json.JSONDecodeError:
            raise SweepError(f"{meta_path} is not valid JSON; remove it or use another --out") from None
    elif rows_path.exists() and rows_path.stat().st_size:
        first = _first_row(rows_path)
        if first is not None and first.get("sweep_id") != spec.id:
            raise SweepError(
                f"{out_dir} holds rows of sweep {first.get('sweep_id')!r} (no {SWEEP_FILE}); this is sweep "
                f"{spec.id}. Use another --out, or --overwrite to discard those rows."
            )
    if theirs is not None and theirs.get("sweep_id") != spec.id:
        mine = spec.identity()
        diff = [k for k in mine if theirs.get(k) != mine[k]]
        details = "; ".join(f"{k}: {_short(theirs.get(k))} there, {_short(mine[k])} here" for k in diff)
        raise SweepError(
            f"{out_dir} holds rows of another sweep ({theirs.get('sweep_id')}); this is sweep {spec.id}. "
            f"They differ in {details or 'their spec'}. Use another --out, or --overwrite to discard "
            "the folder's rows."
        )
    if theirs is None:
        _atomic_write(meta_path, json.dumps(spec.to_dict(), indent=1))


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _first_row(path: Path) -> dict[str, Any] | None:
    with path.open() as fh:
        for line in fh:
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def read_finished(out_dir: Path, sweep_id: str) -> dict[int, dict[str, Any]]:
    """Rows already in ``episodes.jsonl`` by cell index; a half-written last line is cut off."""
    path = out_dir / ROWS_JSONL
    if not path.exists():
        return {}
    data = path.read_bytes()
    good = len(data) if data.endswith(b"\n") or not data else data.rfind(b"\n") + 1
    rows: dict[int, dict[str, Any]] = {}  # by cell; the last row of a cell wins
    offset = 0
    for line in data[:good].splitlines(keepends=True):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            # Only a torn write at the end is expected; anything else is damage worth a message.
            if offset + len(line) < good:
                raise SweepError(f"{path} has a damaged line at byte {offset}; fix or remove it") from None
            good = offset
            break
        offset += len(line)
        if row.get("sweep_id") != sweep_id:
            raise SweepError(
                f"{path} holds a row of sweep {row.get('sweep_id')!r}, not {sweep_id}; use another --out"
            )
        rows[int(row["index"])] = row  # a re-run cell (retry_errors) appends a newer row
    if good < len(data):
        with path.open("r+b") as fh:  # drop the torn tail so appends start on a fresh line
            fh.truncate(good)
    return rows


class RowWriter:
    """Append rows to the JSON Lines file, flushed one by one, and tick the progress bar.

    A row that carries its episode's trajectory (under ``TRAJECTORY_KEY``) hands it to
    ``trajectories(row, trajectory)`` first (or drops it, when that is None), so a trajectory is
    on disk before the row that says its cell is done."""

    def __init__(
        self,
        path: Path,
        total: int,
        show: bool,
        desc: str,
        trajectories: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
    ) -> None:
        self.trajectories = trajectories
        self.fh = path.open("a")
        self.rows: list[dict[str, Any]] = []
        self.errors = 0
        self.total = total
        self.bar = progress_bar(total, desc, unit="cell", enabled=show and total > 0, smoothing=0.1)

    def write(self, rows: Iterable[dict[str, Any]]) -> None:
        from harness_gym.analysis.sweep.cell import TRAJECTORY_KEY

        rows = list(rows)
        for row in rows:
            trajectory = row.pop(TRAJECTORY_KEY, None)
            if trajectory is not None and self.trajectories is not None:
                self.trajectories(row, trajectory)
        n = append_rows(self.fh, rows)  # checked against the row schema: unknown columns raise
        self.rows.extend(rows)
        self.errors += sum(row["error"] is not None for row in rows)
        log_progress(rows, len(self.rows), self.total)  # to the run log of --log, if one is active
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if not self.fh.closed:
            self.fh.close()
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_parquet(rows: Sequence[Mapping[str, Any]], path: Path, factors: Sequence[str]) -> None:
    """Write rows (cell order) as Parquet, atomically, typed from the row schema."""
    write_table(rows, path, sweep_columns(factors))


def read_meta(out_dir: str | Path) -> dict[str, Any]:
    """The ``sweep.json`` of a sweep folder."""
    path = Path(out_dir) / SWEEP_FILE
    if not path.exists():
        raise SweepError(f"{out_dir} is not a sweep folder (no {SWEEP_FILE}); run `harness-gym sweep` first")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SweepError(f"{path} is corrupt ({err}); rerun the sweep with --overwrite") from None
    if not isinstance(meta, dict):
        raise SweepError(f"{path} is corrupt (a {type(meta).__name__}, not a JSON object)")
    return meta


def load_rows(out_dir: str | Path) -> Any:
    """A sweep folder's rows as a pandas DataFrame in cell order (``harness`` as JSON text).

    Reads the Parquet file when it is up to date, else the JSON Lines (a running or
    interrupted sweep).
    """
    out = Path(out_dir)
    meta = read_meta(out)
    base = meta.get("columns") or sweep_columns(meta.get("factors", []))
    parquet, jsonl = out / ROWS_PARQUET, out / ROWS_JSONL
    if parquet.exists() and (not jsonl.exists() or parquet.stat().st_mtime >= jsonl.stat().st_mtime):
        frame = read_table(parquet)
        missing = [c for c in base if c not in frame.columns]
        if missing:  # written by an older version: the columns added since are empty
            for name in missing:
                frame[name] = None
            frame = frame[[*base, *(c for c in frame.columns if c not in base)]]
        return frame
    rows = read_jsonl(jsonl) if jsonl.exists() else []
    if rows and all("index" in r for r in rows):
        by_index = {int(r["index"]): r for r in rows}  # the last row of a cell wins
        rows = [by_index[i] for i in sorted(by_index)]
    return rows_frame(rows, base)
