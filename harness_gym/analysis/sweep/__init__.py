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

This module is the façade; the parts live below it (imports point down):
:mod:`~harness_gym.analysis.sweep.spec` (what to run: spec, harnesses, cells),
:mod:`~harness_gym.analysis.sweep.cell` (running cells into rows),
:mod:`~harness_gym.analysis.sweep.store` (the output folder and its tables) and
:mod:`~harness_gym.analysis.sweep.executors` (process pool and Ray).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

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
    "Selection",
    "WORKER_DIED",
    "Cell",
    "HarnessPoint",
    "SweepError",
    "SweepResult",
    "SweepSpec",
    "claim_folder",
    "load_rows",
    "read_finished",
    "read_meta",
    "resolve_space",
    "resolve_tasks",
    "run_cell",
    "run_cells",
    "run_sweep",
    "select_design",
    "select_harnesses",
    "sweep",
    "write_parquet",
]


@dataclass
class SweepResult:
    """What :func:`run_sweep` did."""

    out_dir: Path
    spec: SweepSpec
    n_cells: int
    n_skipped: int
    n_run: int
    n_errors: int
    seconds: float
    messages: list[str] = field(default_factory=list)

    @property
    def jsonl(self) -> Path:
        return self.out_dir / ROWS_JSONL

    @property
    def parquet(self) -> Path:
        return self.out_dir / ROWS_PARQUET

    def rows(self) -> Any:
        """The rows as a pandas DataFrame (cell order)."""
        return load_rows(self.out_dir)


def run_sweep(
    spec: SweepSpec,
    out_dir: str | Path,
    workers: int = 1,
    backend: str = "local",
    chunk_size: int | None = None,
    progress: bool = True,
    overwrite: bool = False,
    retry_errors: bool = False,
    ray_address: str | None = None,
    log: TextIO | None = None,
    in_flight: int = 8,
    trajectories: str | Any | None = None,
) -> SweepResult:
    """Run the cells of ``spec`` not yet in ``out_dir``; write rows as they finish.

    Cells of language-model agents run with ``in_flight`` episodes at a time, each a stream
    of requests (a server) or all asked together (one batched ``generate`` in process): in
    this process with the local backend, in Ray tasks with ``backend="ray"``; the other
    cells run on the executor.

    Args:
        workers: processes (``0``: run in this process, no pool; handy for debugging and for
            agents defined in a notebook or script).
        backend: ``"local"`` (a process pool) or ``"ray"`` (Ray tasks; joins a running Ray
            instance, ``ray_address``, or starts one with ``workers`` CPUs).
        chunk_size: cells per task sent to a worker (default: about 8 tasks per worker, at
            most 32 cells each).
        overwrite: delete the folder's sweep files first instead of resuming.
        retry_errors: also re-run the finished cells that recorded an error (after fixing an
            agent, say); their new rows replace the old ones.
        log: where warnings and notes go (default stderr).
        in_flight: episodes of a language-model agent kept running at once.
        trajectories: which episodes keep a recorded trajectory beside the rows
            (:class:`~harness_gym.rows.trajectories.TrajectoryPolicy`: ``none``, ``failures``,
            ``sample:N``, ``all``; default ``pairs``).

    Raises:
        SweepError: the folder holds another sweep's rows, or a bad backend/worker count.
    """
    log = log or sys.stderr
    if backend not in BACKENDS:
        raise SweepError(f"unknown backend {backend!r}; backends: {list(BACKENDS)}")
    if workers < 0 or (backend == "ray" and workers < 1):
        raise SweepError(f"workers must be >= 1 (or 0 for in-process with the local backend), got {workers}")
    from harness_gym.rows import trajectories as stored

    try:
        policy = stored.TrajectoryPolicy.parse(trajectories)
    except stored.TrajectoryError as err:
        raise SweepError(str(err)) from None
    out = Path(out_dir)
    claim_folder(out, spec, overwrite)
    if overwrite:
        stored.remove(out)
    if policy.records:
        stored.repair(out)  # a torn last trajectory: its row was not written, the cell re-runs
    start = time.perf_counter()
    finished = read_finished(out, spec.id)
    if retry_errors:
        finished = {i: r for i, r in finished.items() if r.get("error") is None}
    cells = spec.cells()
    todo = [c for c in cells if c.index not in finished]
    messages: list[str] = []
    bar: list[Any] = []

    def note(text: str) -> None:
        messages.append(text)
        if bar and bar[0] is not None:
            bar[0].write(text, file=log)  # above the progress bar, not through it
        else:
            log.write(text + "\n")
            log.flush()

    if finished:
        note(
            f"resuming {spec.id}: {len(finished):,} of {len(cells):,} cells already done, "
            f"{len(todo):,} to run"
        )
        failed = [r for r in finished.values() if r.get("error") is not None]
        if failed:
            outages = sum(map(is_outage, failed))
            note(
                f"{len(failed):,} of the done cells recorded an error ({outages:,} of them model-server "
                "outages) and are left out of every statistic; --retry-errors runs them again"
            )
    if todo and spec.agents and any(a.obj is not None for a in spec.agents) and workers > 0:
        check_importable(spec.agents)
    clear_caches()  # in-process runs must not reuse envs or agents of another sweep
    total = len(todo)
    batched = [c for c in todo if c.agent.batched]
    todo = [c for c in todo if not c.agent.batched]
    chunk = chunk_size or max(1, min(32, math.ceil(len(todo) / (max(workers, 1) * 8))))
    args = (spec.id, spec.ceiling, spec.node_limit, policy.records)
    traj_writer = stored.TrajectoryWriter(out) if policy.records else None

    def keep_trajectory(row: dict[str, Any], trajectory: dict[str, Any]) -> None:
        if traj_writer is not None and policy.keeps(row, spec.seeds):
            traj_writer.write(row, trajectory)

    if todo and workers > 0 and backend == "local":
        check_main_guard()  # before a row is written or a worker started
    writer = RowWriter(out / ROWS_JSONL, total, progress, f"sweep {spec.id}", keep_trajectory)
    bar.append(writer.bar)
    try:
        # Language-model cells: in this process with episode streams, or spread over Ray.
        lm = lm_batches([portable(c) for c in batched], workers, in_flight) if backend == "ray" else []
        if batched and not lm:
            run_cells_batched(batched, *args[:3], writer.write, in_flight=in_flight, record=args[3])
        shipped = [portable(c) for c in todo] if workers > 0 else []
        batches = [shipped[i : i + chunk] for i in range(0, len(shipped), chunk)]
        if lm or (batches and backend == "ray"):
            run_ray(batches, args, workers, writer.write, note, ray_address, lm=lm, in_flight=in_flight)
        elif batches:
            run_local(batches, args, workers, writer.write, note)
        elif workers == 0:
            for cell in todo:
                writer.write([run_cell(cell, *args)])
    except KeyboardInterrupt:
        writer.close()
        bar.clear()
        note(
            f"interrupted: {len(finished) + len(writer.rows):,} finished rows are kept in "
            f"{out / ROWS_JSONL}; run the same command again to resume"
        )
        raise
    finally:
        writer.close()
        if traj_writer is not None:
            traj_writer.close()
        bar.clear()
    all_rows = {**finished, **{int(r["index"]): r for r in writer.rows}}
    if policy.mode == "pairs":
        from harness_gym.analysis.pairs import keep_for_pairs

        stored.prune(out, keep_for_pairs(list(all_rows.values()), spec.seeds, policy.n))
    write_parquet([all_rows[i] for i in sorted(all_rows)], out / ROWS_PARQUET, spec.factors)
    errors = sum(r["error"] is not None for r in all_rows.values())
    if writer.errors:
        note(
            f"{writer.errors} cell(s) crashed; their rows carry the message in the 'error' column "
            "(the first: " + next(r["error"] for r in writer.rows if r["error"]) + ")"
        )
    return SweepResult(
        out, spec, len(cells), len(finished), len(writer.rows), errors, time.perf_counter() - start, messages
    )


def sweep(
    agents: Any,
    out_dir: str | Path,
    tasks: str | Sequence[str] = "all",
    space: Any = "default",
    subset: str | None = None,
    seeds: int | Sequence[int] = 5,
    ceiling: bool = True,
    workers: int = 1,
    backend: str = "local",
    progress: bool = True,
    **run_kwargs: Any,
) -> SweepResult:
    """Build a :class:`SweepSpec` and run it: the one-call form of ``harness-gym sweep``."""
    spec = SweepSpec.build(agents, tasks, space, subset, seeds, ceiling=ceiling)
    return run_sweep(spec, out_dir, workers=workers, backend=backend, progress=progress, **run_kwargs)
