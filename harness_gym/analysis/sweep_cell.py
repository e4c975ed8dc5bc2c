"""Running cells: one episode (and its ceiling) per cell, one row per episode, in any process.

:func:`run_cells` is the seam every executor calls: it takes a list of cells and returns
their rows in the same order. Rows are deterministic except ``wall_time``.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness_gym.analysis.sweep_spec import Cell
from harness_gym.core.harness import Harness

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


def lost_row(cell: Cell, sweep_id: str, why: str) -> dict[str, Any]:
    row = _row(cell, sweep_id)
    row["error"] = why
    return row


WORKER_DIED = (
    "WorkerDied: the worker process died while running this cell, every time it ran alone "
    "(killed, out of memory, or a crash in native code)"
)


def clear_caches() -> None:
    """Forget cached envs, agents and ceilings (an in-process run must not reuse another sweep's)."""
    for store in _CACHE.values():
        store.clear()
