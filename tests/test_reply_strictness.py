"""One action per reply and one value per key, in every style and reply convention: two
actions in one reply are ``multiple_actions`` (never the first run silently, never the second
swallowed into an argument), and a JSON key given twice is rejected (never last-one-wins)."""

from __future__ import annotations

import itertools
import json
import xml.dom.minidom

import pytest

from harness_gym import Harness, make_env
from harness_gym.core.task import Action
from harness_gym.core.tools import TOOL_STYLES, ActionError, Toolbox
from harness_gym.envs.terminal.replies import read_reply, write_reply
from harness_gym.envs.terminal.task import TERMINAL_ACTIONS
from harness_gym.envs.web.base import WEB_ACTIONS

PARSERS = ("strict", "lenient")
SEPARATORS = ("\n", " ", "; ", "\n\n", "\r\n")

WEB = [
    Action.of("type", ref=2, text="Iris"),
    Action.of("click", ref=3),
    Action.of("press", key="Enter"),
    Action.of("select", ref=4, option="Cairo"),
    Action.of("type", ref=5, text="two words"),
]
TERMINAL = [
    Action.of("run", command="ls -la"),
    Action.of("run", command="rm -rf /app/x"),
    Action.of("read_file", path="notes.txt"),
    Action.of("write_file", path="a.txt", content="hello"),
]


def _kind(tb: Toolbox, text: str) -> str:
    try:
        tb.parse(text)
    except ActionError as err:
        return err.kind
    return "ok"


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("style", TOOL_STYLES)
@pytest.mark.parametrize(
    ("specs", "actions"), [(WEB_ACTIONS, WEB), (TERMINAL_ACTIONS, TERMINAL)], ids=["web", "terminal"]
)
def test_two_actions_in_one_reply_are_multiple_actions(specs, actions, style: str, parser: str) -> None:  # type: ignore[no-untyped-def]
    tb = Toolbox(specs, style=style, lenient=parser == "lenient")
    for a, b in itertools.permutations(actions, 2):
        first, second = tb.format(a), tb.format(b)
        assert tb.parse(first) == a and tb.parse(second) == b
        for sep in SEPARATORS:
            text = first + sep + second
            assert _kind(tb, text) == "multiple_actions", (text, _kind(tb, text))


@pytest.mark.parametrize("parser", PARSERS)
def test_a_bracket_last_argument_never_swallows_an_action(parser: str) -> None:
    tb = Toolbox(WEB_ACTIONS, style="bracket", lenient=parser == "lenient")
    assert _kind(tb, "type [2] [Iris]\nclick [3]") == "multiple_actions"
    assert _kind(tb, "type [2] [Iris] press [Enter]") == "multiple_actions"
    # A "]" inside the last argument is still text when no action follows it.
    assert tb.parse("type [2] [a]b]") == Action.of("type", ref=2, text="a]b")
    assert tb.parse("type [2] [see [3] here]") == Action.of("type", ref=2, text="see [3] here")


def test_under_the_terminal_family_the_second_command_never_runs_inside_the_first() -> None:
    tb = Toolbox(TERMINAL_ACTIONS, style="bracket")
    assert _kind(tb, "run [ls]\nrun [rm -rf /app]") == "multiple_actions"
    assert tb.parse("run [test [ -f x ] && echo yes]") == Action.of(
        "run", command="test [ -f x ] && echo yes"
    )


def _terminus(command: str) -> str:
    return write_reply("terminus_json", Action.of("run", command=command))


@pytest.mark.parametrize("lenient", [False, True])
@pytest.mark.parametrize("sep", ["\n", " ", "", "\n\n"])
def test_terminus_two_json_objects_are_multiple_actions(lenient: bool, sep: str) -> None:
    text = _terminus("ls") + sep + _terminus("rm -rf /app")
    with pytest.raises(ActionError) as err:
        read_reply("terminus_json", text, lenient)
    assert err.value.kind == "multiple_actions"
    if lenient:  # prose around two objects: still two
        with pytest.raises(ActionError, match="ONE object"):
            read_reply("terminus_json", f"Plan: {text} done", lenient)
    assert read_reply("terminus_json", _terminus("ls"), lenient) == Action.of("run", command="ls")


# -- keys given twice --------------------------------------------------------------------

DUPLICATES = {
    "json": [
        '{"name": "select", "name": "click", "arguments": {"ref": 3}}',
        '{"name": "click", "arguments": {"ref": 3, "ref": 4}}',
        '{"name": "click", "arguments": {"ref": 3}, "arguments": {"ref": 4}}',
    ],
    "json_flat": [
        '{"action_type": "select", "action_type": "click", "ref": 3}',
        '{"action_type": "click", "ref": 3, "ref": 4}',
    ],
}


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("style", sorted(DUPLICATES))
def test_a_json_key_given_twice_is_rejected(style: str, parser: str) -> None:
    tb = Toolbox(WEB_ACTIONS, style=style, lenient=parser == "lenient")
    for text in DUPLICATES[style]:
        with pytest.raises(ActionError, match="given twice") as err:
            tb.parse(text)
        assert err.value.kind == "malformed"


def test_lenient_json_arguments_as_a_string_with_a_key_twice_are_rejected() -> None:
    tb = Toolbox(WEB_ACTIONS, style="json", lenient=True)
    with pytest.raises(ActionError, match="given twice"):
        tb.parse(json.dumps({"name": "click", "arguments": '{"ref": 3, "ref": 4}'}))


@pytest.mark.parametrize("style", TOOL_STYLES)
def test_a_native_call_with_a_key_twice_is_rejected_in_every_style(style: str) -> None:
    tb = Toolbox(WEB_ACTIONS, style=style)
    text = tb.write_call("click", '{"ref": 3, "ref": 4}')
    assert _kind(tb, text) != "ok", text
    assert tb.parse(tb.write_call("click", '{"ref": 3}')) == Action.of("click", ref=3)


def test_a_constrained_call_object_with_a_key_twice_is_not_a_call() -> None:
    from harness_gym.llm.chat import call_from_json

    assert call_from_json('{"name": "select", "name": "click", "arguments": {"ref": 3}}') is None
    call = call_from_json('{"name": "click", "arguments": {"ref": 3.0}}')
    assert call is not None and json.loads(call.arguments) == {"ref": 3}


@pytest.mark.parametrize("lenient", [False, True])
def test_terminus_commands_given_twice_is_rejected(lenient: bool) -> None:
    text = (
        '{"analysis": "", "plan": "", "commands": [{"keystrokes": "ls\\n"}], '
        '"commands": [{"keystrokes": "rm -rf /app\\n"}], "task_complete": false}'
    )
    with pytest.raises(ActionError, match="given twice") as err:
        read_reply("terminus_json", text, lenient)
    assert err.value.kind == "malformed"


@pytest.mark.parametrize("style", ["json", "json_flat"])
def test_integral_json_numbers_are_integers_and_others_are_not(style: str) -> None:
    tb = Toolbox(WEB_ACTIONS, style=style)
    key = (
        '"name": "click", "arguments": {"ref": %s}'
        if style == "json"
        else '"action_type": "click", "ref": %s'
    )
    for number in ("2", "2.0", "2e0", "20e-1", "-0.0"):
        assert tb.parse("{" + key % number + "}") == Action.of("click", ref=int(float(number)))
    for number in ("2.5", "1e19", "true", '"2"', "NaN", "Infinity", "1e999999999"):
        with pytest.raises(ActionError) as err:
            tb.parse("{" + key % number + "}")
        assert err.value.kind == "wrong_type", number


# -- well-formed XML observations ------------------------------------------------------------


@pytest.mark.parametrize("char", ["\ufffe", "\uffff", "\x00", "\x0b", "\ud800", "\x1f"])
def test_xml_observations_stay_well_formed_whatever_a_field_holds(char: str) -> None:
    from harness_gym.core.formats import render_xml

    text = render_xml([("typed", f"a{char}b"), (f"k{char}", {f"n{char}": [char]})])
    xml.dom.minidom.parseString(text.encode("utf-8"))  # raises if not well formed
    assert f"\\u{ord(char):04x}" in text


def test_typed_u_fffe_keeps_the_xml_observation_well_formed() -> None:
    env = make_env("EnterText", Harness(obs_format="xml"))
    env.reset(seed=0)
    for action in env.legal_actions():
        if action.name == "type":
            obs, *_ = env.step(env.format_action(Action.of("type", ref=action["ref"], text="x\ufffe\uffff")))
            xml.dom.minidom.parseString(obs.encode("utf-8"))
            return
    pytest.skip("EnterText listed no type action")


@pytest.mark.parametrize("style", TOOL_STYLES)
def test_two_native_tool_calls_in_one_reply_are_multiple_actions(style: str) -> None:
    from harness_gym.llm.agent import LLMAgent
    from harness_gym.llm.types import Completion, ToolCall

    env = make_env("ClickButton", Harness(tool_style=style, tool_channel="native"))
    _, info = env.reset(seed=0)
    first, second = env.legal_actions()[:2]
    calls = [ToolCall(*env.bound.toolbox.call(a)) for a in (first, second)]
    calls = [ToolCall(c.name, json.dumps(c.arguments)) for c in calls]
    agent = LLMAgent(env, backend=None, cache=None)  # type: ignore[arg-type]
    agent.reset(seed=0)
    agent.request(*env.reset(seed=0))
    text = agent.receive(Completion(text="", tool_calls=calls))
    assert _kind(env.bound.toolbox, text) == "multiple_actions", text
    agent.request(*env.reset(seed=0))
    assert env.bound.parse(agent.receive(Completion(text="", tool_calls=calls[:1]))) == first


def test_a_hermes_tool_call_with_a_key_twice_is_not_a_call() -> None:
    from harness_gym.llm.transformers_backend import hermes_tool_calls

    _, calls = hermes_tool_calls(
        '<tool_call>{"name": "select", "name": "click", "arguments": {}}</tool_call>'
    )
    assert calls == []
    _, calls = hermes_tool_calls('<tool_call>{"name": "click", "arguments": {"ref": 2.0}}</tool_call>')
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("click", {"ref": 2})]
