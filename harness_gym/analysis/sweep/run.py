"""Running a sweep: :func:`run_sweep` (resume, backends, trajectories) and :func:`sweep`.

:func:`run_sweep` claims the folder, skips the cells already in it, runs the rest in this
process, on a local process pool or on Ray (language-model cells as episode streams), writes
each row as it finishes and the Parquet table at the end; :class:`SweepResult` says what it
did. :func:`sweep` builds the :class:`~harness_gym.analysis.sweep.spec.SweepSpec` too.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from harness_gym.analysis.sweep.cell import clear_caches, is_outage, run_cell, run_cells_batched
from harness_gym.analysis.sweep.executors import (
    BACKENDS,
    check_importable,
    check_main_guard,
    lm_batches,
    portable,
    run_local,
    run_ray,
)
from harness_gym.analysis.sweep.spec import SweepError, SweepSpec
from harness_gym.analysis.sweep.store import (
    ROWS_JSONL,
    ROWS_PARQUET,
    RowWriter,
    claim_folder,
    load_rows,
    read_finished,
    write_parquet,
)


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
