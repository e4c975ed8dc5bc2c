"""Sweeps: run every (task, harness, seed, agent) cell and keep one row per episode.

A :class:`SweepSpec` says *what* to run: agents, tasks, a list of harnesses (drawn from a
harness space: a balanced covering subset, an enumeration, a sample, or the presets), seeds,
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
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from harness_gym.analysis.agent_spec import AgentSpec, parse_agent
from harness_gym.core.harness import Harness
from harness_gym.progress import progress_bar

SWEEP_FILE = "sweep.json"
ROWS_JSONL = "episodes.jsonl"
ROWS_PARQUET = "episodes.parquet"
#: ``--subset all`` refuses spaces with more points than this (override with ``max_harnesses``).
ALL_LIMIT = 5_000
SUBSET_FORMS = "balanced, balanced:N (first N points of the strength-2 covering array), all, sample:N"
BACKENDS = ("local", "ray")
#: Times a cell is run alone after its worker died before it is recorded as an error.
ISOLATED_ATTEMPTS = 2
_VERSION = 1


class SweepError(ValueError):
    """Bad sweep input (task, space, subset, seeds) or an output folder of another sweep."""


# -- what to run -----------------------------------------------------------------------------


@dataclass(frozen=True)
class HarnessPoint:
    """One harness of a sweep: a short name, the harness, and the level of every factor."""

    name: str
    harness: Harness
    levels: Mapping[str, str]


@dataclass(frozen=True)
class Cell:
    """One episode to run: everything a worker needs, nothing it must look up."""

    index: int
    agent: AgentSpec
    task_id: str
    harness_name: str
    harness_id: str
    harness: Mapping[str, Any]
    levels: Mapping[str, str]
    seed: int

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.agent.name, self.task_id, self.harness_id, self.seed)


@dataclass(frozen=True)
class SweepSpec:
    """What a sweep runs. Build it with :meth:`build`; its cells with :meth:`cells`."""

    agents: tuple[AgentSpec, ...]
    tasks: tuple[str, ...]
    harnesses: tuple[HarnessPoint, ...]
    factors: tuple[str, ...]
    seeds: tuple[int, ...]
    ceiling: bool = True
    node_limit: int = 2_000
    space: Any = "default"
    subset: str = "balanced"

    @classmethod
    def build(
        cls,
        agents: str | Callable[..., Any] | Sequence[str | Callable[..., Any]],
        tasks: str | Sequence[str] = "all",
        space: Any = "default",
        subset: str | None = None,
        seeds: int | Sequence[int] = 5,
        first_seed: int = 0,
        ceiling: bool = True,
        node_limit: int = 2_000,
        max_harnesses: int = ALL_LIMIT,
    ) -> SweepSpec:
        """Resolve and validate every input; errors name the bad value and the valid ones.

        Args:
            agents: agent spec(s): see :mod:`harness_gym.analysis.agent_spec`.
            tasks: task ids, or ``"all"``.
            space: ``"default"`` (:data:`~harness_gym.core.space.DEFAULT_SPACE`), ``"presets"``,
                a YAML path, or a :class:`~harness_gym.core.space.HarnessSpace`.
            subset: ``balanced``, ``balanced:N``, ``all`` or ``sample:N`` (the presets take
                ``all`` only); default ``balanced`` (``all`` for the presets).
            seeds: a number of seeds (``first_seed``, ``first_seed + 1``, ...) or a list.
            ceiling: also compute each cell's ceiling (``ceiling`` column, for mismatch).
        """
        if isinstance(agents, str) or callable(agents):
            agents = [agents]  # type: ignore[list-item]
        parsed = tuple(parse_agent(a) for a in agents)  # type: ignore[union-attr]
        if not parsed:
            raise SweepError("a sweep needs at least one agent")
        names = [a.name for a in parsed]
        if len(set(names)) != len(names):
            raise SweepError(f"an agent appears twice: {names}")
        task_ids = resolve_tasks(tasks)
        points, factors, space_desc, subset = select_harnesses(space, subset, max_harnesses)
        if isinstance(seeds, int):
            if seeds < 1:
                raise SweepError(f"seeds must be at least 1, got {seeds}")
            seed_list = tuple(range(first_seed, first_seed + seeds))
        else:
            seed_list = tuple(int(s) for s in seeds)
            if not seed_list or len(set(seed_list)) != len(seed_list):
                raise SweepError(f"seeds must be a non-empty list of distinct integers, got {list(seeds)}")
        return cls(
            parsed, task_ids, tuple(points), factors, seed_list, ceiling, node_limit, space_desc, subset
        )

    @property
    def n_cells(self) -> int:
        return len(self.agents) * len(self.tasks) * len(self.harnesses) * len(self.seeds)

    def identity(self) -> dict[str, Any]:
        """What the id hashes: everything that determines the rows."""
        return {
            "version": _VERSION,
            "agents": [a.name for a in self.agents],
            "tasks": list(self.tasks),
            "harnesses": [[p.name, p.harness.id] for p in self.harnesses],
            "factors": list(self.factors),
            "seeds": list(self.seeds),
            "ceiling": self.ceiling,
            "node_limit": self.node_limit,
        }

    @property
    def id(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return "sw-" + hashlib.sha256(blob.encode()).hexdigest()[:12]

    def to_dict(self) -> dict[str, Any]:
        """The spec as stored in ``sweep.json``."""
        return {
            "sweep_id": self.id,
            **self.identity(),
            "space": self.space,
            "subset": self.subset,
            "n_cells": self.n_cells,
            "harness_specs": [
                {"name": p.name, "id": p.harness.id, "levels": dict(p.levels), "spec": p.harness.to_dict()}
                for p in self.harnesses
            ],
        }

    def cells(self) -> list[Cell]:
        """Every cell, in a fixed order: task, harness, seed, agent (index = position)."""
        out: list[Cell] = []
        for task in self.tasks:
            for point in self.harnesses:
                spec = point.harness.to_dict()
                for seed in self.seeds:
                    for agent in self.agents:
                        out.append(
                            Cell(
                                len(out), agent, task, point.name, point.harness.id, spec, point.levels, seed
                            )
                        )
        return out

    def describe(self) -> str:
        return (
            f"sweep {self.id}: agents {[a.name for a in self.agents]}, {len(self.tasks)} task(s), "
            f"{len(self.harnesses)} harness(es) ({self.subset} of {_space_label(self.space)}), "
            f"{len(self.seeds)} seed(s): {self.n_cells:,} cells"
        )


def _space_label(space: Any) -> str:
    return space if isinstance(space, str) else f"a {len(space.get('factors', {}))}-factor space"


def resolve_tasks(tasks: str | Sequence[str]) -> tuple[str, ...]:
    """Task ids (``"all"`` for every registered task); unknown ids are a clear error."""
    from harness_gym.core.registry import TASKS

    if isinstance(tasks, str):
        tasks = [tasks]
    names: list[str] = []
    for item in tasks:
        names.extend(t for t in str(item).split(",") if t)
    if not names:
        raise SweepError("no tasks given; pass task ids or 'all'")
    if "all" in names:
        return tuple(sorted(TASKS))
    unknown = [t for t in names if t not in TASKS]
    if unknown:
        raise SweepError(f"unknown task(s) {unknown}; registered tasks: {sorted(TASKS)} (or 'all')")
    return tuple(dict.fromkeys(names))


def resolve_space(space: Any) -> Any:
    """``"default"``, ``"presets"``, a YAML path or a HarnessSpace -> a HarnessSpace or ``"presets"``."""
    from harness_gym.core.space import DEFAULT_SPACE, HarnessSpace

    if isinstance(space, HarnessSpace):
        return space
    if space in (None, "default"):
        return DEFAULT_SPACE
    if space == "presets":
        return "presets"
    path = Path(space)
    if not path.is_file():
        raise SweepError(
            f"--space takes 'default', 'presets' or a YAML file; {str(space)!r} is neither (file not found)"
        )
    return HarnessSpace.from_yaml(path)


def select_harnesses(
    space: Any, subset: str | None = None, max_harnesses: int = ALL_LIMIT
) -> tuple[list[HarnessPoint], tuple[str, ...], Any, str]:
    """The harnesses a subset of a space names: (points, factor names, space record, subset)."""
    from harness_gym.core.presets import PRESETS
    from harness_gym.core.space import CoverageError, level_name

    resolved = resolve_space(space)
    if resolved == "presets":
        subset = subset or "all"
        if subset != "all":
            raise SweepError(f"--space presets is a fixed list of {len(PRESETS)} harnesses; use --subset all")
        harnesses = list(PRESETS.values())
        factors = tuple(
            f for f in Harness.factor_names() if len({level_name(getattr(h, f)) for h in harnesses}) > 1
        )
        points = [
            HarnessPoint(name, h, {f: level_name(getattr(h, f)) for f in factors})
            for name, h in PRESETS.items()
        ]
        return points, factors, "presets", subset
    subset = subset or "balanced"
    kind, _, arg = subset.partition(":")
    n: int | None = None
    if arg:
        try:
            n = int(arg)
        except ValueError:
            n = None
        if n is None or n < 1:
            raise SweepError(f"bad --subset {subset!r}: N must be a positive integer; forms: {SUBSET_FORMS}")
    if kind == "balanced":
        try:
            harnesses = resolved.balanced(2) if len(resolved.factors) >= 2 else list(resolved)
        except CoverageError as err:
            raise SweepError(str(err)) from None
        if n is not None:
            if n > len(harnesses):
                raise SweepError(
                    f"--subset {subset} asks for {n} points but the strength-2 covering array of this "
                    f"space has {len(harnesses)}; use --subset balanced or sample:{n}"
                )
            harnesses = harnesses[:n]
    elif kind == "all" and n is None:
        if resolved.size > max_harnesses:
            raise SweepError(
                f"--subset all would run {resolved.size:,} harnesses (limit {max_harnesses:,}); "
                "use balanced, balanced:N or sample:N, or raise --max-harnesses"
            )
        harnesses = list(resolved)
    elif kind == "sample" and n is not None:
        if n > resolved.size:
            raise SweepError(f"--subset {subset}: the space has only {resolved.size} points")
        harnesses = _unique_sample(resolved, n)
    else:
        raise SweepError(f"unknown --subset {subset!r}; forms: {SUBSET_FORMS}")
    width = max(2, len(str(len(harnesses) - 1)))
    points = [HarnessPoint(f"h{i:0{width}d}", h, resolved.levels_of(h)) for i, h in enumerate(harnesses)]
    return points, resolved.factor_names, resolved.to_dict(), subset


def _unique_sample(space: Any, n: int) -> list[Harness]:
    """The first ``n`` distinct points drawn with harness seed 0."""
    draws = 2 * n
    while True:
        unique = list(dict.fromkeys(space.sample(0, draws)))
        if len(unique) >= n or draws > 64 * n:
            return unique[:n]
        draws *= 2


# -- running one cell (in any process) ---------------------------------------------------------

_CACHE: dict[str, dict[Any, Any]] = {"env": {}, "agent": {}, "ceiling": {}}
_CACHE_LIMIT = 512


def _cached(kind: str, key: Any, make: Callable[[], Any]) -> Any:
    store = _CACHE[kind]
    if key not in store:
        if len(store) >= _CACHE_LIMIT:
            store.clear()
        store[key] = make()
    return store[key]


def run_cells(cells: Sequence[Cell], sweep_id: str, ceiling: bool, node_limit: int) -> list[dict[str, Any]]:
    """Run cells one after another; each gives a row (with ``error`` set if it crashed)."""
    return [run_cell(c, sweep_id, ceiling, node_limit) for c in cells]


def run_cell(cell: Cell, sweep_id: str, ceiling: bool, node_limit: int) -> dict[str, Any]:
    """Run one cell and return its row. Exceptions in the agent become the row's ``error``."""
    from harness_gym.analysis.rollout import run_episode
    from harness_gym.core.registry import make_env

    start = time.perf_counter()
    row = _row(cell, sweep_id)
    env_key = (cell.task_id, cell.harness_id)
    agent_key = (cell.agent.name, *env_key)
    try:
        env = _cached("env", env_key, lambda: make_env(cell.task_id, Harness.from_dict(cell.harness)))
        agent = _cached("agent", agent_key, lambda: cell.agent.build(env))
        result = run_episode(env, agent, cell.seed, cell.agent.name)
        row.update(
            episode_return=float(result.episode_return),
            success=bool(result.success),
            steps=int(result.steps),
            invalid_actions=int(result.invalid_actions),
        )
    except Exception as err:  # noqa: BLE001 - the cell records the error and the sweep goes on
        _CACHE["agent"].pop(agent_key, None)
        row["error"] = _describe_error(err)
    if ceiling:
        try:
            value, method = _cached(
                "ceiling", (*env_key, cell.seed, node_limit), lambda: _seed_ceiling(cell, node_limit)
            )
            row.update(ceiling=value, ceiling_method=method)
        except Exception as err:  # noqa: BLE001
            row["error"] = row["error"] or "ceiling: " + _describe_error(err)
    row["wall_time"] = time.perf_counter() - start
    return row


def _seed_ceiling(cell: Cell, node_limit: int) -> tuple[float, str]:
    from harness_gym.analysis.ceiling import seed_ceiling

    value, method = seed_ceiling(cell.task_id, Harness.from_dict(cell.harness), cell.seed, node_limit)
    return float(value), method


def _describe_error(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    text = f"{type(err).__name__}: {err}"
    return (text[:500] + "...") if len(text) > 500 else text + where


def _row(cell: Cell, sweep_id: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "index": cell.index,
        "sweep_id": sweep_id,
        "agent": cell.agent.name,
        "task_id": cell.task_id,
        "harness_name": cell.harness_name,
        "harness_id": cell.harness_id,
        "seed": cell.seed,
        "episode_return": None,
        "success": None,
        "steps": None,
        "invalid_actions": None,
        "ceiling": None,
        "ceiling_method": None,
        "error": None,
        "wall_time": 0.0,
    }
    row.update({f"level_{k}": v for k, v in cell.levels.items()})
    row["harness"] = dict(cell.harness)
    return row


def _lost_row(cell: Cell, sweep_id: str, why: str) -> dict[str, Any]:
    row = _row(cell, sweep_id)
    row["error"] = why
    return row


WORKER_DIED = (
    "WorkerDied: the worker process died while running this cell, every time it ran alone "
    "(killed, out of memory, or a crash in native code)"
)


# -- the output folder -------------------------------------------------------------------------


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


class _RowWriter:
    """Append rows to the JSON Lines file, flushed one by one, and tick the progress bar."""

    def __init__(self, path: Path, total: int, show: bool, desc: str) -> None:
        self.fh = path.open("a")
        self.rows: list[dict[str, Any]] = []
        self.errors = 0
        self.bar = progress_bar(total, desc, unit="cell", enabled=show and total > 0, smoothing=0.1)

    def write(self, rows: Iterable[dict[str, Any]]) -> None:
        n = 0
        for row in rows:
            self.fh.write(json.dumps(row, separators=(",", ":")) + "\n")
            self.rows.append(row)
            self.errors += row["error"] is not None
            n += 1
        self.fh.flush()
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


# -- running a sweep ---------------------------------------------------------------------------


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
) -> SweepResult:
    """Run the cells of ``spec`` not yet in ``out_dir``; write rows as they finish.

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

    Raises:
        SweepError: the folder holds another sweep's rows, or a bad backend/worker count.
    """
    log = log or sys.stderr
    if backend not in BACKENDS:
        raise SweepError(f"unknown backend {backend!r}; backends: {list(BACKENDS)}")
    if workers < 0 or (backend == "ray" and workers < 1):
        raise SweepError(f"workers must be >= 1 (or 0 for in-process with the local backend), got {workers}")
    out = Path(out_dir)
    claim_folder(out, spec, overwrite)
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
    if todo and spec.agents and any(a.obj is not None for a in spec.agents) and workers > 0:
        _check_importable(spec.agents)
    for store in _CACHE.values():  # in-process runs must not reuse envs or agents of another sweep
        store.clear()
    chunk = chunk_size or max(1, min(32, math.ceil(len(todo) / (max(workers, 1) * 8))))
    args = (spec.id, spec.ceiling, spec.node_limit)
    writer = _RowWriter(out / ROWS_JSONL, len(todo), progress, f"sweep {spec.id}")
    bar.append(writer.bar)
    try:
        if not todo:
            pass
        elif workers == 0:
            for cell in todo:
                writer.write([run_cell(cell, *args)])
        else:
            shipped = [_portable(c) for c in todo]
            batches = [shipped[i : i + chunk] for i in range(0, len(shipped), chunk)]
            if backend == "local":
                _run_local(batches, args, workers, writer, note)
            else:
                _run_ray(batches, args, workers, writer, note, ray_address)
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
        bar.clear()
    all_rows = {**finished, **{int(r["index"]): r for r in writer.rows}}
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


def _portable(cell: Cell) -> Cell:
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


def _check_importable(agents: Sequence[AgentSpec]) -> None:
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


def _mp_context() -> Any:
    """Forkserver (safe with threads, fast to start: the server has harness_gym imported)."""
    import multiprocessing as mp

    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["harness_gym.analysis.sweep"])
        return ctx
    return mp.get_context("spawn")


@dataclass
class _Work:
    cells: list[Cell]
    isolated: bool = False
    attempt: int = 0


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


def _run_local(
    batches: list[list[Cell]],
    args: tuple[Any, ...],
    workers: int,
    writer: _RowWriter,
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
                    _requeue(work, queue, writer, note, args[0])
                else:
                    writer.write(rows)
                slot.settle(future)
        complete = True
    finally:
        for slot in slots:
            slot.shutdown(wait=complete)


def _requeue(
    work: _Work, queue: deque[_Work], writer: _RowWriter, note: Callable[[str], None], sweep_id: str
) -> None:
    """Work lost with a dead worker: re-run its cells alone; record cells that keep killing it."""
    if not work.isolated:
        note(
            f"warning: a worker process died while running {len(work.cells)} cell(s) "
            f"(cells {work.cells[0].index}..{work.cells[-1].index}); finished rows are kept; "
            "re-running those cells one at a time in fresh processes"
        )
        queue.extendleft(_Work([c], isolated=True) for c in reversed(work.cells))
    elif work.attempt + 1 < ISOLATED_ATTEMPTS:
        queue.appendleft(_Work(work.cells, isolated=True, attempt=work.attempt + 1))
    else:
        cell = work.cells[0]
        note(
            f"warning: cell {cell.index} ({cell.agent.name}, {cell.task_id}, {cell.harness_name}, "
            f"seed {cell.seed}) killed its worker {ISOLATED_ATTEMPTS} times; recorded with an error"
        )
        writer.write([_lost_row(cell, sweep_id, WORKER_DIED)])


def _run_ray(
    batches: list[list[Cell]],
    args: tuple[Any, ...],
    workers: int,
    writer: _RowWriter,
    note: Callable[[str], None],
    address: str | None,
) -> None:
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
    queue: deque[_Work] = deque(_Work(b) for b in batches)
    owner: dict[Any, _Work] = {}
    limit = 4 * workers
    try:
        while queue or owner:
            while queue and len(owner) < limit:
                work = queue.popleft()
                owner[remote.remote(work.cells, *args)] = work
            ready, _ = ray.wait(list(owner), num_returns=1)
            for ref in ready:
                work = owner.pop(ref)
                try:
                    rows = ray.get(ref)
                except RayError:
                    _requeue(work, queue, writer, note, args[0])
                else:
                    writer.write(rows)
    finally:
        for ref in owner:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
        if started:
            ray.shutdown()


# -- tables ------------------------------------------------------------------------------------


def _schema(factors: Sequence[str]) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("index", pa.int64()),
            ("sweep_id", pa.string()),
            ("agent", pa.string()),
            ("task_id", pa.string()),
            ("harness_name", pa.string()),
            ("harness_id", pa.string()),
            ("seed", pa.int64()),
            ("episode_return", pa.float64()),
            ("success", pa.bool_()),
            ("steps", pa.int64()),
            ("invalid_actions", pa.int64()),
            ("ceiling", pa.float64()),
            ("ceiling_method", pa.string()),
            ("error", pa.string()),
            ("wall_time", pa.float64()),
            *[(f"level_{f}", pa.string()) for f in factors],
            ("harness", pa.string()),  # the full spec as JSON
        ]
    )


def _flat(row: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(row)
    out["harness"] = json.dumps(row["harness"], sort_keys=True)
    return out


def write_parquet(rows: Sequence[Mapping[str, Any]], path: Path, factors: Sequence[str]) -> None:
    """Write rows (cell order) as Parquet, atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist([_flat(r) for r in rows], schema=_schema(factors))
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def read_meta(out_dir: str | Path) -> dict[str, Any]:
    """The ``sweep.json`` of a sweep folder."""
    path = Path(out_dir) / SWEEP_FILE
    if not path.exists():
        raise SweepError(f"{out_dir} is not a sweep folder (no {SWEEP_FILE}); run `harness-gym sweep` first")
    return json.loads(path.read_text())


def load_rows(out_dir: str | Path) -> Any:
    """A sweep folder's rows as a pandas DataFrame in cell order (``harness`` as JSON text).

    Reads the Parquet file when it is up to date, else the JSON Lines (a running or
    interrupted sweep).
    """
    import pyarrow as pa

    out = Path(out_dir)
    meta = read_meta(out)
    parquet, jsonl = out / ROWS_PARQUET, out / ROWS_JSONL
    if parquet.exists() and (not jsonl.exists() or parquet.stat().st_mtime >= jsonl.stat().st_mtime):
        import pyarrow.parquet as pq

        return pq.read_table(parquet).to_pandas()
    rows: dict[int, dict[str, Any]] = {}
    if jsonl.exists():
        with jsonl.open() as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                rows[int(row["index"])] = row
    table = pa.Table.from_pylist(
        [_flat(rows[i]) for i in sorted(rows)], schema=_schema(meta.get("factors", []))
    )
    return table.to_pandas()


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
