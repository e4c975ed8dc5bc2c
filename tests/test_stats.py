"""Known-answer tests for the shared statistics: paired binary comparisons and multiplicity."""

from __future__ import annotations

import numpy as np
import pytest

from harness_gym.analysis.stats import (
    PairedBinary,
    benjamini_hochberg,
    holm,
    mcnemar_exact,
    paired_binary,
    paired_binary_counts,
)


def test_newcombe_matches_published_values() -> None:
    # Newcombe (1998), Statistics in Medicine 17:2635, example (a): 36/12/2/0, method 10.
    r = paired_binary_counts(36, 12, 2, 0)
    assert r.difference == pytest.approx(0.2)
    assert (r.low, r.high) == pytest.approx((0.0569, 0.3404), abs=1e-4)
    # Fagerland, Lydersen & Laake (2017), ch. 8: Cavo et al. 59/6/16/80 gives -0.0621 [-0.1186, -0.0046].
    r = paired_binary_counts(59, 6, 16, 80)
    assert (r.difference, r.low, r.high) == pytest.approx((-0.0621, -0.1186, -0.0046), abs=1e-4)
    assert r.p_value == pytest.approx(mcnemar_exact(6, 16))


def test_paired_binary_counts_the_table_from_outcomes() -> None:
    a = [1, 1, 0, 0, 1, 0]
    b = [1, 0, 1, 0, 0, 0]
    r = paired_binary(a, b)
    assert isinstance(r, PairedBinary)
    assert (r.n, r.both, r.only_a, r.only_b, r.neither) == (6, 1, 2, 1, 2)
    assert r.difference == pytest.approx(1 / 6)
    assert r.discordant == 3
    assert r.p_value == pytest.approx(1.0)
    assert paired_binary([True, False], [False, False]).only_a == 1


def test_one_win_no_loss_over_sixty_pairs_is_not_significant() -> None:
    r = paired_binary([1] + [0] * 59, [0] * 60)
    assert r.p_value == 1.0 and not r.significant()
    assert r.low < 0 < r.high


def test_a_tie_gets_an_interval_with_width_not_zero_zero() -> None:
    for both, neither in [(60, 0), (0, 60), (30, 30)]:
        r = paired_binary_counts(both, 0, 0, neither)
        assert r.difference == 0.0 and r.p_value == 1.0
        assert r.low < -0.02 and r.high > 0.02, (both, neither, r)


def test_a_clear_difference_is_significant() -> None:
    r = paired_binary_counts(20, 15, 0, 25)
    assert r.p_value < 1e-4 and r.significant() and r.low > 0.1


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [([1, 0], [1], "equal lengths"), ([2], [1], "0 or 1"), ([0.5], [1], "0 or 1")],
)
def test_paired_binary_names_bad_input(a: list, b: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        paired_binary(a, b)


def test_paired_binary_counts_rejects_bad_counts_and_confidence() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        paired_binary_counts(1, -1, 0, 0)
    with pytest.raises(ValueError, match="confidence"):
        paired_binary_counts(1, 1, 0, 0, confidence=1.5)
    empty = paired_binary([], [])
    assert empty.n == 0 and (empty.low, empty.high) == (-1.0, 1.0) and empty.p_value == 1.0


def test_other_confidence_levels_nest() -> None:
    r90 = paired_binary_counts(20, 8, 3, 29, confidence=0.90)
    r99 = paired_binary_counts(20, 8, 3, 29, confidence=0.99)
    r95 = paired_binary_counts(20, 8, 3, 29)
    assert r99.low < r95.low < r90.low < r90.high < r95.high < r99.high


def test_holm_and_bh_known_answers() -> None:
    ps = [0.01, 0.04, 0.03, 0.005]
    assert holm(ps) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert benjamini_hochberg(ps) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert holm([]) == [] and benjamini_hochberg([]) == []
    assert holm([0.5, 0.9]) == [1.0, 1.0]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        benjamini_hochberg([-0.1])


def test_holm_controls_family_wise_error_on_null_families() -> None:
    rng = np.random.default_rng(3)
    any_false = sum(min(holm(rng.random(20).tolist())) < 0.05 for _ in range(400))
    assert any_false / 400 <= 0.08
    raw = sum(min(rng.random(20)) < 0.05 for _ in range(400))
    assert raw / 400 > 0.5  # without adjustment most null families show something


def _coverage(rng: np.random.Generator, cells: tuple[float, ...], n: int, reps: int) -> float:
    truth = cells[1] - cells[2]
    hits = 0
    for counts in rng.multinomial(n, cells, size=reps):
        r = paired_binary_counts(*(int(c) for c in counts))
        hits += r.low <= truth + 1e-12 and truth - 1e-12 <= r.high
    return hits / reps


@pytest.mark.parametrize(
    "cells",
    [(0.5, 0.0, 0.0, 0.5), (0.5, 1 / 120, 1 / 120, 0.5 - 1 / 60), (0.3, 0.2, 0.2, 0.3), (0.5, 0.1, 0.0, 0.4)],
)
def test_newcombe_coverage_fast(cells: tuple[float, ...]) -> None:
    assert _coverage(np.random.default_rng(1), cells, 20, 300) >= 0.88


@pytest.mark.slow
@pytest.mark.parametrize("n", [10, 20, 60])
@pytest.mark.parametrize(
    "cells",
    [
        (0.5, 0.0, 0.0, 0.5),
        (0.5, 1 / 120, 1 / 120, 0.5 - 1 / 60),
        (0.45, 0.05, 0.05, 0.45),
        (0.25, 0.25, 0.25, 0.25),
        (0.5, 0.1, 0.0, 0.4),
        (0.5, 0.05, 0.0, 0.45),
        (0.2, 0.02, 0.0, 0.78),
        (0.4, 0.15, 0.0, 0.45),
    ],
)
def test_newcombe_coverage_slow(n: int, cells: tuple[float, ...]) -> None:
    assert _coverage(np.random.default_rng(n), cells, n, 4000) >= 0.90


@pytest.mark.slow
def test_mcnemar_false_significance_on_sparse_nulls() -> None:
    rng = np.random.default_rng(5)
    for cells in [(0.5, 1 / 120, 1 / 120, 0.5 - 1 / 60), (0.3, 0.2, 0.2, 0.3)]:
        hits = sum(
            paired_binary_counts(*(int(c) for c in counts)).significant()
            for counts in rng.multinomial(60, cells, size=4000)
        )
        assert hits / 4000 <= 0.05
