"""The viewer's data: a static folder that browses a run's rows and recorded trajectories.

:func:`write_view` writes ``RUN_DIR/view/`` (or another folder)::

    .harness-gym-view       the marker: the folder is the viewer's, and what it wrote
    index.html              the page (opens from disk: no server needed)
    assets/                 Tabulator (MIT) for the filterable episode table, jsdiff
                            (BSD-3-Clause) for the observation diff, the page's own script
    data/index.js           every row (agent, task, harness, seed, outcome, parse failures), the
                            harnesses' levels and each row's partners (:mod:`harness_gym.analysis.pairs`)
    data/t_NNN.js           the recorded trajectories, in chunks loaded when an episode opens

Data files are scripts (``window.HG.chunk(...)``) rather than JSON so that the page works
from ``file://``, where browsers refuse ``fetch``. Nothing is fetched from the network: the
libraries ship in the package (``harness_gym/analysis/viewer_assets``, with their licences).
The page's address carries its state (``#agent=...&factor=...&level=...&differs=1``,
``#ep=INDEX&vs=INDEX``), so the report links to the episodes behind each number
(:func:`view_link`).
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from harness_gym.analysis import view_folder
from harness_gym.analysis.pairs import differing, harness_levels, neighbours, partners
from harness_gym.rows.trajectories import read_trajectories

ASSETS = Path(__file__).with_name("viewer_assets")
#: The vendored libraries and the page's own files, copied into every view folder.
ASSET_FILES = ("tabulator.min.js", "tabulator.min.css", "diff.min.js", "viewer.js", "viewer.css")
VIEW_DIR = "view"
CHUNK = 100  # trajectories per data file


def view_link(report_dir: Path, run_dir: Path, **state: Any) -> str:
    """A link from a page in ``report_dir`` to the viewer of ``run_dir`` opened at ``state``
    (``agent``, ``task``, ``harness``, ``factor``, ``level``, ``outcome``, ``differs``, ``ep``)."""
    target = Path(run_dir) / VIEW_DIR / "index.html"
    rel = os.path.relpath(target, Path(report_dir)).replace(os.sep, "/")
    query = urlencode({k: v for k, v in state.items() if v is not None and v != ""})
    return f"{rel}#{query}" if query else rel


def _row_record(row: Mapping[str, Any], factors: Sequence[str]) -> dict[str, Any]:
    success = row.get("success")
    return {
        "i": int(row["index"]),
        "agent": row.get("agent"),
        "task": row.get("task_id"),
        "harness": row.get("harness_name"),
        "seed": row.get("seed"),
        "outcome": "error" if row.get("error") else ("success" if success else "failure"),
        "ret": row.get("episode_return"),
        "steps": row.get("steps"),
        "invalid": row.get("invalid_actions"),
        "parse_failures": row.get("parse_failures"),
        **{f"L_{f}": row.get(f"level_{f}") for f in factors},
    }


def view_data(run_dir: str | Path) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The index the page loads (rows, harnesses, partners) and the trajectories by row."""
    from harness_gym.analysis.sweep import load_rows, read_meta
    from harness_gym.analysis.sweep.spec import SweepError

    run = Path(run_dir)
    meta = read_meta(run)
    if meta.get("kind") == "multiagent":
        raise SweepError(
            f"{run} is a multi-agent sweep: it records no per-episode trajectories to view "
            "(its report has the numbers)"
        )
    frame = load_rows(run)
    rows = [{k: (None if v != v else v) for k, v in r.items()} for r in frame.to_dict("records")]
    factors = [f for f in meta.get("factors", []) if f"level_{f}" in frame.columns]
    levels = harness_levels(rows)
    trajectories = read_trajectories(run)
    near = neighbours(levels)
    pairs = partners(rows)
    records = []
    for row in rows:
        record = _row_record(row, factors)
        index = record["i"]
        record["recorded"] = index in trajectories
        record["partners"] = pairs.get(index, [])
        records.append(record)
    index = {
        "run": str(run.resolve().name),
        "sweep_id": meta.get("sweep_id"),
        "factors": factors,
        "harnesses": {
            name: {"levels": lv, "neighbours": {o: differing(lv, levels[o]) for o in near.get(name, [])}}
            for name, lv in levels.items()
        },
        "rows": records,
        "chunks": {},
    }
    return index, trajectories


def write_view(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write the viewer folder of a run (default ``RUN_DIR/view``); return its ``index.html``.

    The folder must be the viewer's (:mod:`harness_gym.analysis.view_folder`): a folder holding
    anything else is refused (:class:`~harness_gym.analysis.view_folder.ViewFolderError`)
    before anything is written, and only the viewer's own files are replaced."""
    run = Path(run_dir)
    out = Path(out_dir) if out_dir is not None else run / VIEW_DIR
    view_folder.check(out)  # refused before the run is read
    index, trajectories = view_data(run)  # nothing to view (a multi-agent sweep): nothing written
    view_folder.claim(out)
    written: list[str] = []

    def put(name: str, text: str | bytes) -> None:
        view_folder.write_file(out, name, text)
        written.append(name)

    for name in ASSET_FILES:
        put(f"assets/{name}", (ASSETS / name).read_bytes())
    order = sorted(trajectories)
    shots: set[str] = set()
    for k in range(0, len(order), CHUNK):
        chunk = {i: trajectories[i]["trajectory"] for i in order[k : k + CHUNK]}
        for i, trajectory in chunk.items():
            index["chunks"][i] = k // CHUNK
            shots.update(_screenshots(trajectory))
        put(f"data/t_{k // CHUNK:04d}.js", _script(f"window.HG.chunk({k // CHUNK}, ", chunk))
    # Screenshot paths in a trajectory are relative to the run folder (``screenshots/I/T.png``).
    index["base"] = os.path.relpath(run, out).replace(os.sep, "/") + "/"
    put("data/index.js", _script("window.HG.index(", index))
    page = (ASSETS / "index.html").read_text(encoding="utf-8")
    put("index.html", page.replace("{{title}}", html.escape(f"harness-gym view: {index['run']}")))
    view_folder.finish(out, written, shots)
    return out / "index.html"


def _screenshots(trajectory: Any) -> list[str]:
    steps = trajectory.get("steps", []) if isinstance(trajectory, dict) else []
    places = [trajectory, *steps] if isinstance(steps, list) else [trajectory]
    return [p["screenshot"] for p in places if isinstance(p, dict) and isinstance(p.get("screenshot"), str)]


def _script(call: str, value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    # "</" cannot end the script early: the data is a script file, but keep it safe to inline.
    return call + text.replace("</", "<\\/") + ");\n"
