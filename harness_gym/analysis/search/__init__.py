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

This package hands the names on; the parts live in its modules (imports point down):
:mod:`~harness_gym.analysis.search.spec` (what a search runs),
:mod:`~harness_gym.analysis.search.stats` (scoring rows),
:mod:`~harness_gym.analysis.search.run` (running episodes into a resumable folder),
:mod:`~harness_gym.analysis.search.racing` (the dev stage: racing and local search),
:mod:`~harness_gym.analysis.search.final` (the test-seed tables),
:mod:`~harness_gym.analysis.search.folder` (the results folder) and
:mod:`~harness_gym.analysis.search.driver` (:func:`run_search`, :func:`search`);
:mod:`~harness_gym.analysis.search.report` is the report's section.
"""

from __future__ import annotations

from harness_gym.analysis.search.driver import run_search, search
from harness_gym.analysis.search.final import finish
from harness_gym.analysis.search.folder import BEST_FILE, TABLES, SearchResult, claim, sweep_record
from harness_gym.analysis.search.racing import SearchState
from harness_gym.analysis.search.run import SEARCH_FILE, Evaluator, atomic_write, write_json
from harness_gym.analysis.search.spec import SearchError, SearchSpec, rung_seed_counts
from harness_gym.analysis.search.stats import ALPHA, Score, ceiling_flags, paired_difference, score

__all__ = [
    "ALPHA",
    "BEST_FILE",
    "SEARCH_FILE",
    "TABLES",
    "Evaluator",
    "Score",
    "SearchError",
    "SearchResult",
    "SearchSpec",
    "SearchState",
    "atomic_write",
    "ceiling_flags",
    "claim",
    "finish",
    "paired_difference",
    "rung_seed_counts",
    "run_search",
    "score",
    "search",
    "sweep_record",
    "write_json",
]
