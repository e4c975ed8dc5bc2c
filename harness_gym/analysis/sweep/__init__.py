"""Sweeps: run every (task, harness, seed, agent) cell and keep one row per episode.

A :class:`SweepSpec` says *what* to run: agents, tasks, a list of harnesses (drawn from a
harness space: a design such as a balanced or covering subset with or without one-factor
flips, an enumeration, a sample, or the presets), seeds,
and whether to compute each cell's ceiling. Its :attr:`SweepSpec.id` is a hash of all that.
:func:`run_sweep` says *how*: in this process (``workers=0``), a local process pool, or Ray.

Output folder::

    DIR/sweep.json        the spec and its id (a folder holds the rows of one sweep only)
    DIR/episodes.jsonl    one row per finished cell, appended and flushed as each finishes
    DIR/episodes.parquet  the same rows in cell order, written from the JSON Lines at the end

Running the same sweep again skips the cells already in ``episodes.jsonl`` (an interrupted
sweep loses no finished row; a half-written last line is dropped and its cell re-run). A cell
whose agent raises records the error in the ``error`` column and the sweep goes on. A cell
whose worker process dies (killed, out of memory, a crash in native code) is re-run alone in
a fresh process; if it kills its worker again it is recorded with an ``error`` too.

Rows are deterministic: the same cell gives the same row on every backend and worker count,
except ``wall_time``.

This package hands the names on; the parts live in its modules (imports point down):
:mod:`~harness_gym.analysis.sweep.spec` (what to run: spec, harnesses, cells),
:mod:`~harness_gym.analysis.sweep.cell` (running cells into rows),
:mod:`~harness_gym.analysis.sweep.store` (the output folder and its tables),
:mod:`~harness_gym.analysis.sweep.executors` (process pool and Ray) and
:mod:`~harness_gym.analysis.sweep.run` (:func:`run_sweep`, :func:`sweep`).
"""

from __future__ import annotations

from harness_gym.analysis.sweep.cell import (
    WORKER_DIED,
    clear_caches,
    is_outage,
    run_cell,
    run_cells,
    run_cells_batched,
)
from harness_gym.analysis.sweep.executors import (
    BACKENDS,
    ISOLATED_ATTEMPTS,
    check_importable,
    check_main_guard,
    lm_batches,
    portable,
    run_local,
    run_ray,
)
from harness_gym.analysis.sweep.run import SweepResult, run_sweep, sweep
from harness_gym.analysis.sweep.spec import (
    ALL_LIMIT,
    SUBSET_FORMS,
    Cell,
    HarnessPoint,
    Selection,
    SweepError,
    SweepSpec,
    resolve_space,
    resolve_tasks,
    select_design,
    select_harnesses,
)
from harness_gym.analysis.sweep.store import (
    ROWS_JSONL,
    ROWS_PARQUET,
    SWEEP_FILE,
    RowWriter,
    claim_folder,
    load_rows,
    read_finished,
    read_meta,
    write_parquet,
)

__all__ = [
    "ALL_LIMIT",
    "BACKENDS",
    "ISOLATED_ATTEMPTS",
    "ROWS_JSONL",
    "ROWS_PARQUET",
    "SUBSET_FORMS",
    "SWEEP_FILE",
    "WORKER_DIED",
    "Cell",
    "HarnessPoint",
    "RowWriter",
    "Selection",
    "SweepError",
    "SweepResult",
    "SweepSpec",
    "check_importable",
    "check_main_guard",
    "claim_folder",
    "clear_caches",
    "is_outage",
    "lm_batches",
    "load_rows",
    "portable",
    "read_finished",
    "read_meta",
    "resolve_space",
    "resolve_tasks",
    "run_cell",
    "run_cells",
    "run_cells_batched",
    "run_local",
    "run_ray",
    "run_sweep",
    "select_design",
    "select_harnesses",
    "sweep",
    "write_parquet",
]
