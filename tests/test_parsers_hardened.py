"""Parsers that cannot be fooled: exact names, one action per turn, fences in arguments,
reserved words rejected when the harness is built, and parse time linear in the input."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from harness_gym import Harness, HarnessSpecError, make_env
from harness_gym.core.task import Action
from harness_gym.core.tools import TOOL_STYLES, ActionError, Toolbox
from harness_gym.envs.web.base import WEB_ACTIONS

PARSERS = ("strict", "lenient")


def box(style: str, parser: str = "strict", **kw) -> Toolbox:
    return Toolbox(WEB_ACTIONS, style=style, lenient=parser == "lenient", **kw)


def kind_of(tb: Toolbox, text: str) -> str:
    try:
        tb.parse(text)
    except ActionError as err:
        return err.kind
    return "ok"


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("ｃｌｉｃｋ(ref=3)", "unknown_tool"),  # full-width
        ("𝐜𝐥𝐢𝐜𝐤(ref=3)", "unknown_tool"),  # mathematical bold
        ("click(ｒｅｆ=3)", "extra_argument"),
        ("click(\n  𝐫𝐞𝐟=3)", "extra_argument"),
        ("click(ref=3)", "ok"),
    ],
)
def test_python_names_are_compared_exactly_not_after_normalization(parser: str, text: str, kind: str) -> None:
    assert kind_of(box("python", parser), text) == kind


@pytest.mark.parametrize("style", TOOL_STYLES)
def test_look_alike_digits_are_not_integers(style: str) -> None:
    text = {
        "json": '{"name": "click", "arguments": {"ref": "３"}}',
        "python": "click(ref='３')",
        "xml": "<click><ref>３</ref></click>",
        "command": "click ３",
        "python_positional": "click('３')",
        "bracket": "click [３]",
        "json_flat": '{"action_type": "click", "ref": "３"}',
    }[style]
    for parser in PARSERS:
        assert kind_of(box(style, parser), text) == "wrong_type"


ONE = {
    "json": '{"name": "click", "arguments": {"ref": 1}}',
    "python": "click(ref=1)",
    "xml": "<click><ref>1</ref></click>",
    "command": "click 1",
    "python_positional": "click('1')",
    "bracket": "click [1]",
    "json_flat": '{"action_type": "click", "ref": 1}',
}
TWO = {
    "json": '{"name": "click", "arguments": {"ref": 2}}',
    "python": "click(ref=2)",
    "xml": "<click><ref>2</ref></click>",
    "command": "click 2",
    "python_positional": "click('2')",
    "bracket": "click [2]",
    "json_flat": '{"action_type": "click", "ref": 2}',
}
SHAPES: dict[str, Callable[[str, str], str]] = {
    "newline": lambda a, b: f"{a}\n{b}",
    "semicolon": lambda a, b: f"{a}; {b}",
    "space": lambda a, b: f"{a} {b}",
    "same twice": lambda a, b: f"{a}\n{a}",
    "list": lambda a, b: f"[{a}, {b}]",
    "fences": lambda a, b: f"First:\n```\n{a}\n```\nthen\n```\n{b}\n```",
    "prose": lambda a, b: f"I will do {a} and then {b}.",
}


@pytest.mark.parametrize("style", TOOL_STYLES)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_several_actions_are_their_own_error_under_the_lenient_parser(style: str, shape: str) -> None:
    if style == "command" and shape in ("list", "prose"):
        pytest.skip("a command is a whole line: these shapes are one malformed command")
    text = SHAPES[shape](ONE[style], TWO[style])
    assert kind_of(box(style, "lenient"), text) == "multiple_actions"


@pytest.mark.parametrize("style", TOOL_STYLES)
@pytest.mark.parametrize("shape", ["newline", "semicolon", "space", "same twice", "list"])
def test_several_bare_actions_are_their_own_error_under_the_strict_parser(style: str, shape: str) -> None:
    if style == "command" and shape == "list":
        pytest.skip("a command is a whole line")
    assert kind_of(box(style, "strict"), SHAPES[shape](ONE[style], TWO[style])) == "multiple_actions"


@pytest.mark.parametrize("style", TOOL_STYLES)
def test_multiple_actions_is_recorded_in_info_and_costs_a_step(style: str) -> None:
    env = make_env("ClickButton", Harness(tool_style=style, parser="lenient"))
    env.reset(seed=0)
    _, reward, _, _, info = env.step(SHAPES["newline"](ONE[style], TWO[style]))
    assert info["error_kind"] == "multiple_actions" and info["invalid_actions"] == 1 and reward == 0.0
    assert "exactly one action" in info["last_error"]


def test_one_action_among_prose_and_fences_is_still_found() -> None:
    tb = box("python", "lenient")
    # A prose mention outside the fence does not count once a fence holds an action.
    assert tb.parse("I will use click(ref=2).\n```python\nclick(ref=2)\n```") == Action.of("click", ref=2)
    assert box("command", "lenient").parse("Clicking now.\nclick 3\nThat's all.") == Action.of("click", ref=3)


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize(
    ("style", "text"),
    [
        ("python", 'type(ref=3, text="```click(ref=2)```")'),
        ("python", 'Here: type(ref=3, text="see ```\\nclick(ref=2)\\n```") done'),
        ("json", '{"name": "type", "arguments": {"ref": 3, "text": "```click(ref=2)```"}}'),
        ("json", 'Sure {"name": "type", "arguments": {"ref": 3, "text": "```\\n{\\"name\\": 1}\\n```"}}'),
        ("command", "type 3 '```\nclick 2\n```'"),
        ("xml", "<type><ref>3</ref><text>```&lt;click&gt;x```</text></type>"),
    ],
)
def test_a_fence_inside_a_quoted_argument_is_text_not_the_action(style: str, parser: str, text: str) -> None:
    if parser == "strict" and text.startswith(("Here", "Sure")):
        pytest.skip("prose around the action is for the lenient parser")
    action = box(style, parser).parse(text)
    assert action.name == "type" and "```" in action["text"]


@pytest.mark.parametrize(
    ("factor", "word"), [("rename_tools", "None"), ("rename_tools", "class"), ("rename_args", "True")]
)
def test_python_keywords_as_names_are_rejected_when_the_harness_is_built(factor: str, word: str) -> None:
    old = "click" if factor == "rename_tools" else "ref"
    with pytest.raises(HarnessSpecError, match=f"{word!r}.*reserved word of the 'python' tool style"):
        Harness(tool_style="python", **{factor: {old: word}})
    # Other styles read any identifier as a name, so the same rename works there.
    env = make_env("ClickButton", Harness(tool_style="json", **{factor: {old: word}}))
    env.reset(seed=0)
    assert env.bound.parse(env.oracle_action()) == env.task.oracle()


def test_a_style_change_onto_a_reserved_rename_is_rejected_too() -> None:
    h = Harness(tool_style="json", rename_args={"ref": "None"})
    with pytest.raises(HarnessSpecError, match="reserved word"):
        h.replace(tool_style="python")


# -- parse time is linear in the input --------------------------------------------------

SMALL, LARGE = 10_000, 1_000_000
#: Most time per character the large input may take, relative to the small one. Linear
#: parsers stay near 1 (caches and allocation push it up a few times); a quadratic one
#: is at 100.
LIMIT = 20


def _worst_shapes(style: str) -> dict[str, Callable[[int], str]]:
    """Inputs built to make a naive parser backtrack or rescan: n is the target length."""
    common: dict[str, Callable[[int], str]] = {
        "fence opener": lambda n: "```" + "a" * n,
        "many fences": lambda n: "```\n" * (n // 4),
        "unclosed quotes": lambda n: "'" * n,
        "unclosed double quotes": lambda n: '"\\' * (n // 2),
        "prose": lambda n: "word " * (n // 5),
    }
    per_style: dict[str, dict[str, Callable[[int], str]]] = {
        "json": {
            "open braces": lambda n: "{" * n,
            "open objects": lambda n: '{"a": ' * (n // 6),
            "unterminated argument": lambda n: '{"name": "type", "arguments": {"text": "' + "a" * n,
            "trailing commas": lambda n: '{"a": 1,}, ' * (n // 11),
            "many objects": lambda n: '{"name": "click"} ' * (n // 18),
        },
        "python": {
            "open calls": lambda n: "click(" * (n // 6),
            "open call then quotes": lambda n: "click(ref='" + "a" * n,
            "open parens": lambda n: "(" * n,
            "string concatenation": lambda n: "click(ref=" + "'a' " * (n // 4) + ")",
            "many keywords": lambda n: "click(" + "ref=1, " * (n // 7) + ")",
            "many calls": lambda n: "click(x) " * (n // 9),
        },
        "xml": {
            "open tools": lambda n: "<click>" * (n // 7),
            "open arguments": lambda n: "<click>" + "<ref>" * (n // 5) + "</click>",
            "long body": lambda n: "<click><ref>" + "a" * n,
            "many elements": lambda n: "<click></click> " * (n // 16),
        },
        "command": {
            "open quote": lambda n: "type 3 '" + "a" * n,
            "open quote per line": lambda n: "click '\n" * (n // 8),
            "escaped double quotes": lambda n: 'click "' + '\\"' * (n // 2),
            "many lines": lambda n: "click 1\n" * (n // 8),
            "many words": lambda n: "click " + "a " * (n // 2),
        },
        "python_positional": {
            "open calls": lambda n: "click(" * (n // 6),
            "open call then quotes": lambda n: "click('" + "a" * n,
            "many arguments": lambda n: "click(" + "'1', " * (n // 5) + ")",
            "many calls": lambda n: "click('1') " * (n // 11),
        },
        "bracket": {
            "open brackets": lambda n: "click [" * (n // 7),
            "open bracket per line": lambda n: "click [\n" * (n // 8),
            "long argument": lambda n: "type [3] [" + "a" * n,
            "many brackets": lambda n: "click " + "[a] " * (n // 4),
            "many lines": lambda n: "click [1]\n" * (n // 10),
        },
        "json_flat": {
            "open braces": lambda n: "{" * n,
            "unterminated argument": lambda n: '{"action_type": "type", "text": "' + "a" * n,
            "trailing commas": lambda n: '{"a": 1,}, ' * (n // 11),
            "many objects": lambda n: '{"action_type": "click"} ' * (n // 25),
        },
    }
    return {**common, **per_style[style]}


def _seconds(tb: Toolbox, text: str, repeats: int) -> float:
    """CPU seconds of this thread for one parse (the least of ``repeats``): time the thread
    spends waiting for a core on a loaded machine is not counted, as wall clock counts it
    (at load ~40 the wall-clock version failed five cases with no defect)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        try:
            tb.parse(text)
        except ActionError:
            pass
        best = min(best, time.thread_time() - start)
    return best


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("style", TOOL_STYLES)
def test_parse_time_is_linear_in_the_input(style: str, parser: str) -> None:
    """100x the input may take ~100x the time (at most LIMIT x that); a quadratic parser takes 10,000x."""
    tb = box(style, parser, max_chars=2 * LARGE)
    slow = []
    for name, make in _worst_shapes(style).items():
        small, large = make(SMALL), make(LARGE)
        t_small = max(_seconds(tb, small, 5), 2e-4)  # floor: timer resolution and cache noise
        t_large = _seconds(tb, large, 1)
        ratio = (t_large / t_small) / (len(large) / len(small))
        if ratio > LIMIT:  # a busy machine: measure again before calling it slow
            t_large = min(t_large, _seconds(tb, large, 1))
            ratio = (t_large / t_small) / (len(large) / len(small))
        if ratio > LIMIT:
            slow.append(f"{name}: {t_small * 1e3:.2f} ms -> {t_large * 1e3:.0f} ms (x{ratio:.1f} per char)")
    assert not slow, slow
