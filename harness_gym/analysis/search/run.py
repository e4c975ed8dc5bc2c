"""Running a search's episodes: sweep cells with cost columns, kept in a resumable folder.

The search asks for (harness, seeds) evaluations; :class:`Evaluator` runs only the cells it
has no row for (a row per (task, harness, seed), read back from ``episodes.jsonl`` on resume,
so a killed search resumes without running any episode twice) through the sweep's cell
runners (:func:`~harness_gym.analysis.sweep.cell.run_cell`, or
:func:`~harness_gym.analysis.sweep.cell.run_cells_batched` for language-model agents).

Cost columns: the agent is wrapped in a :class:`MeteredAgent` that counts the characters of
the observations it reads and the actions it writes; rows get ``obs_chars``,
``action_chars`` and ``actions`` (tokens come in the sweep's own ``prompt_tokens`` and
``completion_tokens`` columns when the agent reports them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_gym.analysis.agent_spec import AgentSpec
from harness_gym.analysis.search.spec import SearchError
from harness_gym.analysis.sweep.cell import (
    WORKER_DIED,
    clear_caches,
    is_outage,
    lost_row,
    run_cell,
    run_cells_batched,
)
from harness_gym.analysis.sweep.spec import Cell
from harness_gym.analysis.sweep.store import ROWS_JSONL, RowWriter, read_finished
from harness_gym.core.harness import Harness
from harness_gym.rows import Column, register_columns

register_columns(
    Column("obs_chars", "int", "characters of the observations the agent read (search rows)"),
    Column("action_chars", "int", "characters of the actions the agent wrote (search rows)"),
    Column("actions", "int", "actions the agent wrote (search rows)"),
)
COST_COLUMNS = ("obs_chars", "action_chars", "actions")
SEARCH_FILE = "search.json"

#: Per (task_id, harness_id, seed): [observation chars, action chars, actions] of the episode
#: the metered agent in this process played last.
_METER: dict[tuple[str, str, int], list[int]] = {}


class MeteredAgent:
    """An agent that counts what it reads and writes (the cost of a harness, in characters)."""

    streams = False  # never stream past the meter (``submit`` would reach the inner agent)

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)

    def reset(self, seed: int | None = None) -> None:
        self.inner.reset(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        action = self.inner.act(observation, info)
        _count(observation, action, info)
        return action

    def __getattr__(self, name: str) -> Any:  # episode_record, model handles, ...
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


class BatchedMeteredAgent(MeteredAgent):
    """The same for agents answered in batches (language models): ``act_batch`` is kept."""

    @staticmethod
    def act_batch(
        agents: Sequence[Any], observations: Sequence[str], infos: Sequence[dict[str, Any]]
    ) -> list[str]:
        inner = [a.inner for a in agents]
        actions = list(type(inner[0]).act_batch(inner, observations, infos))
        for observation, action, info in zip(observations, actions, infos):
            _count(observation, action, info)
        return actions

    @property
    def streams(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.inner, "streams", False))

    def submit(self, observation: str, info: dict[str, Any]) -> Any:
        self._asked = (observation, info)
        return self.inner.submit(observation, info)

    def receive(self, result: Any) -> str:
        action = self.inner.receive(result)
        _count(self._asked[0], action, self._asked[1])
        return action


def _count(observation: Any, action: Any, info: dict[str, Any]) -> None:
    key = (str(info.get("task_id")), str(info.get("harness_id")), int(info.get("seed", -1)))
    meter = _METER.setdefault(key, [0, 0, 0])
    if int(info.get("step", 0) or 0) == 0 and meter[2]:  # a new episode on the same key
        meter[:] = [0, 0, 0]
    meter[0] += len(observation) if isinstance(observation, str) else 0
    meter[1] += len(action) if isinstance(action, str) else 0
    meter[2] += 1


@dataclass(frozen=True)
class MeteredFactory:
    """``factory(env)``: the inner spec's agent wrapped in a :class:`MeteredAgent`."""

    inner: AgentSpec

    def __call__(self, env: Any) -> MeteredAgent:
        agent = self.inner.build(env)
        if callable(getattr(type(agent), "act_batch", None)):
            return BatchedMeteredAgent(agent)
        return MeteredAgent(agent)


def metered(spec: AgentSpec) -> AgentSpec:
    """The agent spec whose agents count their characters (same name, so rows read the same)."""
    return AgentSpec(spec.name, "callable", spec.name, obj=MeteredFactory(spec.portable()))


def add_costs(row: dict[str, Any], cell: Cell) -> dict[str, Any]:
    """Move the metered counts of a finished cell into its row."""
    counts = _METER.pop((cell.task_id, cell.harness_id, cell.seed), None)
    for name, value in zip(COST_COLUMNS, counts or (None, None, None)):
        row[name] = value
    return row


def run_metered(
    cells: Sequence[Cell], sweep_id: str, ceiling: bool, node_limit: int, record: bool = False
) -> list[dict[str, Any]]:
    """Run cells one after another in this process; rows carry the cost columns."""
    return [add_costs(run_cell(c, sweep_id, ceiling, node_limit, record), c) for c in cells]


class Evaluator:
    """Rows of a search folder by (task, harness id, seed); runs what is missing, once.

    ``spent`` counts dev episodes (rows whose seed is a dev seed), whether run now or read
    back on resume, so a resumed search makes the same decisions as an uninterrupted one.

    A row whose episode lost model replies (a server outage, :func:`is_outage`) would score
    the harness for the outage, so the search stops with a :class:`SearchError` when one is
    written, and a resume that finds one refuses unless ``retry_errors`` (which runs every
    error row again).
    """

    def __init__(
        self,
        out_dir: Path,
        search_id: str,
        agent: AgentSpec,
        dev_seeds: Sequence[int],
        ceiling: bool,
        node_limit: int,
        workers: int = 0,
        progress: bool = False,
        in_flight: int = 8,
        retry_errors: bool = False,
        trajectories: Any = None,
    ) -> None:
        from harness_gym.rows import trajectories as stored

        self.out_dir = out_dir
        self.policy = stored.TrajectoryPolicy.parse(trajectories)
        self.seeds = sorted(dev_seeds)
        if self.policy.records:
            stored.repair(out_dir)
        self.trajectories = stored.TrajectoryWriter(out_dir) if self.policy.records else None
        self.search_id = search_id
        self.inner = agent
        self.agent = metered(agent)
        self.dev = set(dev_seeds)
        self.ceiling = ceiling
        self.node_limit = node_limit
        self.workers = workers
        self.progress = progress
        self.in_flight = in_flight
        finished = read_finished(out_dir, search_id)
        self.rows: dict[tuple[str, str, int], dict[str, Any]] = {
            (r["task_id"], r["harness_id"], int(r["seed"])): finished[i] for i, r in sorted(finished.items())
        }
        self.next_index = max(finished, default=-1) + 1
        failed = {k: r for k, r in self.rows.items() if r.get("error") is not None}
        self.retried = 0
        if retry_errors:
            for key in failed:
                del self.rows[key]
            self.retried = len(failed)
        elif any(map(is_outage, failed.values())):
            first = next(r for r in failed.values() if is_outage(r))
            raise SearchError(
                f"{out_dir} holds {sum(map(is_outage, failed.values()))} episode(s) that lost model "
                f"replies ({first['error']}); they would count as failures: once the server is up, "
                "run again with --retry-errors"
            )
        self.resumed = len(self.rows)
        self.ran = 0
        self.spent = 0  # dev episodes the search has asked for so far (its budget clock)
        self._charged: set[tuple[str, str, int]] = set()
        self._pool: Any = None
        clear_caches()

    def missing(self, harnesses: Sequence[Harness], tasks: Sequence[str], seeds: Sequence[int]) -> int:
        """Dev episodes that evaluating these would charge (not yet charged to the budget)."""
        return sum(
            (t, h.id, s) not in self._charged and s in self.dev
            for h in harnesses
            for t in tasks
            for s in seeds
        )

    def evaluate(
        self,
        harnesses: Sequence[Harness],
        tasks: Sequence[str],
        seeds: Sequence[int],
        levels_of: Callable[[Harness], dict[str, str]],
        names: dict[str, str],
    ) -> None:
        """Make sure every (harness, task, seed) has a row; run the missing cells."""
        todo: list[Cell] = []
        for h in harnesses:
            spec = h.to_dict()
            for task in tasks:
                for seed in seeds:
                    key = (task, h.id, seed)
                    if seed in self.dev and key not in self._charged:
                        self._charged.add(key)
                        self.spent += 1
                    if key in self.rows:
                        continue
                    todo.append(
                        Cell(self.next_index, self.agent, task, names[h.id], h.id, spec, levels_of(h), seed)
                    )
                    self.next_index += 1
        if todo:
            self._run(todo)

    def _run(self, cells: list[Cell]) -> None:
        def keep_trajectory(row: dict[str, Any], trajectory: dict[str, Any]) -> None:
            if self.trajectories is not None and self.policy.keeps(row, self.seeds):
                self.trajectories.write(row, trajectory)

        desc = f"search {self.search_id}"
        writer = RowWriter(self.out_dir / ROWS_JSONL, len(cells), self.progress, desc, keep_trajectory)

        def keep(rows: list[dict[str, Any]]) -> None:
            writer.write(rows)
            for row in rows:
                self.rows[(row["task_id"], row["harness_id"], int(row["seed"]))] = row
            self.ran += len(rows)

        args = (self.search_id, self.ceiling, self.node_limit, self.policy.records)
        try:
            if self.inner.batched:
                by_key = {c.key: c for c in cells}
                run_cells_batched(
                    cells,
                    *args[:3],
                    lambda rows: keep([add_costs(r, by_key[_key(r)]) for r in rows]),
                    in_flight=self.in_flight,
                    record=args[3],
                )
            elif self.workers == 0:
                for cell in cells:
                    keep(run_metered([cell], *args))
            else:
                if self._pool is None:
                    self._pool = _new_pool(self.workers)
                try:
                    _run_pool(self._pool, cells, args, self.workers, keep)
                except BaseException:
                    self.close()
                    raise
        finally:
            writer.close()
        lost = [r for r in writer.rows if is_outage(r)]
        if lost:
            raise SearchError(
                f"search stopped: {len(lost)} of {len(writer.rows)} episode(s) lost model replies "
                f"({lost[0]['error']}); no harness is chosen from them. Once the server is up, run the "
                "same command with --retry-errors (the finished episodes are kept)"
            )

    def close(self) -> None:
        """Stop the worker processes (if any); the pool is kept between evaluations until then.
        Close the trajectories file and, under the ``pairs`` policy, keep only the pairs'."""
        if self.trajectories is not None:
            self.trajectories.close()
            self.trajectories = None
            if self.policy.mode == "pairs":
                from harness_gym.analysis.pairs import keep_for_pairs
                from harness_gym.rows.trajectories import prune

                prune(self.out_dir, keep_for_pairs(list(self.rows.values()), self.seeds, self.policy.n))
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def row(self, task: str, harness_id: str, seed: int) -> dict[str, Any]:
        return self.rows[(task, harness_id, seed)]


def _key(row: dict[str, Any]) -> tuple[str, str, str, int]:
    return (row["agent"], row["task_id"], row["harness_id"], int(row["seed"]))


def _run_pool(
    pool: Any,
    cells: list[Cell],
    args: tuple[Any, ...],
    workers: int,
    keep: Callable[[list[dict[str, Any]]], None],
) -> None:
    """Run cells in the process pool; a chunk whose worker dies is recorded with errors."""
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    size = max(1, min(32, len(cells) // (workers * 4) or 1))
    chunks = [cells[i : i + size] for i in range(0, len(cells), size)]
    futures = {pool.submit(run_metered, chunk, *args): chunk for chunk in chunks}
    for future in as_completed(futures):
        try:
            keep(future.result())
        except BrokenProcessPool:
            keep([add_costs(lost_row(c, args[0], WORKER_DIED), c) for c in futures[future]])


def _new_pool(workers: int) -> Any:
    """A process pool whose workers start with this module imported (forkserver when there is one)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["harness_gym.analysis.search.run"])
    else:
        ctx = mp.get_context("spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx)


def atomic_write(path: Path, text: str) -> None:
    """Write a file atomically (a kill leaves the old file or the new one, never half)."""
    import os

    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=1, default=str))
