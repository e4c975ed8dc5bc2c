"""A search's results folder: claiming it, the sweep record and the files written at the end.

The folder resumes like a sweep's (see :mod:`harness_gym.analysis.search`); :func:`claim`
makes it this search's or fails clearly, :func:`sweep_record` writes the evaluated harnesses
as a sweep (so ``harness-gym report`` reads a search folder), and :func:`write_results`
writes the tables, the best harness YAML, the rows' Parquet table and the final
``search.json``. :class:`SearchResult` says what was found and where.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_gym.analysis.search.racing import SearchState
from harness_gym.analysis.search.run import SEARCH_FILE, atomic_write, write_json
from harness_gym.analysis.search.spec import SearchError, SearchSpec
from harness_gym.core.harness import Harness

BEST_FILE = "best_harness.yaml"
TABLES = ("candidates.csv", "final.csv", "improvements.csv", "trajectory.csv")


@dataclass
class SearchResult:
    """What :func:`run_search` found and where it wrote it."""

    out_dir: Path
    spec: SearchSpec
    chosen: Harness
    dev_episodes: int
    test_episodes: int
    episodes_run: int
    episodes_resumed: int
    seconds: float
    tables: dict[str, Any] = field(default_factory=dict)

    @property
    def best_yaml(self) -> Path:
        return self.out_dir / BEST_FILE


def claim(out: Path, spec: SearchSpec, overwrite: bool) -> None:
    """Make ``out`` this search's folder, or fail clearly if it holds another search's rows."""
    import json

    from harness_gym.analysis.sweep.store import ROWS_JSONL, ROWS_PARQUET, SWEEP_FILE

    out.mkdir(parents=True, exist_ok=True)
    meta = out / SEARCH_FILE
    if overwrite:
        for name in (SEARCH_FILE, ROWS_JSONL, ROWS_PARQUET, SWEEP_FILE, BEST_FILE, *TABLES):
            (out / name).unlink(missing_ok=True)
    if meta.exists():
        try:
            theirs = json.loads(meta.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise SearchError(f"{meta} is not valid JSON; remove it or use another --out") from None
        if theirs.get("search_id") != spec.id:
            mine = spec.identity()
            old = theirs.get("spec", {})
            diff = [k for k in mine if old.get(k) != mine[k]]
            raise SearchError(
                f"{out} holds another search ({theirs.get('search_id')}); this is {spec.id}. They differ in "
                f"{', '.join(diff) or 'their spec'}. Use another --out, or --overwrite to discard its rows."
            )
        return
    if (out / SWEEP_FILE).exists() or ((out / ROWS_JSONL).exists() and (out / ROWS_JSONL).stat().st_size):
        raise SearchError(
            f"{out} holds a sweep's rows (no {SEARCH_FILE}); use another --out, or --overwrite "
            "to discard them"
        )
    write_json(meta, {"search_id": spec.id, "spec": spec.identity(), "status": "running"})
    # Until the search ends, the sweep record lists no harness: a report says it is unfinished.
    write_json(out / SWEEP_FILE, sweep_record(spec, [], 0))


def sweep_record(spec: SearchSpec, evaluated: Sequence[tuple[str, Harness]], n_rows: int) -> dict[str, Any]:
    """The folder's ``sweep.json``: the evaluated harnesses as a sweep, so the sweep report
    (and :func:`~harness_gym.analysis.sweep.store.load_rows`) read a search folder too."""
    return {
        "sweep_id": spec.id,
        "version": 1,
        "agents": [spec.agent.name],
        "tasks": list(spec.tasks),
        "harnesses": [[name, h.id] for name, h in evaluated],
        "factors": list(spec.space.factor_names),
        "seeds": list(dict.fromkeys([*spec.dev_seeds, *spec.test_seeds])),
        "ceiling": spec.ceiling,
        "node_limit": spec.node_limit,
        "space": spec.space.to_dict(),
        "subset": "search",
        "design": {
            "kind": "adaptive search",
            "construction": "successive halving on paired dev seeds, then one-factor local search",
            "n": len(evaluated),
        },
        "n_cells": n_rows,
        "harness_specs": [
            {"name": name, "id": h.id, "levels": spec.space.levels_of(h), "spec": h.to_dict()}
            for name, h in evaluated
        ],
    }


def write_results(state: SearchState, result: SearchResult) -> None:
    """Write the tables, the best harness YAML, the sweep record, the rows' Parquet table and
    the final search.json."""
    from harness_gym.analysis.sweep.store import ROWS_PARQUET, SWEEP_FILE, write_parquet

    out, spec = result.out_dir, result.spec
    for name, table in result.tables.items():
        table.to_csv(out / f"{name}.csv", index=False)
    atomic_write(out / BEST_FILE, f"# chosen by harness search {spec.id}\n" + result.chosen.to_yaml())
    run = {k[1] for k in state.ev.rows}
    evaluated = [(state.names[h.id], h) for h in state.harness.values() if h.id in run]
    write_json(out / SWEEP_FILE, sweep_record(spec, evaluated, len(state.ev.rows)))
    rows = sorted(state.ev.rows.values(), key=lambda r: int(r["index"]))
    write_parquet(rows, out / ROWS_PARQUET, spec.space.factor_names)  # cost columns included
    write_json(
        out / SEARCH_FILE,
        {
            "search_id": spec.id,
            "spec": spec.identity(),
            "status": "done",
            "chosen": state.names[result.chosen.id],
            "chosen_id": result.chosen.id,
            "chosen_levels": spec.space.levels_of(result.chosen),
            "default_id": spec.default.id,
            "dev_episodes": result.dev_episodes,
            "test_episodes": result.test_episodes,
            "exhaustive_dev_episodes": spec.exhaustive_cost(),
            "names": state.names,
        },
    )
