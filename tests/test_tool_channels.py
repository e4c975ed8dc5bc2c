"""Every tool style can act on every channel under every parser: the oracle played through
the text path (the reply written in the style) and through the native path (a function call
written back in the style, as the LLM agent does, including the constrained call object and
the worked examples) succeeds, and the ceiling and the checker see the same."""

from __future__ import annotations

import json

import pytest

from harness_gym import Harness, make_env
from harness_gym.core.presets import get_preset
from harness_gym.core.tools import TOOL_STYLES
from harness_gym.envs.web.tasks import WEB_TASKS
from harness_gym.llm.chat import call_from_json

TASKS = [t.__name__ for t in WEB_TASKS]
PARSERS = ("strict", "lenient")
CHANNELS = ("text", "native")


def _reply(env, action, path: str) -> str:  # type: ignore[no-untyped-def]
    bound = env.bound
    if path == "text":
        return bound.toolbox.format(action)
    name, arguments = bound.toolbox.call(action)
    if path == "native":
        return bound.write_call(name, json.dumps(arguments))
    # "constrained": the call object a grammar-constrained native reply is, read as the agent does
    call = call_from_json(bound.example_reply(action))
    assert call is not None
    return bound.write_call(call.name, call.arguments)


def _play(harness: Harness, task: str, seed: int, path: str) -> dict:  # type: ignore[type-arg]
    env = make_env(task, harness)
    env.reset(seed=seed)
    info: dict = {}  # type: ignore[type-arg]
    for _ in range(env.budget):
        action = env.task.oracle()
        assert action in env.legal_actions(), f"{harness.tool_style}: oracle's {action} not legal"
        _, _, terminated, truncated, info = env.step(_reply(env, action, path))
        assert info["invalid_actions"] == 0, info.get("error")
        if terminated or truncated:
            break
    return info


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("style", TOOL_STYLES)
def test_the_oracle_acts_through_every_style_channel_and_parser(
    style: str, channel: str, parser: str
) -> None:
    harness = Harness(tool_style=style, tool_channel=channel, parser=parser)
    paths = ("text",) if channel == "text" else ("text", "native", "constrained")
    for k, task in enumerate(TASKS):
        for path in paths:
            assert _play(harness, task, seed=k, path=path)["success"], (task, path)


@pytest.mark.parametrize("preset", ["WebArenaStyle", "BrowserGymStyle", "MiniWoBStyle"])
def test_convention_presets_act_on_the_native_channel(preset: str) -> None:
    harness = get_preset(preset).replace(tool_channel="native")
    for k, task in enumerate(TASKS[:6]):
        assert _play(harness, task, seed=k, path="native")["success"], task


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("style", TOOL_STYLES)
def test_worked_example_replies_parse_to_the_oracle_action_on_every_channel(style: str, channel: str) -> None:
    env = make_env("LoginUser", Harness(tool_style=style, tool_channel=channel, few_shot=2))
    env.reset(seed=3)
    examples = env.examples
    assert len(examples) == 2
    for (_, action), example in zip(env._episode_examples, examples):
        reply = example["reply"]
        if channel == "native":
            call = call_from_json(reply)
            assert call is not None
            reply = env.bound.write_call(call.name, call.arguments)
        assert env.bound.parse(reply) == action


def test_a_native_channel_that_cannot_act_has_no_legal_actions() -> None:
    """The ceiling and check read expressibility through the native path on the native
    channel: a write-back that the parser rejects would make every action inexpressible."""
    env = make_env("ClickButton", Harness(tool_style="bracket", tool_channel="native"))
    env.reset(seed=0)
    bound = env.bound
    assert env.legal_actions() and all(bound.round_trip_error(a) is None for a in env.legal_actions())
    broken = type(bound.toolbox).write_call
    try:
        type(bound.toolbox).write_call = lambda self, name, arguments: f"{name} 2"  # type: ignore[method-assign]
        bound._written.clear()
        bound._known.clear()
        assert env.legal_actions() == []
    finally:
        type(bound.toolbox).write_call = broken  # type: ignore[method-assign]


def test_check_fails_when_the_native_write_back_cannot_act(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_gym.core.checker import check_harness
    from harness_gym.core.tools import Toolbox

    harness = Harness(tool_style="bracket", tool_channel="native")
    assert check_harness(harness, "ClickButton", seeds=range(2), raise_on_failure=False).ok
    monkeypatch.setattr(Toolbox, "write_call", lambda self, name, arguments: f"{name} 2")
    report = check_harness(harness, "ClickButton", seeds=range(2), raise_on_failure=False)
    assert not report.ok
