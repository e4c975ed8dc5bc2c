"""Recorded trajectories, stored beside the rows: which to keep, how they are written and read.

File layout, in a folder of rows (a sweep, a search, an eval's or a train's evaluation run
folder: :mod:`harness_gym.analysis.eval_run`)::

    DIR/trajectories.jsonl.gz   one gzip member per episode: a JSON line {index, agent, task_id,
                                harness_name, harness_id, seed, success, trajectory}
    DIR/screenshots/INDEX/T.png browser episodes' screenshots (step T; 0 is the reset)

Each episode is its own gzip member (``gzip`` and ``zcat`` read the file as one stream),
appended and flushed as its row is written, so the file resumes like the rows: a torn last
member is cut off on the next run (:func:`repair`) and that cell's row, written after its
trajectory, is re-run. A cell run again appends a newer member; the last one wins.

Which episodes keep their trajectory is a :class:`TrajectoryPolicy`, the value of
``--trajectories``: ``none``, ``failures``, ``sample:N`` (the first N seeds of every agent,
task and harness, so every sampled episode has its pairs), ``all``, or ``pairs`` (the default:
``sample:1`` plus every episode whose outcome differs from a paired partner's: the same agent,
task and seed under a harness one factor away; kept by :func:`prune` once the run ends, since a
partner may finish later or on another worker).
"""

from __future__ import annotations

import json
import os
import shutil
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from harness_gym.rows.schema import plain

TRAJECTORIES = "trajectories.jsonl.gz"
SCREENSHOTS = "screenshots"
MODES = ("none", "failures", "sample", "all", "pairs")
DEFAULT_POLICY = "pairs"
#: The row columns a stored trajectory repeats (so the file reads without the rows).
KEYS = ("index", "agent", "task_id", "harness_name", "harness_id", "seed", "success")


class TrajectoryError(ValueError):
    """A bad ``--trajectories`` value or a damaged trajectories file."""


@dataclass(frozen=True)
class TrajectoryPolicy:
    """Which episodes keep their recorded trajectory (see the module docstring)."""

    mode: str = DEFAULT_POLICY
    n: int = 1

    @classmethod
    def parse(cls, text: str | TrajectoryPolicy | None) -> TrajectoryPolicy:
        """``none``, ``failures``, ``sample:N``, ``all`` or ``pairs`` (None: the default)."""
        if isinstance(text, TrajectoryPolicy):
            return text
        value = (text or DEFAULT_POLICY).strip().lower()
        if value.startswith("sample:"):
            count = value.split(":", 1)[1]
            if not count.isdigit() or int(count) < 1:
                raise TrajectoryError(
                    f"--trajectories sample:N takes a whole number N >= 1 (seeds per agent, task and "
                    f"harness), got {text!r}"
                )
            return cls("sample", int(count))
        if value not in MODES or value == "sample":
            raise TrajectoryError(
                f"--trajectories must be none, failures, sample:N, all or pairs (the default), got {text!r}"
            )
        return cls(value, 1)

    @property
    def records(self) -> bool:
        """Whether episodes are recorded at all (``none`` records nothing: no cost)."""
        return self.mode != "none"

    def keeps(self, row: Mapping[str, Any], seeds: Sequence[int]) -> bool:
        """Whether to store this row's trajectory as it is written (``pairs`` keeps every one
        until :func:`prune` knows the partners' outcomes)."""
        if self.mode in ("all", "pairs"):
            return True
        if self.mode == "failures":
            return row.get("success") is not True
        if self.mode == "sample":
            return int(row["seed"]) in set(list(seeds)[: self.n])
        return False

    def __str__(self) -> str:
        return f"sample:{self.n}" if self.mode == "sample" else self.mode


def _member(record: Mapping[str, Any]) -> bytes:
    """One gzip member holding one JSON line."""
    text = json.dumps(record, separators=(",", ":"), ensure_ascii=False, default=plain) + "\n"
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    return packer.compress(text.encode("utf-8")) + packer.flush()


def _members(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """``(start, end, text)`` of each whole gzip member; stops at a torn or damaged one."""
    pos = 0
    while pos < len(data):
        unpacker = zlib.decompressobj(31)
        try:
            text = unpacker.decompress(data[pos:])
        except zlib.error:
            return
        if not unpacker.eof:
            return
        end = len(data) - len(unpacker.unused_data)
        yield pos, end, text
        pos = end


def repair(folder: str | Path) -> int:
    """Cut a torn or damaged tail off the folder's trajectories file; return the bytes cut."""
    path = Path(folder) / TRAJECTORIES
    if not path.exists():
        return 0
    data = path.read_bytes()
    good = 0
    for _, end, _ in _members(data):
        good = end
    if good < len(data):
        with path.open("r+b") as fh:
            fh.truncate(good)
    return len(data) - good


class TrajectoryWriter:
    """Append trajectories to a folder's file, one gzip member each, flushed as they come."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.fh: IO[bytes] | None = None
        self.written = 0

    def write(self, row: Mapping[str, Any], trajectory: Mapping[str, Any]) -> None:
        """Store ``trajectory`` for the episode of ``row`` (its screenshots as PNG files)."""
        if self.fh is None:
            self.fh = (self.folder / TRAJECTORIES).open("ab")
        record = {k: row.get(k) for k in KEYS}
        record["trajectory"] = self._screenshots(int(row.get("index") or 0), dict(trajectory))
        self.fh.write(_member(record))
        self.fh.flush()
        self.written += 1

    def _screenshots(self, index: int, trajectory: dict[str, Any]) -> dict[str, Any]:
        places = [trajectory, *trajectory.get("steps", [])]
        if not any("screenshot_png" in p for p in places):
            return trajectory
        trajectory["steps"] = [dict(s) for s in trajectory.get("steps", [])]
        places = [trajectory, *trajectory["steps"]]
        where = self.folder / SCREENSHOTS / str(index)
        where.mkdir(parents=True, exist_ok=True)
        for t, place in enumerate(places):
            png = place.pop("screenshot_png", None)
            if png:
                (where / f"{t}.png").write_bytes(png)
                place["screenshot"] = f"{SCREENSHOTS}/{index}/{t}.png"
        return trajectory

    def close(self) -> None:
        if self.fh is not None and not self.fh.closed:
            self.fh.close()


def read_trajectories(folder: str | Path, indices: Iterable[int] | None = None) -> dict[int, dict[str, Any]]:
    """The stored trajectories of a folder by row index (the last stored of an index wins);
    only ``indices`` when given. A torn tail is skipped, not raised."""
    path = Path(folder) / TRAJECTORIES
    if not path.exists():
        return {}
    wanted = None if indices is None else {int(i) for i in indices}
    out: dict[int, dict[str, Any]] = {}
    for _, _, text in _members(path.read_bytes()):
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            index = int(record.get("index", -1))
            if wanted is None or index in wanted:
                out[index] = record
    return out


def prune(folder: str | Path, keep: Iterable[int]) -> tuple[int, int]:
    """Keep only the trajectories of rows ``keep`` (the newest of each), atomically; drop the
    others' screenshots. Returns ``(kept, dropped)``."""
    folder = Path(folder)
    path = folder / TRAJECTORIES
    if not path.exists():
        return 0, 0
    keep = {int(i) for i in keep}
    newest: dict[int, bytes] = {}
    seen = 0
    for _, _, text in _members(path.read_bytes()):
        seen += 1
        try:
            index = int(json.loads(text.splitlines()[0])["index"])
        except (ValueError, KeyError, IndexError):
            continue
        newest.pop(index, None)  # re-inserted last: the file stays in write order
        newest[index] = text
    tmp = path.with_name(path.name + ".tmp")
    kept = 0
    with tmp.open("wb") as fh:
        for index, text in newest.items():
            if index in keep:
                packer = zlib.compressobj(6, zlib.DEFLATED, 31)
                fh.write(packer.compress(text) + packer.flush())
                kept += 1
    os.replace(tmp, path)
    shots = folder / SCREENSHOTS
    if shots.is_dir():
        for sub in shots.iterdir():
            if sub.name.isdigit() and int(sub.name) not in keep:
                shutil.rmtree(sub, ignore_errors=True)
    return kept, seen - kept


def remove(folder: str | Path) -> None:
    """Delete a folder's trajectories and screenshots (``--overwrite``)."""
    folder = Path(folder)
    (folder / TRAJECTORIES).unlink(missing_ok=True)
    shutil.rmtree(folder / SCREENSHOTS, ignore_errors=True)
