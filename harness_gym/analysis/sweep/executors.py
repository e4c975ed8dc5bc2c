"""Executors: run batches of cells in a local process pool or on Ray, surviving dead workers.

Each executor sends batches to :func:`~harness_gym.analysis.sweep.cell.run_cells` and hands
the rows it gets back to ``write`` as they come. A batch whose worker process dies (killed,
out of memory, a crash in native code) is re-run one cell at a time in fresh processes; a cell
that kills its worker :data:`ISOLATED_ATTEMPTS` times is written as a row with an error.

Cells of language-model agents run in the sweep's own process with the local backend (one
process keeps many episode streams in flight). On Ray they are spread over the cluster too
(:func:`run_ray` with :func:`run_lm_cells`): each task runs a batch of cells with its own
episode streams, on whatever node Ray gives it, and reaches the agent's endpoints from there
(``127.0.0.1`` is the node's own server; a list of URLs or a router is shared).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_gym.analysis.agent_spec import AgentSpec
from harness_gym.analysis.sweep.cell import WORKER_DIED, lost_row, run_cells, run_cells_batched
from harness_gym.analysis.sweep.spec import Cell, SweepError

BACKENDS = ("local", "ray")
#: Times a cell is run alone after its worker died before it is recorded as an error.
ISOLATED_ATTEMPTS = 2
#: Where executors hand finished rows (the sweep's row writer).
RowSink = Callable[[list[dict[str, Any]]], None]


def run_lm_cells(
    cells: Sequence[Cell],
    sweep_id: str,
    ceiling: bool,
    node_limit: int,
    record: bool = False,
    in_flight: int = 8,
) -> list[dict[str, Any]]:
    """Run language-model cells with ``in_flight`` episode streams; return their rows (a Ray task)."""
    rows: list[dict[str, Any]] = []
    run_cells_batched(cells, sweep_id, ceiling, node_limit, rows.extend, in_flight=in_flight, record=record)
    return rows


def lm_batches(cells: Sequence[Cell], workers: int, in_flight: int) -> list[list[Cell]]:
    """Language-model cells in batches for Ray tasks: enough batches to keep every worker
    busy, each at least ``in_flight`` cells (its streams stay full) and at most four times
    that (a task's rows come back when it ends, so a resume loses little)."""
    import math

    size = min(4 * in_flight, max(in_flight, math.ceil(len(cells) / (4 * max(workers, 1)))))
    return [list(cells[i : i + size]) for i in range(0, len(cells), size)]


def portable(cell: Cell) -> Cell:
    agent = cell.agent.portable()
    if agent is cell.agent:
        return cell
    return Cell(
        cell.index,
        agent,
        cell.task_id,
        cell.harness_name,
        cell.harness_id,
        cell.harness,
        cell.levels,
        cell.seed,
    )


def check_importable(agents: Sequence[AgentSpec]) -> None:
    import pickle

    for agent in agents:
        if agent.obj is None:
            continue
        try:
            pickle.loads(pickle.dumps(agent.obj))
        except Exception as err:  # noqa: BLE001
            raise SweepError(
                f"agent {agent.name} cannot be sent to worker processes ({err}); define the factory at the "
                "top level of an importable module (or a .py file given as FILE.py:FACTORY), or run with "
                "workers=0"
            ) from None


def check_main_guard() -> None:
    """Stop a sweep that a script starts at its top level, outside ``if __name__ == "__main__":``.

    Worker processes (forkserver, spawn) import the main script again; one that starts the
    sweep at its top level would start it again in every worker, which Python stops at the
    worker's start, so every cell would be lost with a dead worker. Raises :class:`SweepError`
    naming the script line instead.
    """
    import ast
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec_name = getattr(getattr(main, "__spec__", None), "name", "") or ""
    if not path or spec_name == "__main__" or spec_name.endswith(".__main__"):
        return  # python -c, a REPL, python -m PACKAGE: workers do not run the main code again
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "<module>" and frame.f_globals is vars(main)):
        frame = frame.f_back
    if frame is None:  # not called from the main script's top level
        return
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return
    line = frame.f_lineno
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and _is_main_test(node.test)
            and node.lineno <= line <= (node.end_lineno or 0)
        ):
            return
    raise SweepError(
        f"{path}, line {line} starts a sweep at the script's top level, and every worker process imports "
        "the script again (so it would start the sweep again inside each worker): put the code that runs "
        'the sweep under `if __name__ == "__main__":`, or run with workers=0'
    )


def _is_main_test(test: Any) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    import ast

    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    values = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and values == ["__main__"]


def _mp_context() -> Any:
    """Forkserver (safe with threads, fast to start: the server has harness_gym imported)."""
    import multiprocessing as mp

    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["harness_gym.analysis.sweep.cell"])
        return ctx
    return mp.get_context("spawn")


@dataclass
class _Work:
    cells: list[Cell]
    isolated: bool = False
    attempt: int = 0
    lm: bool = False  # language-model cells (Ray: run with episode streams)


class _Slot:
    """One worker process (a one-worker pool), so a death is traced to the work it ran."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.pool: Any = None
        self.inflight: set[Any] = set()
        self.broken = False
        self.exclusive = False

    def can_take(self, work: _Work) -> bool:
        if self.broken:
            return False
        if work.isolated:
            return not self.inflight
        return not self.exclusive and len(self.inflight) < 2

    def submit(self, work: _Work, args: tuple[Any, ...]) -> Any:
        from concurrent.futures import ProcessPoolExecutor

        if self.pool is None:
            self.pool = ProcessPoolExecutor(max_workers=1, mp_context=self.ctx)
        future = self.pool.submit(run_cells, work.cells, *args)
        self.inflight.add(future)
        self.exclusive = work.isolated
        return future

    def settle(self, future: Any) -> None:
        self.inflight.discard(future)
        if not self.inflight:
            self.exclusive = False
            if self.broken:
                self.pool.shutdown(wait=False, cancel_futures=True)
                self.pool, self.broken = None, False

    def shutdown(self, wait: bool = False) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=wait, cancel_futures=True)
            self.pool = None


def run_local(
    batches: list[list[Cell]],
    args: tuple[Any, ...],
    workers: int,
    write: RowSink,
    note: Callable[[str], None],
) -> None:
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = _mp_context()
    slots = [_Slot(ctx) for _ in range(workers)]
    queue: deque[_Work] = deque(_Work(b) for b in batches)
    owner: dict[Any, tuple[_Slot, _Work]] = {}
    complete = False
    try:
        while queue or owner:
            for slot in slots:
                while queue and slot.can_take(queue[0]):
                    work = queue.popleft()
                    try:
                        owner[slot.submit(work, args)] = (slot, work)
                    except BrokenProcessPool:
                        # The worker died running earlier work whose failure is not collected
                        # yet: keep this work for a healthy slot; the slot resets when that
                        # earlier work settles.
                        slot.broken = True
                        queue.appendleft(work)
            done, _ = wait(list(owner), return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: owner[f][1].cells[0].index):
                slot, work = owner.pop(future)
                try:
                    rows = future.result()
                except BrokenProcessPool:
                    slot.broken = True
                    _requeue(work, queue, write, note, args[0])
                else:
                    write(rows)
                slot.settle(future)
        complete = True
    finally:
        for slot in slots:
            slot.shutdown(wait=complete)


def _requeue(
    work: _Work, queue: deque[_Work], write: RowSink, note: Callable[[str], None], sweep_id: str
) -> None:
    """Work lost with a dead worker: re-run its cells alone; record cells that keep killing it."""
    if not work.isolated:
        note(
            f"warning: a worker process died while running {len(work.cells)} cell(s) "
            f"(cells {work.cells[0].index}..{work.cells[-1].index}); finished rows are kept; "
            "re-running those cells one at a time in fresh processes"
        )
        queue.extendleft(_Work([c], isolated=True, lm=work.lm) for c in reversed(work.cells))
    elif work.attempt + 1 < ISOLATED_ATTEMPTS:
        queue.appendleft(_Work(work.cells, isolated=True, attempt=work.attempt + 1, lm=work.lm))
    else:
        cell = work.cells[0]
        note(
            f"warning: cell {cell.index} ({cell.agent.name}, {cell.task_id}, {cell.harness_name}, "
            f"seed {cell.seed}) killed its worker {ISOLATED_ATTEMPTS} times; recorded with an error"
        )
        write([lost_row(cell, sweep_id, WORKER_DIED)])


def run_ray(
    batches: list[list[Cell]],
    args: tuple[Any, ...],
    workers: int,
    write: RowSink,
    note: Callable[[str], None],
    address: str | None,
    lm: list[list[Cell]] | None = None,
    in_flight: int = 8,
) -> None:
    """Run every batch as a Ray task (one CPU each); rows go to ``write`` as tasks end.

    ``lm``: batches of language-model cells, each run with ``in_flight`` episode streams
    (:func:`run_lm_cells`), sent first (they mostly wait on servers)."""
    try:
        import ray
        from ray.exceptions import RayError
    except ImportError:
        raise SweepError("the ray backend needs Ray: pip install 'harness-gym[ray]'") from None
    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        started = True
    remote = ray.remote(num_cpus=1, max_retries=0)(run_cells)
    remote_lm = ray.remote(num_cpus=1, max_retries=0)(run_lm_cells)
    queue: deque[_Work] = deque(_Work(b, lm=True) for b in lm or [])
    queue.extend(_Work(b) for b in batches)
    owner: dict[Any, _Work] = {}
    limit = 4 * workers
    try:
        while queue or owner:
            while queue and len(owner) < limit:
                work = queue.popleft()
                if work.lm:
                    owner[remote_lm.remote(work.cells, *args, in_flight)] = work
                else:
                    owner[remote.remote(work.cells, *args)] = work
            ready, _ = ray.wait(list(owner), num_returns=1)
            for ref in ready:
                work = owner.pop(ref)
                try:
                    rows = ray.get(ref)
                except RayError:
                    _requeue(work, queue, write, note, args[0])
                else:
                    write(rows)
    finally:
        for ref in owner:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
        if started:
            ray.shutdown()
