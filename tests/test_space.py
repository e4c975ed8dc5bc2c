"""HarnessSpace: enumeration, seeded sampling, covering arrays, splits, files, errors."""

from __future__ import annotations

import itertools

import pytest

from harness_gym import Harness, HarnessSpecError, make_env
from harness_gym.core.space import DEFAULT_SPACE, CoverageError, Factor, HarnessSpace, level_name
from tests.conftest import TASK_IDS, play_oracle

SMALL = HarnessSpace(
    {
        "obs_format": ["json", "yaml", "xml"],
        "tool_style": ["json", "python"],
        "field_order": ["canonical", "reversed"],
    }
)


def covered(space: HarnessSpace, points: list[Harness], t: int) -> bool:
    """Brute force, independent of the library's own bookkeeping."""
    rows = [tuple(getattr(h, f.name) for f in space.factors) for h in points]
    for combo in itertools.combinations(range(len(space.factors)), t):
        needed = set(itertools.product(*(space.factors[c].levels for c in combo)))
        have = {tuple(r[c] for c in combo) for r in rows}
        if needed - have:
            return False
    return True


def test_enumeration_and_ids() -> None:
    points = list(SMALL)
    assert len(points) == SMALL.size == 12
    assert len({p.id for p in points}) == 12
    assert all(p in SMALL for p in points)
    assert Harness(obs_format="markdown") not in SMALL
    assert (
        SMALL.harness(obs_format="yaml", tool_style="python").describe()
        == "obs_format=yaml tool_style=python"
    )


def test_sampling_is_determined_by_the_harness_seed() -> None:
    assert DEFAULT_SPACE.sample(7) == DEFAULT_SPACE.sample(7)
    assert DEFAULT_SPACE.sample(7, n=5) == DEFAULT_SPACE.sample(7, n=5)
    assert len({h.id for h in DEFAULT_SPACE.sample(1, n=50)}) > 40
    assert DEFAULT_SPACE.sample([3, 11]) == DEFAULT_SPACE.sample([3, 11]) != DEFAULT_SPACE.sample([3, 12])


SPACES = {
    "small": SMALL,
    "default": DEFAULT_SPACE,
    "mixed": HarnessSpace(
        {
            "obs_format": ["json", "markdown", "xml", "yaml", "key_value"],
            "tool_naming": ["canonical", "synonyms", "opaque"],
            "parser": ["strict", "lenient"],
            "history_window": [0, 1, 2, "all"],
            "invalid_action": ["feedback", "end", "ignore"],
        }
    ),
}


@pytest.mark.parametrize(
    ("name", "strength"),
    [("small", 1), ("small", 2), ("small", 3), ("default", 1), ("default", 2), ("mixed", 2), ("mixed", 3)],
)
def test_covering_subsets_cover_every_combination(name: str, strength: int) -> None:
    space = SPACES[name]
    points = space.covering(strength)
    assert covered(space, points, strength)
    assert space.uncovered(points, strength) == []
    assert space.min_covering_size(strength) <= len(points) < space.size or space.size <= len(points)
    assert points == space.covering(strength), "covering subsets are deterministic"


def test_covering_pairs_of_the_default_space_are_few() -> None:
    points = DEFAULT_SPACE.covering(2)
    # 24 is the lower bound (6 formats x 4 tool styles); greedy stays close to it.
    assert DEFAULT_SPACE.min_covering_size(2) == 24
    assert len(points) <= 40
    assert not covered(DEFAULT_SPACE, points[:-1], 2) or len(points) == 24


def test_uncovered_reports_missing_combinations() -> None:
    missing = SMALL.uncovered(list(SMALL)[:3], 2)
    assert missing and {"obs_format", "tool_style"} <= set().union(*missing)


@pytest.mark.parametrize(
    ("strength", "max_points", "message"),
    [
        (0, None, "strength must be between 1 and"),
        (4, None, r"between 1 and the number of factors \(3\), got 4"),
        (2, 5, "needs at least 6 points"),
    ],
)
def test_covering_requests_that_cannot_be_met(strength: int, max_points: int | None, message: str) -> None:
    with pytest.raises(CoverageError, match=message):
        SMALL.covering(strength, max_points=max_points)


def test_split_by_whole_levels() -> None:
    train, held = DEFAULT_SPACE.split_levels({"obs_format": ["yaml"], "tool_naming": ["opaque"]})
    assert "yaml" not in train.factors[0].level_names
    assert train.size == DEFAULT_SPACE.size * 5 // 6 * 2 // 3
    for h in held.sample(0, n=30):
        assert h.obs_format == "yaml" or h.tool_naming == "opaque"
        assert h not in train
    for h in train.sample(0, n=30):
        assert h not in held
    assert held.balanced() and all(h in held for h in held.balanced())
    assert held.covering() and all(h in held for h in held.covering())


def test_split_by_points() -> None:
    points = DEFAULT_SPACE.covering(2)
    train, held = HarnessSpace.split_points(points, 0.25, seed=1)
    assert len(held) == round(0.25 * len(points)) and not set(train) & set(held)
    assert (train, held) == HarnessSpace.split_points(points, 0.25, seed=1)


def test_yaml_round_trip_and_summary(tmp_path) -> None:
    path = tmp_path / "space.yaml"
    DEFAULT_SPACE.save(path)
    loaded = HarnessSpace.from_yaml(path)
    assert loaded.id == DEFAULT_SPACE.id and list(loaded.sample(3, n=4)) == DEFAULT_SPACE.sample(3, n=4)
    summary = DEFAULT_SPACE.summary()
    assert "279,936 points" in summary and "step+last_error" in summary
    based = HarnessSpace({"tool_style": ["xml", "python"]}, base=Harness(obs_format="yaml"))
    assert HarnessSpace.from_yaml(based.to_yaml()).base == Harness(obs_format="yaml")


@pytest.mark.parametrize(
    ("factors", "message"),
    [
        ({"colour": ["red"]}, "unknown harness factor 'colour'; valid factors"),
        ({"obs_format": ["json", "toml"]}, "unknown level 'toml' for factor 'obs_format'; valid levels"),
        ({"obs_format": []}, "needs at least one level"),
        ({"obs_format": ["json", "json"]}, "repeats a level"),
    ],
)
def test_bad_spaces_are_clear_errors(factors: dict, message: str) -> None:
    with pytest.raises(HarnessSpecError, match=message):
        HarnessSpace(factors)


def test_bad_levels_and_splits_are_clear_errors() -> None:
    with pytest.raises(HarnessSpecError, match="valid levels: \\['json', 'yaml', 'xml'\\]"):
        SMALL.harness(obs_format="html")
    with pytest.raises(HarnessSpecError, match="not in this space"):
        SMALL.harness(parser="lenient")
    with pytest.raises(HarnessSpecError, match="leaves nothing to train on"):
        SMALL.split_levels({"field_order": ["canonical", "reversed"]})
    with pytest.raises(HarnessSpecError, match="not in this space"):
        SMALL.split_levels({"parser": ["strict"]})
    with pytest.raises(HarnessSpecError, match="keys 'factors'"):
        HarnessSpace.from_dict({"factor": {}})


def test_level_names() -> None:
    assert [level_name(v) for v in [(), ("step", "last_error"), None, 0, "all"]] == [
        "none",
        "step+last_error",
        "default",
        "0",
        "all",
    ]
    assert Factor("extra_fields", ((), ("step",))).index("step") == 1


# -- the contract over the whole default space -------------------------------------------------

POINTS = DEFAULT_SPACE.covering(2) + DEFAULT_SPACE.sample(2026, n=200)
SEEDS = range(3)


@pytest.fixture(scope="module")
def canonical_success() -> dict[tuple[str, int], bool]:
    return {(t, s): play_oracle(make_env(t), s)[1]["success"] for t in TASK_IDS for s in SEEDS}


@pytest.mark.parametrize("chunk", range(8))
def test_oracle_success_is_unchanged_over_the_default_space(chunk: int, canonical_success) -> None:
    """Every point of the default space is pure presentation: the ceiling cannot move."""
    for i, harness in enumerate(POINTS):
        if i % 8 != chunk:
            continue
        task = TASK_IDS[i % len(TASK_IDS)]
        env = make_env(task, harness)
        for seed in SEEDS:
            _, info = play_oracle(env, seed)
            assert info["success"] == canonical_success[(task, seed)], (task, harness.describe(), seed)
            assert info["state_digest"] == make_env(task).reset(seed=seed)[1]["state_digest"]


def test_dropping_a_needed_tool_lowers_the_oracle_success() -> None:
    space = HarnessSpace(
        {**{f.name: f.levels for f in DEFAULT_SPACE.factors}, "drop_tools": [(), ("type",), ("select",)]}
    )
    needs = {"type": ["EnterText", "LoginUser", "UseAutocomplete"], "select": ["ChooseList", "BookFlight"]}
    points = space.covering(2)
    for harness in points:
        for tool in harness.drop_tools:
            for task in needs[tool]:
                wins = sum(play_oracle(make_env(task, harness), s)[1]["success"] for s in range(10))
                assert wins < 10, (task, harness.describe())
    assert any(h.drop_tools for h in points)
