"""Running a search end to end: :func:`run_search` and its one-call form :func:`search`.

:func:`run_search` claims the folder, runs the dev stage
(:class:`~harness_gym.analysis.search.racing.SearchState`), plays the test seeds
(:func:`~harness_gym.analysis.search.final.finish`) and writes the results
(:func:`~harness_gym.analysis.search.folder.write_results`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from harness_gym.analysis.search.final import finish
from harness_gym.analysis.search.folder import SearchResult, claim, write_results
from harness_gym.analysis.search.racing import SearchState
from harness_gym.analysis.search.run import Evaluator
from harness_gym.analysis.search.spec import SearchError, SearchSpec


def run_search(
    spec: SearchSpec,
    out_dir: str | Path,
    workers: int = 0,
    progress: bool = False,
    overwrite: bool = False,
    log: TextIO | None = None,
    in_flight: int = 8,
    retry_errors: bool = False,
    trajectories: Any = None,
) -> SearchResult:
    """Run (or resume) a search into ``out_dir`` and write its tables and best harness.

    ``retry_errors`` runs the episodes that recorded an error again (after a server outage).
    ``trajectories``: which episodes keep a recorded trajectory beside the rows
    (:class:`~harness_gym.rows.trajectories.TrajectoryPolicy`; default ``pairs``).

    Raises:
        SearchError: ``out_dir`` holds another search (or a sweep); a bad worker count; an
            episode lost model replies (now, or in the rows a resume finds without
            ``retry_errors``): no harness is chosen from an outage.
    """
    if workers < 0:
        raise SearchError(f"workers must be >= 0 (0: in this process), got {workers}")
    log = log if log is not None else sys.stderr
    out = Path(out_dir)
    claim(out, spec, overwrite)
    start = time.perf_counter()
    ev = Evaluator(
        out,
        spec.id,
        spec.agent,
        spec.dev_seeds,
        spec.ceiling,
        spec.node_limit,
        workers,
        progress,
        in_flight,
        retry_errors,
        trajectories,
    )
    if ev.resumed:
        log.write(f"resuming {spec.id}: {ev.resumed:,} episodes already run are reused\n")
    if ev.retried:
        log.write(f"--retry-errors: {ev.retried:,} episodes that recorded an error run again\n")
    crashed = sum(r.get("error") is not None for r in ev.rows.values())
    if crashed:
        log.write(
            f"{crashed:,} reused episodes recorded an error and count as failures; "
            "--retry-errors runs them again\n"
        )
    state = SearchState(spec, ev, log)
    try:
        chosen = state.run()
        dev_spent = ev.spent
        tables = finish(state, chosen)
    finally:
        ev.close()
    test_episodes = sum(1 for r in ev.rows.values() if int(r["seed"]) in set(spec.test_seeds))
    result = SearchResult(
        out, spec, chosen, dev_spent, test_episodes, ev.ran, ev.resumed, time.perf_counter() - start, tables
    )
    write_results(state, result)
    return result


def search(
    agent: Any,
    out_dir: str | Path,
    tasks: str | Sequence[str] = "all",
    space: Any = "default",
    budget: int = 2_000,
    **kwargs: Any,
) -> SearchResult:
    """Build a :class:`SearchSpec` and run it: the one-call form of ``harness-gym search``."""
    run_keys = {"workers", "progress", "overwrite", "log", "in_flight", "retry_errors"}
    run_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in run_keys}
    spec = SearchSpec.build(agent, tasks, space, budget, **kwargs)
    return run_search(spec, out_dir, **run_kwargs)
