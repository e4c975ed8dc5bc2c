"""Search's significance calls and intervals, measured on agents whose truth is known.

Every agent here is a null (no harness is better in expectation) or has a known per-harness
success rate, so the search's "significant" rows are false by construction for nulls, and
each printed interval's truth is known. Run many searches (``-m slow``) to measure:
false-significance rate per search <= 5% (Holm over the search's tests), coverage of the
printed 95% intervals >= 90%.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from harness_gym.analysis.search import search
from harness_gym.core.env import unwrap_harness_env
from harness_gym.core.harness import Harness
from harness_gym.core.space import HarnessSpace

pytest.importorskip("pandas")

TASKS = ["ClickButton", "EnterText", "LoginUser"]
#: Nonsense ends the episode at once (invalid_action=end), so a lost coin costs one step.
SPACE = HarnessSpace(
    {
        "obs_format": ["json", "markdown", "yaml"],
        "field_order": ["canonical", "reversed"],
        "tool_style": ["json", "xml", "python", "command"],
        "parser": ["strict", "lenient"],
    },
    base=Harness(invalid_action="end"),
)

Wins = Callable[[dict[str, Any], str, int], bool]


def _uniform(*parts: Any) -> float:
    digest = hashlib.sha256(json.dumps(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _cell_coin(salt: int, p: Callable[[dict[str, Any]], float] = lambda h: 0.5) -> Wins:
    """An independent coin per (harness, task, seed) with success probability ``p(harness)``."""
    return lambda h, task, seed: _uniform(salt, Harness.from_dict(h).id, task, seed) < p(h)


def _instance_coin(salt: int) -> Wins:
    """One coin per (task, seed), shared by every harness: harnesses never disagree."""
    return lambda h, task, seed: _uniform(salt, task, seed) < 0.5


def _sparse(salt: int, rate: float = 1 / 60) -> Wins:
    """The instance's coin, flipped for one harness in ``1 / rate`` cells: harnesses disagree
    on about 1 pair in 30, no harness more often than another."""
    return lambda h, task, seed: (
        (_uniform(salt, task, seed) < 0.5)
        != (_uniform(salt, "flip", Harness.from_dict(h).id, task, seed) < rate)
    )


def _agent(wins: Wins) -> Callable[[gym.Env], Any]:
    class Scripted:
        def __init__(self, env: gym.Env) -> None:
            self.env = unwrap_harness_env(env, "test agent")

        def reset(self, seed: int | None = None) -> None:
            pass

        def act(self, observation: str, info: dict[str, Any]) -> str:
            if wins(info["harness"], info["task_id"], info["seed"]):
                return self.env.oracle_action()
            return "no such tool ()"

    return Scripted


def _run(tmp: Path, wins: Wins, salt: int, tasks: list[str], test_seeds: int) -> Any:
    return search(
        _agent(wins),
        tmp / f"s{salt}",
        tasks=tasks,
        space=SPACE,
        budget=300,
        dev_seeds=6,
        test_seeds=test_seeds,
        random_seed=salt,
        ceiling=False,
        log=None,
    )


def _false_calls(result: Any) -> bool:
    """Did this search call anything significant on the test seeds?"""
    final, imp = result.tables["final"], result.tables["improvements"]
    return bool(final["significant"].any() or (len(imp) and imp["significant_on_test"].any()))


def _intervals(result: Any, truth: Callable[[str], float]) -> list[tuple[float, float, float]]:
    """(truth, low, high) of every printed test-seed interval; ``truth`` maps a change to a rate."""
    final, imp = result.tables["final"], result.tables["improvements"]
    base = truth("(default)")
    out = [
        (truth(c) - base, lo, hi)
        for c, lo, hi in zip(final.change, final.vs_default_low, final.vs_default_high)
    ]
    names = dict(zip(final.harness, final.change))
    for a, b, lo, hi in zip(imp["from"], imp["to"], imp.test_low, imp.test_high):
        if a in names and b in names:
            out.append((truth(names[b]) - truth(names[a]), lo, hi))
    return out


NULLS = {"cell coin": _cell_coin, "instance coin": _instance_coin, "sparse": _sparse}


@pytest.mark.parametrize("kind", sorted(NULLS))
def test_null_searches_call_nothing_significant_fast(tmp_path: Path, kind: str) -> None:
    for salt in range(2):
        result = _run(tmp_path, NULLS[kind](salt), salt, TASKS[:2], 30)
        assert not _false_calls(result), result.tables["final"].to_string()
        final = result.tables["final"]
        assert (final["vs_default_low"] <= 0).all() and (final["vs_default_high"] >= 0).all()
        assert (final["vs_default_high"] - final["vs_default_low"] > 0).all()  # never [0, 0]


def test_a_real_gain_survives_holm(tmp_path: Path) -> None:
    rate = lambda h: 0.9 if h["tool_style"] == "xml" else 0.3  # noqa: E731
    result = _run(tmp_path, _cell_coin(7, rate), 7, TASKS[:2], 30)
    chosen = result.tables["final"].set_index("role").loc["chosen"]
    assert "tool_style=xml" in chosen["change"] and chosen["significant"]
    assert chosen["vs_default_p_holm"] < 0.05 and chosen["vs_default_wins"] > chosen["vs_default_losses"]


def _xml_truth(change: str) -> float:
    return 0.8 if "tool_style=xml" in change else 0.5


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(NULLS))
def test_null_search_false_significance_rate_slow(tmp_path: Path, kind: str) -> None:
    """Over 60 searches per null, at most 5% call anything significant (3 of 60)."""
    calls = covered = total = 0
    for salt in range(60):
        result = _run(tmp_path, NULLS[kind](salt), salt, TASKS, 20)
        calls += _false_calls(result)
        for t, lo, hi in _intervals(result, lambda c: 0.5):
            covered += lo - 1e-9 <= t <= hi + 1e-9
            total += 1
    assert calls <= 3, f"{calls}/60 searches of a null agent called something significant"
    assert covered / total >= 0.90, (covered, total)


@pytest.mark.slow
@pytest.mark.parametrize("test_seeds", [4, 20])
def test_search_intervals_cover_known_gains_slow(tmp_path: Path, test_seeds: int) -> None:
    """A per-cell coin with success 0.8 under XML tools, 0.5 otherwise: the printed intervals
    cover the true differences at >= 90%, down to 4 test seeds (one task: 4 pairs)."""
    covered = total = 0
    rate = lambda h: _xml_truth(f"tool_style={h['tool_style']}")  # noqa: E731
    for salt in range(40):
        result = _run(tmp_path, _cell_coin(salt, rate), salt, TASKS[:1], test_seeds)
        for t, lo, hi in _intervals(result, _xml_truth):
            covered += lo - 1e-9 <= t <= hi + 1e-9
            total += 1
    assert covered / total >= 0.90, (covered, total)
