"""Worst / best harness tables on agents whose truth is known: identical harnesses are ties."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness_gym.analysis.extremes import pretty, simultaneous_z, spread_test, worst_harness
from harness_gym.analysis.stats import Z95


def grid(success, tasks: int = 2, harnesses: int = 12, seeds: int = 10, agent: str = "a") -> pd.DataFrame:  # noqa: ANN001
    """Rows of a complete task x harness x seed grid; ``success(t, h, s)`` gives each cell."""
    rows = []
    for t in range(tasks):
        for h in range(harnesses):
            for s in range(seeds):
                ok = bool(success(t, h, s))
                rows.append(
                    {
                        "agent": agent,
                        "task_id": f"T{t}",
                        "harness_name": f"h{h:02d}",
                        "harness_id": f"id{h:02d}",
                        "seed": s,
                        "success": ok,
                        "episode_return": float(ok),
                        "error": None,
                    }
                )
    return pd.DataFrame(rows)


def _null_cell(rng: np.random.Generator, p: float = 0.5):  # noqa: ANN202
    table = rng.random((8, 64, 64)) < p
    return lambda t, h, s: table[t, h, s]


def _null_instance(rng: np.random.Generator):  # noqa: ANN202
    table = rng.random((8, 64)) < 0.5
    return lambda t, h, s: table[t, s]


def _sparse(rng: np.random.Generator):  # noqa: ANN202
    base, flip = rng.random((8, 64)) < 0.5, rng.random((8, 64, 64)) < 1 / 60
    return lambda t, h, s: base[t, s] != flip[t, h, s]


def test_a_null_agents_identical_harnesses_are_ties_not_ranked() -> None:
    rows = grid(_null_cell(np.random.default_rng(0)), harnesses=16, seeds=10)
    table = worst_harness(rows)
    assert (table["spread"] > 0.3).all()  # raw extremes of 16 coins over 10 seeds look far apart
    assert not table["different"].any()
    shown = pretty(table)
    assert set(shown["worst harness"]) == {"(tie)"} and set(shown["best harness"]) == {"(tie)"}
    assert set(shown["verdict"]) == {"no significant difference"}


def test_a_real_difference_is_named() -> None:
    rows = grid(lambda t, h, s: h != 3, harnesses=6, seeds=30)  # h03 always fails
    table = worst_harness(rows).set_index("task_id")
    assert (table["worst_harness"] == "h03").all() and table["different"].all()
    assert (table["wins"] == 30).all() and (table["losses"] == 0).all()
    assert (pretty(table.reset_index())["worst harness"] == "h03").all()


def test_identical_outcomes_are_a_tie_with_p_one() -> None:
    table = worst_harness(grid(lambda t, h, s: s % 2 == 0, harnesses=5))
    assert (table["spread"] == 0).all() and (table["p_holm"] == 1.0).all()
    assert set(pretty(table)["verdict"]) == {"tie"}


def test_one_harness_has_no_comparison_and_crashes_are_left_out() -> None:
    rows = grid(lambda t, h, s: True, tasks=1, harnesses=1)
    rows.loc[0, "error"] = "boom"
    table = worst_harness(rows)
    assert table.loc[0, "harnesses"] == 1 and not table.loc[0, "different"]
    assert table.loc[0, "episodes_per_harness"] == 9
    assert table.loc[0, "p_holm"] != table.loc[0, "p_holm"]  # NaN: nothing to compare


def test_spread_test_known_answers() -> None:
    # 2 harnesses, 3 instances, each instance 1 success: the full spread needs every instance to
    # give its success to the same harness, 2 of 8 equally likely shuffles.
    spread, p = spread_test([[1, 1, 1], [0, 0, 0]], draws=4000, seed=1)
    assert spread == 1.0 and p == pytest.approx(0.25, abs=0.03)
    assert spread_test([[1, 0], [1, 0], [1, 0]]) == (0.0, 1.0)  # identical outcomes
    assert spread_test([[1, 0]]) == (0.0, 1.0)  # one harness: nothing to compare
    # A harness that did not play an instance keeps its absence under every shuffle.
    nan = float("nan")
    spread, p = spread_test([[1, 1, nan], [0, 0, 1]], draws=4000, seed=2)
    assert spread == pytest.approx(1 - 1 / 3) and 0.2 < p <= 1


def test_simultaneous_intervals_widen_with_the_number_of_harnesses() -> None:
    assert simultaneous_z(1) == pytest.approx(Z95)
    assert simultaneous_z(20) > simultaneous_z(5) > Z95


def _measure(make, reps: int, harnesses: int, seeds: int, truth: float = 0.5) -> tuple[float, float]:  # noqa: ANN001
    """(share of tables calling anything different, coverage of the printed extreme intervals)."""
    rng = np.random.default_rng(11)
    false = covered = total = 0
    for _ in range(reps):
        table = worst_harness(grid(make(rng), tasks=3, harnesses=harnesses, seeds=seeds))
        false += bool(table["different"].any())
        for side in ("worst", "best"):
            covered += int(((table[f"{side}_low"] <= truth) & (truth <= table[f"{side}_high"])).sum())
            total += len(table)
    return false / reps, covered / total


def test_null_tables_fast() -> None:
    for make in (_null_cell, _null_instance, _sparse):
        false, coverage = _measure(make, 4, 8, 10)
        assert false == 0 and coverage >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("make", [_null_cell, _null_instance, _sparse])
@pytest.mark.parametrize(("harnesses", "seeds"), [(4, 3), (16, 10), (30, 20)])
def test_null_tables_slow(make, harnesses: int, seeds: int) -> None:  # noqa: ANN001
    """Null agents: at most 10% of reports call any best/worst pair different (Holm keeps 5%),
    and the simultaneous intervals of the picked extremes cover the true 0.5 >= 90%."""
    false, coverage = _measure(make, 100, harnesses, seeds)
    assert false <= 0.10 and coverage >= 0.90, (false, coverage)
