"""Running cells: one episode (and its ceiling) per cell, one row per episode, in any process.

:func:`run_cells` is the seam every executor calls: it takes a list of cells and returns
their rows in the same order. Rows are deterministic except ``wall_time``.
"""

from __future__ import annotations

import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness_gym.analysis.sweep.spec import Cell
from harness_gym.core.harness import Harness
from harness_gym.rows import schema as rows_schema

#: What rows of language-model agents add (None for other agents); the columns are defined
#: in :mod:`harness_gym.rows.schema`.
LLM_COLUMNS = tuple(c.name for c in rows_schema.LLM_COLUMNS)

#: How the ``error`` of a row whose episode lost model replies to the transport begins (server
#: down, wrong model name, timeouts, 429 / 5xx after retries): an outage, not the model's failure.
OUTAGE = "LLMBackendError"


def outage_error(record: dict[str, Any]) -> str | None:
    """The row error for an episode record (:meth:`LLMAgent.episode_record`) that lost replies."""
    failed = record.get("transport_failures") or 0
    if not failed:
        return None
    return (
        f"{OUTAGE}: {failed} of {record.get('llm_requests')} model requests got no reply "
        f"({record.get('first_error')})"
    )


def is_outage(row: dict[str, Any]) -> bool:
    """Whether a row's error is a model-server outage (retry it; never count it as a failure)."""
    return str(row.get("error") or "").startswith(OUTAGE)


_ENVS: OrderedDict[tuple[str, str], Any] = OrderedDict()
_CACHE: dict[str, dict[Any, Any]] = {"env": _ENVS, "agent": {}, "ceiling": {}}
_CACHE_LIMIT = 512
#: Envs a process keeps, least recently used out first. Cells come in task, harness, seed,
#: agent order, so a few suffice; an env holds what its family runs (a browser env a Chromium,
#: a terminal env a sandbox), so an evicted one is closed, never left to the collector, and the
#: agents built for it go with it.
ENV_LIMIT = 8


def _cached(kind: str, key: Any, make: Callable[[], Any]) -> Any:
    store = _CACHE[kind]
    if key not in store:
        if len(store) >= _CACHE_LIMIT:
            store.clear()
        store[key] = make()
    return store[key]


def _cached_env(key: tuple[str, str], make: Callable[[], Any]) -> Any:
    """The env of ``key`` = (task, harness id), made once and kept while recently used."""
    if key in _ENVS:
        _ENVS.move_to_end(key)
        return _ENVS[key]
    while len(_ENVS) >= ENV_LIMIT:
        _evict_env(*_ENVS.popitem(last=False))
    _ENVS[key] = env = make()
    return env


def _evict_env(key: tuple[str, str], env: Any) -> None:
    agents = _CACHE["agent"]
    for agent_key in [k for k in agents if tuple(k[1:]) == key]:
        del agents[agent_key]
    try:
        env.close()
    except Exception:  # noqa: BLE001 - a broken env is dropped all the same
        pass


#: The key under which a row carries its episode's recorded trajectory from the worker to the
#: writer, which stores it beside the rows (:mod:`harness_gym.rows.trajectories`) and drops it.
TRAJECTORY_KEY = "_trajectory"


def run_cells(
    cells: Sequence[Cell], sweep_id: str, ceiling: bool, node_limit: int, record: bool = False
) -> list[dict[str, Any]]:
    """Run cells one after another; each gives a row (with ``error`` set if it crashed)."""
    return [run_cell(c, sweep_id, ceiling, node_limit, record) for c in cells]


def _outcome(row: dict[str, Any], result: Any) -> None:
    """Put an episode's outcome (and its trajectory, when recorded) in its row."""
    from harness_gym.core.parse_status import failures

    row.update(
        episode_return=float(result.episode_return),
        success=bool(result.success),
        steps=int(result.steps),
        invalid_actions=int(result.invalid_actions),
        parse_failures=failures(result.parse_status),
        parse_status=dict(result.parse_status),
    )
    if result.trajectory is not None:
        row[TRAJECTORY_KEY] = result.trajectory


def run_cell(
    cell: Cell, sweep_id: str, ceiling: bool, node_limit: int, record: bool = False
) -> dict[str, Any]:
    """Run one cell and return its row. Exceptions in the agent become the row's ``error``.

    With ``record`` the row carries the episode's trajectory under :data:`TRAJECTORY_KEY`."""
    from harness_gym.core.registry import make_env
    from harness_gym.rollout import run_episode

    start = time.perf_counter()
    row = _row(cell, sweep_id)
    env_key = (cell.task_id, cell.harness_id)
    agent_key = (cell.agent.name, *env_key)
    try:
        env = _cached_env(env_key, lambda: make_env(cell.task_id, Harness.from_dict(cell.harness)))
        agent = _cached("agent", agent_key, lambda: cell.agent.build(env))
        result = run_episode(env, agent, cell.seed, cell.agent.name, record=record)
        _outcome(row, result)
    except Exception as err:  # noqa: BLE001 - the cell records the error and the sweep goes on
        _CACHE["agent"].pop(agent_key, None)
        row["error"] = _describe_error(err)
    if ceiling:
        add_ceiling(row, cell, node_limit)
    row["wall_time"] = time.perf_counter() - start
    return row


def add_ceiling(row: dict[str, Any], cell: Cell, node_limit: int) -> None:
    """Put the cell's seed ceiling in its row (an error in the search becomes the row's error)."""
    try:
        value, method = _cached(
            "ceiling",
            (cell.task_id, cell.harness_id, cell.seed, node_limit),
            lambda: _seed_ceiling(cell, node_limit),
        )
        row.update(ceiling=value, ceiling_method=method)
    except Exception as err:  # noqa: BLE001
        row["error"] = row["error"] or "ceiling: " + _describe_error(err)


def run_cells_batched(
    cells: Sequence[Cell],
    sweep_id: str,
    ceiling: bool,
    node_limit: int,
    write: Callable[[list[dict[str, Any]]], None],
    in_flight: int = 8,
    record: bool = False,
) -> None:
    """Run cells with many episodes in flight, batching their agents' requests (language
    models); ``write`` gets each row as its episode ends. Runs in this process.

    A row whose episode lost model replies to the transport (server down, timeouts, 429 /
    5xx after retries, malformed bodies) carries an ``error``, so the report leaves it out
    instead of counting the outage as the model's failure; ``--retry-errors`` re-runs it.
    """
    from harness_gym.core.registry import make_env
    from harness_gym.rollout import Episode, run_batched

    def on_result(episode: Episode, result: Any, err: BaseException | None) -> None:
        cell: Cell = episode.key
        row = _row(cell, sweep_id)
        if err is not None or result is None:
            row["error"] = _describe_error(err) if err is not None else "episode lost"
        else:
            _outcome(row, result)
            row["wall_time"] = float(result.wall_time)
            extra = dict(result.extra)
            row.update({k: v for k, v in extra.items() if k in LLM_COLUMNS})
            row["error"] = outage_error(extra)
        if ceiling:
            add_ceiling(row, cell, node_limit)
        write([row])

    episodes = [
        Episode(
            make_env=lambda c=c: make_env(c.task_id, Harness.from_dict(c.harness)),
            make_agent=lambda env, c=c: c.agent.build(env),
            seed=c.seed,
            agent_name=c.agent.name,
            key=c,
            record=record,
        )
        for c in cells
    ]
    run_batched(episodes, in_flight=in_flight, on_result=on_result)


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
        "parse_failures": None,
        "parse_status": None,
        "ceiling": None,
        "ceiling_method": None,
        "error": None,
        "wall_time": 0.0,
    }
    row.update({f"level_{k}": v for k, v in cell.levels.items()})
    row["harness"] = dict(cell.harness)
    row.update(dict.fromkeys(LLM_COLUMNS))
    return row


def lost_row(cell: Cell, sweep_id: str, why: str) -> dict[str, Any]:
    row = _row(cell, sweep_id)
    row["error"] = why
    return row


WORKER_DIED = (
    "WorkerDied: the worker process died while running this cell, every time it ran alone "
    "(killed, out of memory, a crash in native code, or it failed to start: its traceback is on stderr)"
)


def clear_caches() -> None:
    """Forget cached envs (closing them), agents and ceilings (an in-process run must not reuse
    another sweep's)."""
    while _ENVS:
        _evict_env(*_ENVS.popitem())
    for store in _CACHE.values():
        store.clear()
