"""An evaluation's recorded trajectories, stored as a run folder that ``view`` and ``export --run`` read.

``harness-gym eval --out FILE`` writes its rows to FILE; with ``--trajectories`` it also
writes the run folder :func:`run_folder` names beside it (``runs/eval.jsonl`` ->
``runs/eval/``), and ``harness-gym train`` writes its evaluation episodes' folder as
``OUT/eval/``. The folder has a sweep's layout, so the sweep readers need nothing new::

    DIR/sweep.json               kind "eval": agents, tasks, harnesses (named by preset when
                                 one preset is one harness), the factors (the harness fields
                                 whose values differ between the evaluated harnesses), seeds
    DIR/episodes.jsonl           the rows (index, level_* columns), as a sweep's
    DIR/trajectories.jsonl.gz    the kept trajectories (:mod:`harness_gym.rows.trajectories`)
    DIR/screenshots/             browser episodes' screenshots

The factors make the ``pairs`` policy (:mod:`harness_gym.analysis.pairs`) and the viewer's
pair view work for an evaluation that played one task under several harnesses: partners are
the same agent, task and seed under the harnesses the fewest fields apart. An evaluation of
one harness has no partners: ``pairs`` then keeps the first seed of each agent and env.
An evaluation is not resumable; its folder is rewritten each run, and a folder that holds
a sweep or a search is refused, never overwritten.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness_gym.analysis.sweep.spec import SweepError
from harness_gym.analysis.sweep.store import ROWS_JSONL, ROWS_PARQUET, SWEEP_FILE
from harness_gym.rows import trajectories as stored

KIND = "eval"
RUN_SUFFIX = ".run"


def run_folder(out_file: str | Path) -> Path:
    """The run folder beside an ``eval --out`` rows file: its name without the suffix
    (``runs/eval.jsonl`` -> ``runs/eval``), or ``NAME.run`` for a name without one."""
    path = Path(out_file)
    return path.with_suffix("") if path.suffix else path.with_name(path.name + RUN_SUFFIX)


def claim(folder: str | Path) -> Path:
    """Check, before any episode runs, that ``folder`` can be an evaluation's run folder: it is
    not a file and holds no sweep or search (whose rows would be lost)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise SweepError(f"{folder} is a file; the recorded trajectories need a folder there")
    meta = folder / SWEEP_FILE
    if meta.exists():
        try:
            kind = json.loads(meta.read_text(encoding="utf-8")).get("kind")
        except (UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            kind = None
        if kind != KIND:
            raise SweepError(
                f"{folder} holds a sweep or search ({SWEEP_FILE}); the evaluation's trajectories would "
                "overwrite its rows: give another --out"
            )
    elif (folder / ROWS_JSONL).exists():
        raise SweepError(f"{folder} holds rows ({ROWS_JSONL}) of another run: give another --out")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def harness_names(results: Sequence[Any]) -> dict[str, str]:
    """Harness id -> a short name: the env's preset (``Json``) when that preset is one
    harness here, else the harness id."""
    presets: dict[str, set[str]] = {}
    first: dict[str, str] = {}
    for r in results:
        env = str(getattr(r, "env_id", "") or "")
        preset = env.rsplit("/", 1)[-1].removesuffix("-v0").split("-", 1)[-1] if env else ""
        presets.setdefault(preset, set()).add(r.harness_id)
        first.setdefault(r.harness_id, preset)
    return {hid: (p if p and len(presets[p]) == 1 else hid) for hid, p in first.items()}


def _level(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def factors_of(specs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The harness fields whose values differ between the harnesses (sorted)."""
    keys = sorted({k for spec in specs.values() for k in spec})
    return [k for k in keys if len({_level(spec.get(k)) for spec in specs.values()}) > 1]


def write_run(folder: str | Path, results: Sequence[Any], policy: Any, label: str = "eval") -> int:
    """Write the evaluation's run folder (claimed with :func:`claim`) from ``results``
    (:class:`~harness_gym.rollout.EpisodeResult`, in row order, recorded when ``policy``
    records); return how many trajectories were kept."""
    from harness_gym.analysis.pairs import keep_for_pairs
    from harness_gym.core.parse_status import failures
    from harness_gym.rows.schema import column
    from harness_gym.rows.store import write_jsonl

    folder = Path(folder)
    policy = stored.TrajectoryPolicy.parse(policy)
    stored.remove(folder)
    for name in (ROWS_JSONL, ROWS_PARQUET):
        (folder / name).unlink(missing_ok=True)
    names = harness_names(results)
    specs = {r.harness_id: dict(r.harness) for r in results}
    factors = factors_of(specs)
    levels = {hid: {f: _level(spec.get(f)) for f in factors} for hid, spec in specs.items()}
    seeds = sorted({int(r.seed) for r in results})
    identity = {
        "agents": list(dict.fromkeys(r.agent for r in results)),
        "tasks": list(dict.fromkeys(r.task_id for r in results)),
        "harnesses": [[names[h], h] for h in specs],
        "factors": factors,
        "seeds": seeds,
    }
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    run_id = f"{KIND}-" + hashlib.sha256(blob.encode()).hexdigest()[:12]
    rows = []
    for index, r in enumerate(results):
        given = r.to_dict()
        given.update(given.pop("extra", None) or {})  # a language model's counts are row columns
        row = {"index": index, "sweep_id": run_id, "harness_name": names[r.harness_id]}
        row.update((k, v) for k, v in given.items() if column(k) is not None and k not in row)
        row["parse_failures"] = failures(r.parse_status)
        row.update({f"level_{f}": v for f, v in levels[r.harness_id].items()})
        rows.append(row)
    meta = {
        "sweep_id": run_id,
        "kind": KIND,
        "label": label,
        "version": 1,
        **identity,
        "ceiling": False,
        "subset": KIND,
        "n_cells": len(rows),
        "trajectories": str(policy),
        "harness_specs": [{"name": names[h], "id": h, "levels": levels[h], "spec": specs[h]} for h in specs],
    }
    (folder / SWEEP_FILE).write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
    write_jsonl(folder / ROWS_JSONL, rows)
    if not policy.records:
        return 0
    if policy.mode == "pairs":
        keep = keep_for_pairs(rows, seeds, policy.n)
    else:
        keep = {row["index"] for row in rows if policy.keeps(row, seeds)}
    writer = stored.TrajectoryWriter(folder)
    try:
        for row, r in zip(rows, results):
            if row["index"] in keep and r.trajectory is not None:
                writer.write(row, r.trajectory)
    finally:
        writer.close()
    return writer.written
