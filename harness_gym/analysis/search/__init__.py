"""Harness search: find the harness an agent does best under, without fooling yourself.

:func:`run_search` races a pool of harnesses on *paired dev seeds* (every candidate plays the
same task instances) by successive halving, then climbs by one-factor changes of the
incumbent (local search), within a budget of dev episodes. The pool is the default harness,
its one-factor changes, a strength-2 covering design of the space and a few random points.

Honest by construction:

* dev and test seeds are disjoint and fixed before the search (:class:`SearchSpec`); the
  search never sees a test episode;
* the final table (``final.csv``) reports success on the **test seeds only** for the chosen
  harness, the default and the default's best one-factor changes (picked on dev), each with
  its paired difference to the default (Newcombe's 95% interval, an exact McNemar p);
* every incumbent change the search accepted on dev is replayed on the test seeds
  (``improvements.csv``): does the rule still accept it, and is the paired difference
  significant? Selection on noisy dev scores shows up as improvements that do not survive.
  "Significant" is decided after Holm's adjustment over every test the search reports, so a
  search of an agent that no harness helps calls something significant at most 5% of times;
* cost columns sit beside the score (mean steps, observation and action characters, tokens
  when the agent reports them), so a gain bought with longer episodes is visible;
* ceiling-aware: a harness whose ceiling is below the best seen on the same episodes (a
  dropped tool, a tight budget) is flagged, and its score is split into ceiling and mismatch.

Results folder (resumes like a sweep: the same command skips every episode already run)::

    DIR/search.json        the spec, the decisions (trajectory, improvements) and the choice
    DIR/episodes.jsonl     one row per episode (dev and test), appended as each finishes
    DIR/sweep.json         the evaluated harnesses as a sweep record, for ``harness-gym report``
    DIR/episodes.parquet   the same rows in cell order (cost columns included), written at the end
    DIR/best_harness.yaml  the chosen harness: gym.make(..., harness="DIR/best_harness.yaml")
    DIR/candidates.csv     every candidate on dev: rung reached, score, cost, ceiling flag
    DIR/final.csv          the test-seed table; DIR/improvements.csv the acceptance replay
    DIR/trajectory.csv     episodes spent against the incumbent's dev and test score
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from harness_gym.analysis.search.run import SEARCH_FILE, Evaluator, atomic_write, write_json
from harness_gym.analysis.search.spec import SearchError, SearchSpec, rung_seed_counts
from harness_gym.analysis.search.stats import ALPHA, Score, ceiling_flags, paired_difference, score
from harness_gym.analysis.stats import holm
from harness_gym.core.harness import Harness

__all__ = ["SearchError", "SearchResult", "SearchSpec", "run_search", "search"]

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


class _Search:
    """The search's state: names, the incumbent, the trajectory and accepted improvements."""

    def __init__(self, spec: SearchSpec, ev: Evaluator, log: TextIO | None) -> None:
        self.spec = spec
        self.ev = ev
        self.log = log
        self.names: dict[str, str] = {}
        self.harness: dict[str, Harness] = {}
        self.stage: dict[str, str] = {}
        self.depth: dict[str, int] = {}  # dev seeds each candidate was raced on
        self.incumbent: Harness | None = None
        self.trajectory: list[dict[str, Any]] = []
        self.improvements: list[dict[str, Any]] = []

    # -- bookkeeping -------------------------------------------------------------------------

    def add(self, harnesses: Sequence[Harness], stage: str) -> None:
        for h in harnesses:
            if h.id not in self.names:
                self.names[h.id] = "default" if h == self.spec.default else f"c{len(self.names):03d}"
                self.harness[h.id] = h
                self.stage[h.id] = stage

    def rows(self, h: Harness, seeds: Sequence[int]) -> dict[tuple[str, int], dict[str, Any]]:
        return {(t, s): self.ev.row(t, h.id, s) for t in self.spec.tasks for s in seeds}

    def score(self, h: Harness, seeds: Sequence[int]) -> Score:
        return score(list(self.rows(h, seeds).values()))

    def evaluate(self, harnesses: Sequence[Harness], seeds: Sequence[int]) -> None:
        self.ev.evaluate(harnesses, self.spec.tasks, seeds, self.spec.space.levels_of, self.names)

    def note(self, text: str) -> None:
        if self.log is not None:
            self.log.write(text + "\n")
            self.log.flush()

    # -- racing ------------------------------------------------------------------------------

    def race(self, pool: list[Harness], budget: int, stage: str) -> Harness:
        """Successive halving on dev-seed prefixes; returns the winner of the last rung."""
        dev = self.spec.dev_seeds
        counts = rung_seed_counts(len(dev), len(pool), len(self.spec.tasks), budget, self.spec.eta)
        alive = list(pool)
        start = self.ev.spent
        for rung, k in enumerate(counts):
            seeds = dev[:k]
            if self.ev.spent - start + self.ev.missing(alive, self.spec.tasks, seeds) > budget:
                break
            self.evaluate(alive, seeds)
            for h in alive:
                self.depth[h.id] = max(self.depth.get(h.id, 0), k)
            ranked = sorted(alive, key=lambda h: self.score(h, seeds).key(), reverse=True)
            self.consider(ranked[0], seeds, stage, rung)
            if len(alive) == 1 or rung == len(counts) - 1:
                alive = ranked[:1]
                break
            alive = ranked[: max(1, math.ceil(len(alive) / self.spec.eta))]
        return alive[0]

    def consider(self, best: Harness, seeds: Sequence[int], stage: str, rung: int) -> None:
        """The acceptance rule: ``best`` replaces the incumbent if it scores higher (success,
        then fewer steps, then fewer characters) on the dev seeds both have played."""
        inc = self.incumbent
        if inc is None:
            self.incumbent = best
        elif best != inc:
            shared = [s for s in seeds if all((t, inc.id, s) in self.ev.rows for t in self.spec.tasks)]
            if not shared:
                self.evaluate([inc], seeds)
                shared = list(seeds)
            new, old = self.score(best, shared), self.score(inc, shared)
            if new.key() > old.key():
                diff = paired_difference(self.rows(best, shared), self.rows(inc, shared))
                self.improvements.append(
                    {
                        "step": len(self.improvements) + 1,
                        "stage": stage,
                        "from": self.names[inc.id],
                        "to": self.names[best.id],
                        "from_id": inc.id,
                        "to_id": best.id,
                        "dev_seeds": len(shared),
                        "dev_success_from": old.success,
                        "dev_success_to": new.success,
                        "dev_difference": diff.mean,
                        "dev_steps_from": old.steps,
                        "dev_steps_to": new.steps,
                        "decided_by": _decided_by(new.key(), old.key()),
                        "episodes_spent": self.ev.spent,
                    }
                )
                self.incumbent = best
        cur = self.incumbent
        assert cur is not None
        s = self.score(cur, seeds if cur == best else self._deepest(cur))
        self.trajectory.append(
            {
                "episodes_spent": self.ev.spent,
                "stage": stage,
                "rung": rung,
                "dev_seeds": len(seeds),
                "incumbent": self.names[cur.id],
                "incumbent_id": cur.id,
                "dev_success": s.success,
                "dev_steps": s.steps,
            }
        )
        self.note(
            f"  {stage} rung {rung}: {len(seeds)} dev seed(s), {self.ev.spent:,} episodes spent; "
            f"incumbent {self.names[cur.id]} (dev success {s.success:.2f}, steps {s.steps:.1f})"
        )

    def _deepest(self, h: Harness) -> tuple[int, ...]:
        return self.spec.dev_seeds[: max(1, self.depth.get(h.id, 1))]

    # -- the two stages ---------------------------------------------------------------------

    def run(self) -> Harness:
        spec = self.spec
        pool = spec.initial_pool()
        self.add(pool, "racing")
        self.incumbent = spec.default  # every accepted improvement starts from the default
        first = (
            spec.budget
            if not spec.local
            else max(len(pool) * len(spec.tasks), int(spec.budget * (1 - spec.local_share)))
        )
        self.note(
            f"racing {len(pool)} harnesses on up to {len(spec.dev_seeds)} dev seeds ({first:,} episodes)"
        )
        self.race(pool, first, "racing")
        if spec.local:
            tried = {h.id for h in pool}
            while True:
                assert self.incumbent is not None
                left = spec.budget - self.ev.spent
                nbrs = [h for h in spec.neighbours(self.incumbent) if h.id not in tried]
                fit = left // len(spec.tasks)
                if not nbrs or fit < 1:
                    break
                nbrs = nbrs[:fit]
                tried |= {h.id for h in nbrs}
                self.add(nbrs, "local")
                before = self.incumbent
                self.note(f"local search: {len(nbrs)} one-factor change(s) of {self.names[before.id]}")
                # The incumbent is raced with its changes; its own episodes are already paid.
                self.race([before, *nbrs], left, "local")
                if self.incumbent == before:
                    break
        assert self.incumbent is not None
        return self.incumbent


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
    state = _Search(spec, ev, log)
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
    _write(state, result)
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


# -- the folder ------------------------------------------------------------------------------


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


# -- the honest part: test seeds -------------------------------------------------------------


def finish(state: _Search, chosen: Harness) -> dict[str, Any]:
    """Evaluate the chosen, default, best one-factor changes and every accepted incumbent on the
    test seeds; build the tables (pandas DataFrames)."""
    import pandas as pd

    spec, ev = state.spec, state.ev
    changes = _best_changes(state)
    shown = list(dict.fromkeys([chosen, spec.default, *changes]))
    traj_ids = [t["incumbent_id"] for t in state.trajectory]
    replay = [
        state.harness[i] for i in dict.fromkeys([*traj_ids, *[x["from_id"] for x in state.improvements]])
    ]
    to_test = list(dict.fromkeys([*shown, *replay]))
    state.note(f"test: {len(to_test)} harness(es) on {len(spec.test_seeds)} test seed(s)")
    state.evaluate(to_test, spec.test_seeds)
    test = {h.id: state.rows(h, spec.test_seeds) for h in to_test}
    flags = ceiling_flags(test)
    base = test[spec.default.id]

    final = []
    for h in shown:
        role = "chosen" if h == chosen else "default" if h == spec.default else "one-factor change"
        if h == chosen and h == spec.default:
            role = "chosen (= default)"
        s = score(list(test[h.id].values()))
        d = paired_difference(test[h.id], base)
        low, gap = flags[h.id]
        final.append(
            {
                "role": role,
                "harness": state.names[h.id],
                "harness_id": h.id,
                "change": _change(spec, h),
                **_score_columns(s),
                "vs_default": d.mean,
                "vs_default_low": d.low,
                "vs_default_high": d.high,
                "vs_default_wins": d.wins,
                "vs_default_losses": d.losses,
                "vs_default_p": d.p_value,
                "ceiling_limited": low,
                "ceiling_gap": gap,
            }
        )
    improvements = []
    for imp in state.improvements:
        new, old = test[imp["to_id"]], test[imp["from_id"]]
        d = paired_difference(new, old)
        s_new, s_old = score(list(new.values())), score(list(old.values()))
        improvements.append(
            {
                **{k: v for k, v in imp.items() if not k.endswith("_id")},
                "test_success_from": s_old.success,
                "test_success_to": s_new.success,
                "test_difference": d.mean,
                "test_low": d.low,
                "test_high": d.high,
                "test_wins": d.wins,
                "test_losses": d.losses,
                "test_p": d.p_value,
                "accepted_on_test": s_new.key() > s_old.key(),
            }
        )
    _holm_family(final, improvements, [h.id for h in shown], spec.default.id)
    trajectory = []
    for t in state.trajectory:
        s = score(list(test[t["incumbent_id"]].values()))
        trajectory.append({**t, "test_success": s.success, "test_steps": s.steps})
    dev_rows = {
        h: {(t, s): r for (t, hid, s), r in ev.rows.items() if hid == h and s in ev.dev} for h in state.names
    }
    dev_flags = ceiling_flags(dev_rows)
    candidates = []
    for hid, name in state.names.items():
        depth = state.depth.get(hid, 0)
        if not depth:
            continue
        h = state.harness[hid]
        s = state.score(h, spec.dev_seeds[:depth])
        candidates.append(
            {
                "harness": name,
                "harness_id": hid,
                "stage": state.stage[hid],
                "dev_seeds": depth,
                **_score_columns(s),
                "ceiling_limited": dev_flags[hid][0],
                "chosen": h == chosen,
                **spec.space.levels_of(h),
            }
        )
    return {
        "final": pd.DataFrame.from_records(final),
        "improvements": pd.DataFrame.from_records(improvements, columns=_IMPROVEMENT_COLUMNS),
        "trajectory": pd.DataFrame.from_records(trajectory),
        "candidates": pd.DataFrame.from_records(candidates).sort_values(
            ["dev_seeds", "success", "steps"], ascending=[False, False, True], kind="stable"
        ),
    }


_IMPROVEMENT_COLUMNS = [
    "step",
    "stage",
    "from",
    "to",
    "dev_seeds",
    "dev_success_from",
    "dev_success_to",
    "dev_difference",
    "dev_steps_from",
    "dev_steps_to",
    "decided_by",
    "episodes_spent",
    "test_success_from",
    "test_success_to",
    "test_difference",
    "test_low",
    "test_high",
    "test_wins",
    "test_losses",
    "test_p",
    "test_p_holm",
    "accepted_on_test",
    "significant_on_test",
]


def _holm_family(
    final: list[dict[str, Any]], improvements: list[dict[str, Any]], shown: Sequence[str], default_id: str
) -> None:
    """One search, one family: every paired test it reports on the test seeds (each shown
    harness against the default, each accepted improvement replayed) is Holm-adjusted together,
    so the chance that a search calls anything significant when nothing differs stays <= 5%."""
    tests = [r for r, hid in zip(final, shown) if hid != default_id]
    adjusted = holm([r["vs_default_p"] for r in tests] + [r["test_p"] for r in improvements])
    for r in final:
        r["vs_default_p_holm"] = 1.0
    for r, p in zip(tests, adjusted):
        r["vs_default_p_holm"] = p
    for r in final:
        r["significant"] = bool(r["vs_default_p_holm"] < ALPHA)
    for r, p in zip(improvements, adjusted[len(tests) :]):
        r["test_p_holm"] = p
        r["significant_on_test"] = bool(p < ALPHA and r["test_difference"] > 0)


def _decided_by(new: tuple[float, ...], old: tuple[float, ...]) -> str:
    """Which part of the key made the rule accept: success, steps or characters."""
    for name, a, b in zip(("success", "fewer steps", "fewer characters"), new, old):
        if a != b:
            return name
    return "tie"


def _score_columns(s: Score) -> dict[str, Any]:
    return {
        "n": s.n,
        "errors": s.errors,
        "success": s.success,
        "success_low": s.success_low,
        "success_high": s.success_high,
        "ceiling": s.ceiling,
        "mismatch": s.mismatch,
        "steps": s.steps,
        "obs_chars": s.obs_chars,
        "action_chars": s.action_chars,
        "tokens": s.tokens,
    }


def _best_changes(state: _Search) -> list[Harness]:
    """The default's one-factor changes ranked on dev (deepest rung first, then score)."""
    spec = state.spec
    raced = [h for h in spec.neighbours(spec.default) if state.depth.get(h.id)]
    ranked = sorted(
        raced,
        key=lambda h: (state.depth[h.id], state.score(h, spec.dev_seeds[: state.depth[h.id]]).key()),
        reverse=True,
    )
    return ranked[: spec.top_changes]


def _change(spec: SearchSpec, h: Harness) -> str:
    """How ``h`` differs from the default, as ``factor=level`` pairs."""
    mine, theirs = spec.space.levels_of(h), spec.space.levels_of(spec.default)
    diff = [f"{f}={mine[f]}" for f in spec.space.factor_names if mine[f] != theirs[f]]
    return ", ".join(diff) if diff else "(default)"


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


def _write(state: _Search, result: SearchResult) -> None:
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
