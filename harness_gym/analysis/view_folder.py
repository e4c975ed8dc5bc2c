"""The viewer's folder: written only where the viewer owns it, and only its own files replaced.

A folder is the viewer's when it is new or empty, when it holds the marker file the viewer
writes first (``.harness-gym-view``), or when everything in it is a viewer folder written
before the marker existed (the viewer's file names only, its ``index.html`` and
``data/index.js``). Any other folder is refused with :class:`ViewFolderError`, before a file
is written: a user's ``data/my_dataset/train.csv`` beside an ``index.html`` is never touched.

In a folder it owns, the viewer replaces its own files one at a time (written beside, then
moved over: never a half-written file), removes the data chunks that its last run wrote and
this one does not, and leaves anything else there alone. It never writes or deletes through a
symbolic link: a link where one of its files or folders goes is refused too.

The marker lists what was written (the view's files and the run files the page reads), so
``view --serve`` serves those and nothing else (:mod:`harness_gym.analysis.viewer_server`).
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness_gym.analysis.sweep.spec import SweepError

MARKER = ".harness-gym-view"
#: Every name (relative, ``/``-separated) the viewer writes in its folder.
VIEW_NAME = re.compile(
    r"(index\.html|assets/(tabulator\.min\.js|tabulator\.min\.css|diff\.min\.js|viewer\.js|viewer\.css)"
    r"|data/(index|t_\d{4,9})\.js)"
)
#: The run files a page reads (browser episodes' screenshots, relative to the run folder).
RUN_NAME = re.compile(r"screenshots/\d{1,9}/\d{1,9}\.png")
_CHUNK = re.compile(r"t_\d{4,9}\.js")


class ViewFolderError(SweepError):
    """A folder the viewer will not write into (its message is the one line the CLI prints)."""


def _entries(folder: Path) -> list[str]:
    """Every file and folder under ``folder`` (relative, ``/``-separated), links not followed."""
    out = []
    for top, dirs, files in os.walk(folder):
        rel = os.path.relpath(top, folder).replace(os.sep, "/")
        prefix = "" if rel == "." else rel + "/"
        out.extend(prefix + d + "/" for d in dirs)
        out.extend(prefix + f for f in files)
    return out


def _legacy(folder: Path, entries: Iterable[str]) -> bool:
    """A viewer folder written before the marker: the viewer's names only, and its page."""
    names = [e for e in entries if not e.endswith("/")]
    folders = {e for e in entries if e.endswith("/")}
    if not folders <= {"assets/", "data/"} or not all(VIEW_NAME.fullmatch(n) for n in names):
        return False
    page, index = folder / "index.html", folder / "data" / "index.js"
    try:
        return (
            "harness-gym view" in page.read_text(encoding="utf-8", errors="replace")[:4096]
            and index.read_bytes()[:16] == b"window.HG.index("
        )
    except OSError:
        return False


def _regular_or_absent(path: Path, folder: bool) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    ok = stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode)
    if not ok:
        kind = (
            "a symbolic link" if stat.S_ISLNK(mode) else "not a regular " + ("folder" if folder else "file")
        )
        raise ViewFolderError(f"{path} is {kind}; the viewer writes its own files only, never through it")


def check(out: Path) -> None:
    """Raise :class:`ViewFolderError` unless the viewer may write into ``out`` (see the module)."""
    if out.is_symlink() and not out.exists():
        raise ViewFolderError(f"{out} is a broken symbolic link; give a folder for the viewer")
    if out.exists() and not out.is_dir():
        raise ViewFolderError(f"{out} is a file; the viewer writes a folder there")
    if out.is_dir():
        entries = _entries(out)
        marker = out / MARKER
        owned = not entries or (marker.is_file() and not marker.is_symlink()) or _legacy(out, entries)
        if not owned:
            raise ViewFolderError(
                f"{out} holds files the viewer did not write (no {MARKER} in it); the viewer "
                "never overwrites them: give --out a new or empty folder, or remove that one"
            )
    for sub in ("assets", "data"):
        _regular_or_absent(out / sub, folder=True)
    for name in (MARKER, "index.html"):
        _regular_or_absent(out / name, folder=False)


def claim(out: Path) -> None:
    """:func:`check` ``out``, then make it and write the marker (before any other file)."""
    check(out)
    out.mkdir(parents=True, exist_ok=True)
    marker_text = '{"written_by": "harness-gym view", "files": [], "run_files": []}\n'
    if not (out / MARKER).exists():
        write_file(out, MARKER, marker_text)


def write_file(out: Path, name: str, text: str | bytes) -> None:
    """Write ``out/name`` beside and move it over (the viewer's own names only, no links)."""
    if name != MARKER and not VIEW_NAME.fullmatch(name):
        raise ValueError(f"the viewer does not write {name!r}")
    target = out / name
    target.parent.mkdir(exist_ok=True)
    _regular_or_absent(target.parent, folder=True)
    _regular_or_absent(target, folder=False)
    data = text.encode("utf-8") if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".hg-tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def finish(out: Path, written: Iterable[str], run_files: Iterable[str]) -> None:
    """Remove the data chunks this run did not write (the viewer's own, regular files only) and
    record what the folder holds in its marker."""
    written = sorted(set(written))
    data = out / "data"
    for entry in os.scandir(data) if data.is_dir() else []:
        name = f"data/{entry.name}"
        if _CHUNK.fullmatch(entry.name) and name not in written and entry.is_file(follow_symlinks=False):
            os.unlink(entry.path)
    record: Mapping[str, Any] = {
        "written_by": "harness-gym view",
        "files": written,
        "run_files": sorted({f for f in run_files if RUN_NAME.fullmatch(f)}),
    }
    write_file(out, MARKER, json.dumps(record, indent=1) + "\n")


def recorded(out: Path) -> tuple[list[str], list[str]]:
    """The view's files and the run files that ``out``'s marker lists (names checked again)."""
    try:
        record = json.loads((out / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ViewFolderError(
            f"{out / MARKER} cannot be read ({err}); run `harness-gym view` again"
        ) from None
    files = [f for f in record.get("files", []) if isinstance(f, str) and VIEW_NAME.fullmatch(f)]
    runs = [f for f in record.get("run_files", []) if isinstance(f, str) and RUN_NAME.fullmatch(f)]
    return files, runs
