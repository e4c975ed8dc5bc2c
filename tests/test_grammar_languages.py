"""Action grammars say what their parsers read: every legal reply matches its step's grammar
(exact and per-tool alike), and every string a grammar admits parses, drawn with hypothesis
from the regular expression (``from_regex(..., fullmatch=True)``) or the JSON schema
(a small generator for the schema shapes :mod:`harness_gym.core.tools.toolbox_grammar` writes; the
``hypothesis-jsonschema`` package does not run with the installed hypothesis), in every tool
style, on both channels."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness_gym import Harness, make_env
from harness_gym.core.task import Action
from harness_gym.core.tools import TOOL_STYLES, ActionError, Toolbox, action_grammar
from harness_gym.envs.terminal.task import TERMINAL_ACTIONS
from harness_gym.envs.web.base import WEB_ACTIONS
from harness_gym.envs.web.tasks import WEB_TASKS

CHANNELS = ("text", "native")
DRAWS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


def _legal(style: str, channel: str) -> list[tuple[object, list[Action]]]:
    """(bound harness, legal actions) over every web task and a few seeds and steps."""
    out = []
    for task in WEB_TASKS:
        env = make_env(task.__name__, Harness(tool_style=style, tool_channel=channel))
        for seed in range(4):
            env.reset(seed=seed)
            for _ in range(3):
                out.append((env.bound, env.legal_actions()))
                _, _, done, truncated, _ = env.step(env.oracle_action())
                if done or truncated:
                    break
    return out


def _reply(bound, action: Action) -> str:  # type: ignore[no-untyped-def]
    return bound.example_reply(action)  # the text reply, or the native call object


def _admits(grammar, text: str) -> bool:  # type: ignore[no-untyped-def]
    if grammar.kind == "regex":
        return re.fullmatch(grammar.value, text) is not None
    return jsonschema.Draft202012Validator(grammar.value).is_valid(json.loads(text))


def _parse(bound, native: bool, text: str) -> Action:  # type: ignore[no-untyped-def]
    if native:
        call = json.loads(text)
        text = bound.write_call(call["name"], json.dumps(call["arguments"]))
    return bound.parse(text)


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("style", TOOL_STYLES)
def test_every_legal_reply_matches_its_exact_and_its_per_tool_grammar(style: str, channel: str) -> None:
    for bound, actions in _legal(style, channel):
        native = channel == "native"
        exact = action_grammar(bound.toolbox, actions, native=native)
        per_tool = action_grammar(bound.toolbox, actions, native=native, max_alternatives=0)
        assert exact.exact == bool(actions) and not per_tool.exact
        for action in actions:
            reply = _reply(bound, action)
            assert _admits(exact, reply), reply
            assert _admits(per_tool, reply), (reply, per_tool.value)
            assert _parse(bound, native, reply) == action


def _toolbox(style: str, family: str) -> Toolbox:
    return Toolbox(WEB_ACTIONS if family == "web" else TERMINAL_ACTIONS, style=style)


REGEX_STYLES = [s for s in TOOL_STYLES if s not in ("json", "json_flat")]


@pytest.mark.parametrize("family", ["web", "terminal"])
@pytest.mark.parametrize("style", REGEX_STYLES)
def test_every_string_a_per_tool_regex_admits_parses(style: str, family: str) -> None:
    tb = _toolbox(style, family)
    grammar = action_grammar(tb, [], max_string=12)
    assert grammar.kind == "regex" and not grammar.exact

    @DRAWS
    @given(st.from_regex(grammar.value, fullmatch=True))
    def admitted_parses(text: str) -> None:
        try:
            tb.parse(text)
        except ActionError as err:  # pragma: no cover - the failure hypothesis reports
            raise AssertionError(f"{grammar.value} admits {text!r}, which fails: {err.kind}: {err}") from None

    admitted_parses()


def _schema_cases() -> list[tuple[str, str, bool]]:
    cases = [(s, "text", False) for s in ("json", "json_flat")]
    return cases + [(s, "native", per) for s in TOOL_STYLES for per in (False, True)]


def from_schema(schema: dict) -> st.SearchStrategy:  # type: ignore[type-arg]
    """Values of the JSON schemas action grammars write (anyOf, const, objects whose
    properties are all required, bounded integers, bounded strings with a pattern)."""
    if "anyOf" in schema:
        return st.one_of([from_schema(s) for s in schema["anyOf"]])
    if "const" in schema:
        const = schema["const"]
        if isinstance(const, int) and not isinstance(const, bool):
            return st.sampled_from([const, float(const)])  # JSON Schema: 2.0 is the integer 2
        return st.just(const)
    kind = schema["type"]
    if kind == "object":
        assert (
            set(schema["required"]) == set(schema["properties"]) and schema["additionalProperties"] is False
        )
        return st.fixed_dictionaries({k: from_schema(v) for k, v in schema["properties"].items()})
    if kind == "integer":
        whole = st.integers(schema.get("minimum"), schema.get("maximum"))
        return whole | whole.filter(lambda n: abs(n) < 2**53).map(float)
    assert kind == "string"
    size = schema.get("maxLength", 40)
    if "pattern" in schema:
        assert schema["pattern"] == "^[^\\]\\n]*$", schema["pattern"]
        return st.text(st.characters(exclude_characters="]\n"), max_size=size)
    return st.text(max_size=size)


@pytest.mark.parametrize(("style", "channel", "per_tool"), _schema_cases())
def test_every_value_a_json_schema_grammar_admits_parses(style: str, channel: str, per_tool: bool) -> None:
    env = make_env("EnterText", Harness(tool_style=style, tool_channel=channel))
    env.reset(seed=1)
    bound, native = env.bound, channel == "native"
    grammar = action_grammar(
        bound.toolbox, env.legal_actions(), native=native, max_alternatives=0 if per_tool else 256
    )
    assert grammar.kind == "json_schema"

    validator = jsonschema.Draft202012Validator(grammar.value)

    @DRAWS
    @given(from_schema(grammar.value))
    def admitted_parses(value: object) -> None:
        assert validator.is_valid(value)  # the generator stays inside the language
        text = json.dumps(value, ensure_ascii=False)
        try:
            _parse(bound, native, text)
        except ActionError as err:  # pragma: no cover - the failure hypothesis reports
            raise AssertionError(f"the schema admits {text}, which fails: {err.kind}: {err}") from None

    admitted_parses()


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("form", ["{}.0", "{}e0", "{}0E-1"])
def test_integers_written_as_integral_json_numbers_parse(channel: str, form: str) -> None:
    """JSON Schema counts 2.0 as the integer 2, so schema grammars (exact ``const`` and
    per-tool ``integer`` alike) admit it; the parsers read it as 2."""
    style = "json" if channel == "text" else "bracket"
    env = make_env("ClickButton", Harness(tool_style=style, tool_channel=channel))
    env.reset(seed=0)
    action = next(a for a in env.legal_actions() if a.name == "click")
    name, arguments = env.bound.toolbox.call(action)
    ((arg, ref),) = arguments.items()
    text = json.dumps({"name": name, "arguments": {arg: 0}}).replace(": 0}", f": {form.format(ref)}}}")
    for grammar in (env.action_grammar(), action_grammar(env.bound.toolbox, [], native=channel == "native")):
        assert _admits(grammar, text), text
    assert _parse(env.bound, channel == "native", text) == action


@pytest.mark.parametrize(
    ("style", "text", "admitted"),
    [
        ("command", "select 3 Cairo", True),
        ("command", "type 3 'two words'", True),
        ("command", "type 3 'it'\"'\"'s'", True),
        ("command", "type 3 two words", False),
        ("python", "click(ref=01)", False),
        ("python", "type(ref=1, text='\\N')", False),
        ("python", "type(ref=1, text='a\rb')", False),
        ("python", "type(ref=1, text='a\x00b')", False),
        ("python", "type(ref=1, text='\\q')", False),
        ("python", 'type(ref=1, text="it\'s")', True),
        ("python", "type(ref=-0, text='\\x00\\u2028')", True),
        ("python_positional", "click('12')", True),
        ("python_positional", "click('x')", False),
        ("bracket", "type [2] [Iris]\nclick [3]", False),
        ("xml", "<type><ref>1</ref><text>a &amp; b</text></type>", True),
        ("xml", "<type><ref>1</ref><text>a & b</text></type>", False),
    ],
)
def test_per_tool_regexes_on_the_named_cases(style: str, text: str, admitted: bool) -> None:
    tb = _toolbox(style, "web")
    grammar = action_grammar(tb, [])
    assert (re.fullmatch(grammar.value, text) is not None) == admitted
    if admitted:
        tb.parse(text)


def test_a_terminal_reply_grammar_after_the_episode_is_not_an_empty_exact_pattern() -> None:
    from harness_gym.envs.terminal.options import TerminalBoundHarness, TerminalOptions

    for reply, completion in (("bash_block", "sentinel"), ("terminus_json", "flag")):
        options = TerminalOptions(reply=reply, completion=completion)
        bound = TerminalBoundHarness(Harness(), ("instruction",), TERMINAL_ACTIONS, options)
        grammar = bound.grammar([])
        assert grammar.value and not grammar.exact and grammar.alternatives == 0
        run = Action.of("run", command="ls")
        listed = bound.grammar([run])
        assert listed.exact and re.fullmatch(listed.value, bound.format_action(run))


def test_the_xml_grammar_admits_no_character_reference_the_parser_refuses() -> None:
    """Every code point's hex reference is admitted but the surrogates' (the parser refuses a
    lone surrogate), and nothing past U+10FFFF; decimal references stop below the surrogates."""
    import re

    from harness_gym.core.tools.xml_style import _XML_CHAR

    char = re.compile(_XML_CHAR)
    for code in [*range(0xD700, 0xE100), *range(0, 0x110000, 4093), 0xFFFF, 0x10000, 0x10FFFF]:
        assert bool(char.fullmatch(f"&#x{code:x};")) == (not 0xD800 <= code <= 0xDFFF), hex(code)
        assert bool(char.fullmatch(f"&#X{code:X};".replace("&#X", "&#x"))) == (not 0xD800 <= code <= 0xDFFF)
    for refused in ("&#x110000;", "&#x00D800;", "&#55296;", "&#1114112;"):
        assert not char.fullmatch(refused), refused
    assert char.fullmatch("&#9999;") and char.fullmatch("&amp;") and char.fullmatch("a")
