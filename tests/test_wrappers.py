"""Perturbation wrappers and the harness sampler: composition, replay, clear errors."""

from __future__ import annotations

import itertools
import json

import gymnasium as gym
import pytest

from harness_gym import PRESETS, HarnessSpecError, make_env
from harness_gym.core import perturbations as P
from harness_gym.core.space import DEFAULT_SPACE
from harness_gym.wrappers import (
    ChangeControl,
    ChangeToolNaming,
    DropTools,
    Reformat,
    RenameArguments,
    RenameTools,
    ReorderFields,
    ReorderTools,
    RestyleTools,
    RewriteDescriptions,
    SampleHarness,
)
from tests.conftest import play_oracle

STEPS = [
    (lambda e: ReorderFields(e), P.reverse_fields()),
    (
        lambda e: RenameTools(e, {"click": "tap", "type": "enter"}),
        P.rename_tools({"click": "tap", "type": "enter"}),
    ),
    (lambda e: RenameArguments(e, {"ref": "node"}), P.rename_args({"ref": "node"})),
    (lambda e: RestyleTools(e, "python"), P.restyle_tools("python")),
    (lambda e: ReorderTools(e, "alphabetical"), P.reorder_tools("alphabetical")),
    (lambda e: RewriteDescriptions(e, "terse"), P.rewrite_descriptions("terse")),
    (lambda e: Reformat(e, "yaml"), P.reformat("yaml")),
    (
        lambda e: ChangeControl(e, history_window=1, invalid_action="ignore"),
        P.set_control(history_window=1, invalid_action="ignore"),
    ),
    (lambda e: ChangeToolNaming(e, "opaque"), P.change_naming("opaque")),
    (lambda e: DropTools(e, ["press"]), P.drop_tools(["press"])),
]


def trace(env: gym.Env, seed: int) -> list:
    obs, info = env.reset(seed=seed)
    out = [(obs, tuple(info["legal_actions"]), info["harness_id"], info["system_prompt"])]
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
        out.append((obs, tuple(info["legal_actions"]), info["harness_id"], reward))
        done = terminated or truncated
    return out


@pytest.mark.parametrize("order", list(itertools.permutations(range(4)))[::5] + [(9, 8, 7, 6, 5, 4)])
def test_wrapper_stack_equals_spec_composition(order: tuple[int, ...]) -> None:
    env: gym.Env = make_env("LoginUser", "BundleMarkdown")
    perturbations = []
    for i in order:
        wrap, perturbation = STEPS[i]
        env = wrap(env)
        perturbations.append(perturbation)
    direct = make_env("LoginUser", P.apply_all(PRESETS["BundleMarkdown"], perturbations))
    assert env.harness == direct.harness
    assert trace(env, 5) == trace(direct, 5)
    _, info = env.reset(seed=5)
    assert info["perturbations"] == [str(p) for p in perturbations]


def test_reorder_fields_variants() -> None:
    env = ReorderFields(make_env("ClickButton"), ["page", "instruction", "title"])
    assert list(json.loads(env.reset(seed=0)[0])) == ["page", "instruction", "title"]
    shuffled = [
        list(json.loads(ReorderFields(make_env("ClickButton"), "shuffle", seed=s).reset(seed=0)[0]))
        for s in range(12)
    ]
    assert len({tuple(o) for o in shuffled}) > 1
    assert shuffled[3] == list(
        json.loads(ReorderFields(make_env("ClickButton"), "shuffle", seed=3).reset(seed=0)[0])
    )
    twice = ReorderFields(ReorderFields(make_env("ClickButton")))
    assert twice.reset(seed=0)[0] == make_env("ClickButton").reset(seed=0)[0]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ReorderFields(make_env("ClickButton"), ["page", "title"]), r"missing \['instruction'\]"),
        (
            lambda: ReorderFields(make_env("ClickButton"), ["page", "title", "title", "instruction"]),
            "repeated",
        ),
        (lambda: ReorderFields(make_env("ClickButton"), "sideways"), "must be 'reversed', 'shuffle'"),
        (
            lambda: RenameTools(DropTools(make_env("ClickButton"), ["press"]), {"press": "hit"}),
            "which drop_tools removes",
        ),
        (
            lambda: DropTools(RenameTools(make_env("ClickButton"), {"press": "hit"}), ["press"]),
            "which drop_tools removes",
        ),
        (lambda: RenameTools(make_env("ClickButton"), {"scroll": "wheel"}), "unknown tools \\['scroll'\\]"),
        (lambda: RenameTools(make_env("ClickButton"), {"click": "two words"}), "identifiers"),
        (lambda: RenameArguments(make_env("ClickButton"), {"reference": "x"}), "unknown arguments"),
        (lambda: RenameTools(make_env("ClickButton"), {"click": "type"}), "clashing tool names"),
        (lambda: RestyleTools(make_env("ClickButton"), "yaml"), "valid levels"),
        (lambda: Reformat(make_env("ClickButton"), "toml"), "valid levels"),
        (lambda: ChangeControl(make_env("ClickButton"), step_budget=0), "step_budget"),
        (lambda: ChangeControl(make_env("ClickButton"), obs_format="xml"), "set_control changes only"),
        (lambda: DropTools(make_env("ClickButton"), ["scroll"]), "unknown tools"),
    ],
)
def test_bad_perturbations_are_clear_errors_and_leave_the_env_intact(build, message: str) -> None:
    with pytest.raises((HarnessSpecError, ValueError), match=message):
        build()


def test_failed_perturbation_is_not_kept() -> None:
    env = RenameTools(make_env("ClickButton"), {"click": "tap"})
    with pytest.raises(HarnessSpecError):
        DropTools(env, ["click"])
    obs, info = env.reset(seed=0)
    assert info["harness"]["rename_tools"] == {"click": "tap"} and not info["harness"]["drop_tools"]


def test_wrappers_need_a_harness_env() -> None:
    with pytest.raises(TypeError, match="HarnessEnv underneath"):
        ReorderFields(gym.make("CartPole-v1"))


def test_drop_tool_wrapper_lowers_the_ceiling_but_presentation_does_not() -> None:
    def wins(env: gym.Env) -> int:
        return sum(play_oracle(env, s)[1]["success"] for s in range(20))

    assert wins(Reformat(RestyleTools(ReorderFields(make_env("EnterText")), "xml"), "html")) == 20
    assert wins(DropTools(make_env("EnterText"), ["type"])) < 20


def test_sampler_replays_every_task_seed_harness_seed_pair() -> None:
    def episode(harness_seed: int, seed: int):
        env = SampleHarness(make_env("EmailInbox"), DEFAULT_SPACE, harness_seed=harness_seed)
        return trace(env, seed)

    assert episode(1, 4) == episode(1, 4)
    assert episode(1, 4)[0][2] != episode(2, 4)[0][2] or episode(1, 4)[0][2] != episode(3, 4)[0][2]
    env = SampleHarness(make_env("EmailInbox"), DEFAULT_SPACE, harness_seed=1)
    ids = {env.reset(seed=s)[1]["harness_id"] for s in range(10)}
    assert len(ids) > 5, "per-reset sampling draws a new harness each episode"
    _, info = env.reset(seed=4)
    assert info["harness_seed"] == 1 and set(info["harness_levels"]) == set(DEFAULT_SPACE.factor_names)
    assert DEFAULT_SPACE.harness(**info["harness_levels"]).id == info["harness_id"]


def test_sampler_per_env_and_from_a_list() -> None:
    env = SampleHarness(make_env("ClickTab"), DEFAULT_SPACE, harness_seed=9, per="env")
    assert len({env.reset(seed=s)[1]["harness_id"] for s in range(6)}) == 1
    subset = DEFAULT_SPACE.balanced(2)
    env = SampleHarness(make_env("ClickTab"), subset, harness_seed=0)
    assert {env.reset(seed=s)[1]["harness_id"] for s in range(30)} <= {h.id for h in subset}
    with pytest.raises(ValueError, match="per must be"):
        SampleHarness(make_env("ClickTab"), subset, per="step")
    with pytest.raises(TypeError, match="non-empty list"):
        SampleHarness(make_env("ClickTab"), [])


def test_perturbations_apply_on_top_of_sampled_harnesses() -> None:
    env = ReorderFields(SampleHarness(make_env("ClickTab"), DEFAULT_SPACE, harness_seed=3))
    for seed in range(5):
        _, info = env.reset(seed=seed)
        drawn = DEFAULT_SPACE.sample([3, seed])
        assert info["harness_id"] == P.reverse_fields()(drawn).id


def _inner_view(env: gym.Env, seed: int) -> tuple:
    """What an env presents on its own: harness id, rendered observation, how it parses."""
    obs, info = env.reset(seed=seed)
    json_text = '{"name": "click", "arguments": {"ref": 0}}'
    xml_text = "<click><ref>0</ref></click>"
    parses = []
    for text in (json_text, xml_text):
        env.reset(seed=seed)
        *_, step_info = env.step(text)
        parses.append(step_info["error_kind"])
    return info["harness_id"], obs, info["system_prompt"], tuple(info["legal_actions"]), tuple(parses)


@pytest.mark.parametrize("wrap", [s[0] for s in STEPS] + [lambda e: RestyleTools(e, "xml")])
def test_wrapping_leaves_the_inner_env_unchanged(wrap) -> None:
    inner = make_env("ClickButton")
    before = _inner_view(inner, 3)
    assert before[4][0] != "malformed" and before[4][1] == "malformed"  # JSON reads, XML does not
    wrapped = wrap(inner)
    assert _inner_view(inner, 3) == before, "wrapping changed the inner env"
    wrapped.reset(seed=3)  # an episode through the wrapper ...
    assert _inner_view(inner, 3) == before, "... leaves the inner env's own harness alone"
    assert inner.harness == inner.base_harness and not inner._perturbations


def test_restyled_wrapper_writes_xml_and_the_env_it_wraps_json() -> None:
    inner = make_env("EnterText")
    xml = RestyleTools(inner, "xml")
    assert xml.harness.tool_style == "xml" and inner.harness.tool_style == "json"
    _, info = xml.reset(seed=1)
    assert all(t.startswith("<") for t in info["legal_actions"])
    _, info = inner.reset(seed=1)
    assert all(t.startswith("{") for t in info["legal_actions"])
    assert inner.harness.id == make_env("EnterText").harness.id


def test_one_env_under_two_stacks() -> None:
    inner = make_env("LoginUser")
    a, b = RestyleTools(inner, "python"), Reformat(inner, "yaml")
    _, info_a = a.reset(seed=2)
    _, info_b = b.reset(seed=2)
    assert info_a["harness_id"] == P.restyle_tools("python")(inner.base_harness).id
    assert info_b["harness_id"] == P.reformat("yaml")(inner.base_harness).id
    assert info_a["perturbations"] == [str(P.restyle_tools("python"))]
    assert info_b["perturbations"] == [str(P.reformat("yaml"))]
    assert info_a["state_digest"] == info_b["state_digest"]


def test_sampler_leaves_the_inner_env_unchanged() -> None:
    inner = make_env("ClickTab")
    before = _inner_view(inner, 0)
    sampled = SampleHarness(inner, DEFAULT_SPACE, harness_seed=3)
    ids = {sampled.reset(seed=s)[1]["harness_id"] for s in range(5)}
    assert len(ids) > 1 and _inner_view(inner, 0) == before
    fixed = SampleHarness(inner, DEFAULT_SPACE, harness_seed=9, per="env")
    assert fixed.harness.id == fixed.reset(seed=4)[1]["harness_id"] != inner.base_harness.id
    assert _inner_view(inner, 0) == before


def test_a_foreign_harness_request_is_a_clear_error() -> None:
    from harness_gym.core.env import HARNESS_REQUEST

    with pytest.raises(TypeError, match="HarnessRequest"):
        make_env("ClickTab").reset(seed=0, options={HARNESS_REQUEST: {"tool_style": "xml"}})


def test_add_perturbation_configures_the_env_itself_under_wrappers() -> None:
    env = make_env("ClickTab")
    RestyleTools(env, "xml").reset(seed=0)  # an episode through a wrapper ...
    env.add_perturbation(P.reformat("yaml"))  # ... does not leak into the env's own harness
    assert env.harness == P.reformat("yaml")(env.base_harness)
    _, info = env.reset(seed=0)
    assert info["harness"]["obs_format"] == "yaml" and info["harness"]["tool_style"] == "json"
    _, info = RestyleTools(env, "python").reset(seed=0)
    assert (info["harness"]["obs_format"], info["harness"]["tool_style"]) == ("yaml", "python")
