"""The harness factors for language-model agents: context, tool channel, worked examples,
native tool calls written back in the harness's syntax, and per-step action grammars."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import jsonschema
import pytest

import harness_gym  # noqa: F401
from harness_gym import Harness
from harness_gym.core.harness import HarnessSpecError
from harness_gym.core.space import DEFAULT_SPACE
from harness_gym.core.tools import ActionError
from harness_gym.envs.web.tasks import WEB_TASKS

TASKS = [t.__name__ for t in WEB_TASKS]

STYLES = ("json", "xml", "python", "command")


def _env(task: str, **levels: object) -> gym.Env:
    return gym.make(f"harness_gym/{task}-v0", harness=Harness(**levels))


@pytest.mark.parametrize("value", [-1, 9, 1.5, True, "2"])
def test_few_shot_rejects_bad_values(value: object) -> None:
    with pytest.raises(HarnessSpecError, match="few_shot"):
        Harness(few_shot=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("factor", ["context", "tool_channel"])
def test_unknown_levels_are_named(factor: str) -> None:
    with pytest.raises(HarnessSpecError, match=f"valid levels.*{factor}|{factor}.*valid levels"):
        Harness(**{factor: "nope"})


def test_new_factors_keep_existing_ids_and_round_trip() -> None:
    assert Harness().id == Harness(context="observation", tool_channel="text", few_shot=0).id
    h = Harness(context="transcript", tool_channel="native", few_shot=2)
    assert Harness.from_dict(h.to_dict()) == h and Harness.from_yaml(h.to_yaml()) == h
    assert len({h.id, Harness().id, Harness(few_shot=1).id}) == 3


@pytest.mark.parametrize("harness_seed", range(40))
def test_native_calls_round_trip_for_every_legal_action(harness_seed: int) -> None:
    """A native call (tool name + arguments as the model would send them) written back in
    the harness's syntax parses to the same canonical action, for every sampled harness."""
    harness = DEFAULT_SPACE.sample(harness_seed).replace(tool_channel="native")
    task = sorted(TASKS)[harness_seed % len(TASKS)]
    env = gym.make(f"harness_gym/{task}-v0", harness=harness).unwrapped
    env.reset(seed=harness_seed)
    for action in env.legal_actions():
        name, arguments = env.bound.toolbox.call(action)
        for sent in (json.dumps(arguments), arguments):
            assert env.bound.parse(env.bound.write_call(name, sent)) == action


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(
    ("name", "arguments", "kinds"),
    [
        ("delete_everything", "{}", {"unknown_tool"}),
        ("click", "{not json", {"malformed"}),
        ("click", "[1, 2]", {"malformed"}),
        ("click", "{}", {"missing_argument"}),
        ("click", '{"ref": 2, "force": true}', {"extra_argument", "malformed"}),
        ("click", '{"ref": "two"}', {"wrong_type", "malformed"}),
        ("click", "", {"missing_argument"}),
        ("cl ick<>'\"", '{"ref": 1}', {"unknown_tool", "malformed"}),
    ],
)
def test_bad_native_calls_become_harness_errors(style: str, name: str, arguments: str, kinds: set) -> None:
    """Whatever the model sends as a tool call, the env answers with the harness's error."""
    env = _env("ClickButton", tool_style=style, tool_channel="native")
    env.reset(seed=0)
    text = env.unwrapped.bound.write_call(name, arguments)
    with pytest.raises(ActionError) as caught:
        env.unwrapped.bound.parse(text)
    assert caught.value.kind in kinds, (text, caught.value.kind, caught.value.message)
    obs, reward, terminated, truncated, info = env.step(text)
    assert reward == 0 and info["invalid_actions"] == 1 and info["error_kind"] in kinds


def test_native_channel_changes_only_the_prompt() -> None:
    text, native = _env("LoginUser"), _env("LoginUser", tool_channel="native")
    o1, i1 = text.reset(seed=3)
    o2, i2 = native.reset(seed=3)
    assert o1 == o2 and i1["state_digest"] == i2["state_digest"] and i1["tools"] == i2["tools"]
    assert '"name": <tool>' in i1["system_prompt"] and '"name": <tool>' not in i2["system_prompt"]
    assert "given to you as functions" in i2["system_prompt"]


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("channel", ["text", "native"])
@pytest.mark.parametrize("task", sorted(TASKS))
def test_grammar_accepts_exactly_the_legal_actions(task: str, style: str, channel: str) -> None:
    env = _env(task, tool_style=style, tool_channel=channel, tool_naming="synonyms").unwrapped
    env.reset(seed=5)
    for _ in range(3):
        grammar = env.action_grammar()
        legal = env.legal_actions()
        assert grammar.exact and grammar.alternatives == len(legal)
        replies = [env.bound.example_reply(a) for a in legal]
        wrong = [r.replace("1", "91") for r in replies] + [r + " " for r in replies[:1]] + ["", "{}"]
        wrong = [w for w in wrong if w not in replies]
        if grammar.kind == "regex":
            pattern = re.compile(grammar.value)
            assert all(pattern.fullmatch(r) for r in replies)
            assert not any(pattern.fullmatch(w) for w in wrong)
        else:
            validator = jsonschema.Draft202012Validator(grammar.value)
            assert all(validator.is_valid(json.loads(r)) for r in replies)
            parsed = [json.loads(r) for r in replies]
            for w in wrong:
                try:
                    value = json.loads(w)
                except ValueError:
                    continue
                if value not in parsed:  # JSON text that means another call
                    assert not validator.is_valid(value), w
        # Replies drawn from the grammar are valid actions: step with one.
        obs, reward, terminated, truncated, info = env.step(env.oracle_action())
        if terminated or truncated:
            break


def test_grammar_falls_back_to_per_tool_when_there_are_many_actions() -> None:
    from harness_gym.core.tools import action_grammar

    env = _env("BookFlight", tool_style="python").unwrapped
    env.reset(seed=0)
    legal = env.legal_actions()
    grammar = action_grammar(env.bound.toolbox, legal, max_alternatives=2)
    assert not grammar.exact
    pattern = re.compile(grammar.value)
    assert all(pattern.fullmatch(env.bound.format_action(a)) for a in legal)
    assert not pattern.fullmatch("launch_rocket(ref=1)")


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("channel", ["text", "native"])
def test_worked_examples_are_oracle_steps_on_other_instances(style: str, channel: str) -> None:
    env = _env("LoginUser", tool_style=style, tool_channel=channel, few_shot=2).unwrapped
    obs, info = env.reset(seed=7)
    plain = _env("LoginUser", tool_style=style, tool_channel=channel)
    plain_obs, plain_info = plain.reset(seed=7)
    # The examples change nothing of the episode: same instance, observation and prompt.
    assert obs == plain_obs and info["state_digest"] == plain_info["state_digest"]
    assert info["system_prompt"] == plain_info["system_prompt"] and plain_info["examples"] == []
    examples = info["examples"]
    assert len(examples) == 2 and examples[0]["reply"] != examples[1]["reply"]
    assert all(e["observation"] != obs for e in examples)
    # Each reply is the oracle's action on the example's instance, as this harness writes it:
    # replay the example seeds with the oracle and compare.
    from harness_gym.core.env import EXAMPLE_SEED

    for i, example in enumerate(examples):
        probe = _env("LoginUser", tool_style=style, tool_channel=channel).unwrapped
        probe.reset(seed=EXAMPLE_SEED - i)
        for _ in range(i):
            probe.step(probe.oracle_action())
        assert probe.bound.render(probe.task.fields(), step=i) == example["observation"]
        assert probe.bound.example_reply(probe.task.oracle()) == example["reply"]
        if channel == "text":
            assert env.bound.parse(example["reply"]) == probe.task.oracle()
    # Deterministic across env instances, and building them did not disturb the episode.
    again = _env("LoginUser", tool_style=style, tool_channel=channel, few_shot=2)
    assert again.reset(seed=7)[1]["examples"] == examples
    assert env.step(env.oracle_action())[4]["invalid_actions"] == 0


def test_worked_examples_never_show_the_episode_instance() -> None:
    from harness_gym.core.env import EXAMPLE_SEED

    env = _env("ClickButton", few_shot=1).unwrapped
    _, info = env.reset(seed=EXAMPLE_SEED)
    examples, _ = env._worked_examples(info["state_digest"])
    probe = _env("ClickButton").unwrapped
    probe.reset(seed=EXAMPLE_SEED)
    assert examples and examples[0][0] != probe.bound.render(probe.task.fields())
