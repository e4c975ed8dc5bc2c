"""Designs: orthogonal arrays checked by an independent count, near-orthogonal balance, flips."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from harness_gym.core.designs import balance, flips, near_orthogonal, orthogonal_array
from harness_gym.core.space import DEFAULT_SPACE, HarnessSpace

DEMO = HarnessSpace.from_yaml("examples/demo-space.yaml")
COUNTS = {
    "two-level x7": (2,) * 7,
    "three-level x4": (3,) * 4,
    "four-level x5": (4,) * 5,
    "mixed 6.2.4.3.2": (6, 2, 4, 3, 2),
    "demo": tuple(len(f.levels) for f in DEMO.factors),
    "default": tuple(len(f.levels) for f in DEFAULT_SPACE.factors),
    "five-level x3": (5, 5, 5),
}


def pairwise_balanced(rows: np.ndarray, counts: tuple[int, ...], strength: int = 2) -> bool:
    """Every level t-tuple of every t columns appears equally often: counted with itertools."""
    for cols in itertools.combinations(range(len(counts)), strength):
        seen = Counter(tuple(int(r[c]) for c in cols) for r in rows)
        every = [seen.get(levels, 0) for levels in itertools.product(*(range(counts[c]) for c in cols))]
        if len(set(every)) != 1 or every[0] == 0:
            return False
    return True


@pytest.mark.parametrize("name", list(COUNTS))
def test_orthogonal_arrays_are_pairwise_balanced_and_small(name: str) -> None:
    counts = COUNTS[name]
    design = orthogonal_array(counts)
    assert design.rows.shape[1] == len(counts)
    assert pairwise_balanced(design.rows, counts)
    assert len(design) < np.prod(counts)
    assert len(design) % np.lcm.reduce([a * b for a, b in itertools.combinations(counts, 2)]) == 0
    measured = design.balance()
    assert measured.orthogonal and measured.pair_deviation == 0 and measured.level_imbalance == 0
    assert measured.max_correlation == pytest.approx(0, abs=1e-9)
    assert measured.d_efficiency == pytest.approx(100)


@pytest.mark.parametrize(
    ("counts", "runs"), [((2,) * 7, 8), ((3,) * 4, 9), ((4,) * 5, 16), ((6, 2, 4, 3, 2), 72)]
)
def test_orthogonal_arrays_meet_the_known_smallest_size(counts: tuple[int, ...], runs: int) -> None:
    """Rao-Hamming sizes for one prime power, and the lcm bound (6 x 4 and 6 x 3) for the mixed one."""
    assert len(orthogonal_array(counts)) == runs


def test_strength_three_orthogonal_array() -> None:
    counts = (2, 2, 2, 2, 3)
    design = orthogonal_array(counts, strength=3)
    assert pairwise_balanced(design.rows, counts, strength=3)
    assert len(design) < np.prod(counts)


def test_balance_measures_a_design_it_did_not_build() -> None:
    full = np.array(list(itertools.product(range(2), range(3))))
    assert balance(full, (2, 3)).orthogonal
    skewed = np.vstack([full, full[:1]])  # one extra (0, 0): that pair 3 times, balanced value 7/6
    measured = balance(skewed, (2, 3))
    assert not measured.orthogonal
    assert measured.level_imbalance == 1
    assert measured.pair_deviation == pytest.approx(2 - 7 / 6)
    # Any contrasts of the 3-level column span the same space as these two (Helmert).
    two = np.where(skewed[:, 0] == 0, 1.0, -1.0)
    three = np.array([[1.0, 1.0], [-1.0, 1.0], [0.0, -2.0]])[skewed[:, 1]]
    largest = max(abs(np.corrcoef(two, three[:, j])[0, 1]) for j in range(2))
    assert measured.max_correlation == pytest.approx(largest) and largest > 0
    aliased = np.array([[0, 0], [1, 1], [0, 0], [1, 1]])  # the two columns are one
    assert balance(aliased, (2, 2)).max_correlation == pytest.approx(1)
    assert balance(aliased, (2, 2)).d_efficiency == 0
    assert "aliased" in balance(aliased, (2, 2)).describe()


def test_d_efficiency_is_not_defined_with_fewer_points_than_parameters() -> None:
    """Two points of a 2 x 3 space cannot fit the 1 + 1 + 2 = 4 main-effect parameters: the
    D-efficiency is not defined (NaN, None in the design record), not "0%"; with the 4 points
    it needs it is a number again, and a full factorial's is 100."""
    import json

    counts = (2, 3)
    two = np.array([[0, 0], [1, 1]])
    measured = balance(two, counts)
    assert measured.parameters == 4 and measured.d_efficiency != measured.d_efficiency
    assert json.loads(json.dumps(measured.to_dict()))["d_efficiency"] is None
    assert "not defined (2 points cannot fit the 4 parameters" in measured.describe()
    assert "0.0%" not in measured.describe()
    four = np.array([[0, 0], [1, 1], [0, 2], [1, 0]])
    assert 0 < balance(four, counts).d_efficiency < 100
    full = np.array(list(itertools.product(range(2), range(3))))
    assert balance(full, counts).d_efficiency == pytest.approx(100)


@pytest.mark.parametrize(
    ("counts", "n", "seed"), [((6, 2, 4, 3, 2, 3, 2, 2), 24, 0), ((6, 2, 4, 3, 2), 18, 3)]
)
def test_near_orthogonal_designs_are_level_balanced_and_better_than_chance(counts, n, seed) -> None:  # noqa: ANN001
    design = near_orthogonal(counts, n, seed)
    assert len(design) == n and len({tuple(r) for r in design.rows}) == n
    for c, s in enumerate(counts):
        freq = Counter(design.rows[:, c].tolist())
        assert max(freq.values()) - min(freq.get(lv, 0) for lv in range(s)) <= 1
    unsearched = near_orthogonal(counts, n, seed, sweeps=0)
    assert design.balance().pair_deviation <= unsearched.balance().pair_deviation
    assert design.balance().d_efficiency > unsearched.balance().d_efficiency


@pytest.mark.parametrize("mode", ["all", "next"])
def test_flips_change_exactly_one_factor(mode: str) -> None:
    counts = (6, 2, 4, 3)
    base = orthogonal_array(counts).rows[:5]
    design = flips(base, counts, mode)
    assert (design.rows[: len(base)] == base).all()
    per_base_factor = Counter()
    for b, f, c in design.flips:
        changed = np.flatnonzero(design.rows[b] != design.rows[f])
        assert changed.tolist() == [c]
        if mode == "next":
            assert design.rows[f, c] == (design.rows[b, c] + 1) % counts[c]
        per_base_factor[(b, c)] += 1
    expected = {(b, c): (counts[c] - 1 if mode == "all" else 1) for b in range(len(base)) for c in range(4)}
    assert dict(per_base_factor) == expected


def test_space_designs_are_harnesses_of_the_space() -> None:
    points = DEMO.balanced()
    rows = np.array([DEMO.indices(h) for h in points])
    assert pairwise_balanced(rows, COUNTS["demo"])
    assert DEMO.uncovered(DEMO.covering(2)) == [] and len(DEMO.covering(2)) < len(points)
    small = DEMO.balanced(max_points=12)
    assert len(small) == 12 and DEMO.balanced_design(max_points=12).kind == "near-orthogonal"
    flipped = DEMO.points(DEMO.flips(points[:2]))
    assert flipped[:2] == points[:2] and all(h in DEMO for h in flipped)


def test_sweep_records_flips_that_name_the_changed_factor() -> None:
    from harness_gym.analysis.sweep import SweepSpec

    spec = SweepSpec.build(
        "random", tasks=["ClickButton"], space="examples/demo-space.yaml", subset="flips:2"
    )
    levels = {p.name: p.levels for p in spec.harnesses}
    record = spec.to_dict()["design"]
    assert record["kind"] == "flips" and record["base"]["n"] == 2
    assert len(record["flips"]) == sum(len(f.levels) - 1 for f in DEMO.factors) * 2
    for base, flipped, factor in record["flips"]:
        assert [f for f in spec.factors if levels[base][f] != levels[flipped][f]] == [factor]
