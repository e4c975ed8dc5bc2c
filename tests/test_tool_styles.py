"""One Style protocol for built-in and plugin tool styles.

Every built-in style is a module of ``harness_gym.core.tools`` registered through
``register_tool_style`` (as a plugin's is); nothing outside the style modules dispatches on a
style's name; a style that lacks a part is refused or raises a clear error instead of
writing another style's syntax; and a plugin style is first-class: the lenient parser finds
it inside prose, the strict parser counts several of its actions, and its grammar past the
exact-alternatives limit is the style's own pattern, not any text.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness_gym import Harness, make_env
from harness_gym.core import plugins
from harness_gym.core.task import Action
from harness_gym.core.tools import (
    _ALL_STYLES,
    STYLES,
    TOOL_STYLES,
    ActionError,
    Style,
    StyleNotImplemented,
    Toolbox,
    ToolStyle,
    action_grammar,
    get_style,
    register_tool_style,
)
from harness_gym.envs.web.base import WEB_ACTIONS

PACKAGE = Path(__file__).resolve().parents[1] / "harness_gym"
DEMO_SRC = Path(__file__).parent / "plugins" / "hg_demo_plugin"


@pytest.fixture
def registry() -> Iterator[None]:
    """Undo the styles a test registers."""
    saved = dict(STYLES), dict(_ALL_STYLES)
    yield
    for reg, before in zip((STYLES, _ALL_STYLES), saved, strict=True):
        reg.clear()
        reg.update(before)


@pytest.fixture
def slash(monkeypatch: pytest.MonkeyPatch, registry: None) -> ToolStyle:
    monkeypatch.syspath_prepend(str(DEMO_SRC))
    from hg_demo_plugin.styles import SLASH

    register_tool_style(SLASH)
    return SLASH


@pytest.mark.parametrize("name", TOOL_STYLES)
def test_each_built_in_style_is_one_module_registered_as_plugins_are(name: str) -> None:
    style = get_style(name)
    assert isinstance(style, Style) and style.name == name
    assert type(style).__module__ == f"harness_gym.core.tools.{name}_style"
    assert style.missing() == []
    has_pattern = type(style).tool_pattern is not Style.tool_pattern
    assert has_pattern or type(style).grammar is not Style.grammar, f"{name} gives no per-tool grammar"


def _names_a_style(node: ast.AST) -> bool:
    """Whether an expression reads a style (``style``, ``self.style``, ``harness.tool_style``)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "style" in name and "delegation" not in name


def _style_comparisons(tree: ast.AST) -> Iterator[ast.Compare]:
    """Comparisons of a style with a built-in style's name (``style == "xml"``,
    ``tool_style in ("json", "json_flat")``)."""
    names = set(TOOL_STYLES)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        if not any(_names_a_style(side) for side in sides):
            continue
        for side in sides:
            values = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            if any(isinstance(v, ast.Constant) and v.value in names for v in values):
                yield node
                break


def test_the_dispatch_finder_finds_dispatch() -> None:
    tree = ast.parse('if self.style == "xml" or tool_style in ("json", "bracket") or x == "json": pass')
    assert len(list(_style_comparisons(tree))) == 2


def test_no_module_outside_the_style_modules_dispatches_on_a_style_name() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "tools" and path.stem.endswith("_style"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(PACKAGE)}:{n.lineno}" for n in _style_comparisons(tree)]
    assert found == []


class Half(Style):
    """A style that writes but has no reader and no span finder."""

    name = "half"
    hint = "Write ~tool args."

    def write(self, tool: str, pairs: Sequence[tuple[str, Any]]) -> str:
        return "~" + tool + "".join(f" {v}" for _, v in pairs)


class Tilde(Half):
    """Writes, reads and finds; no write_call and no per-tool grammar of its own."""

    name = "tilde"

    def read(self, toolbox: Toolbox, text: str) -> Action:
        if not text.startswith("~"):
            raise ActionError("malformed", "a tilde action starts with ~")
        name, *values = text[1:].split(" ")
        tool = toolbox.tool_named(name)
        if len(values) > len(tool.arg_names):
            raise ActionError("extra_argument", f"{name} takes {len(tool.arg_names)} argument(s)")
        return toolbox.build(tool, dict(zip(tool.arg_names, values)), from_text=True)

    def spans(self, text: str, tools: Any) -> list[tuple[int, int]]:
        return [(m.start(), m.end()) for m in re.finditer(r"~\S+( [^ \n~]+)*", text)]


def test_a_style_missing_a_part_is_refused_when_registered(registry: None) -> None:
    with pytest.raises(TypeError, match="'half' does not implement read, spans: override them"):
        register_tool_style(Half())
    assert "half" not in _ALL_STYLES
    with pytest.raises(TypeError, match="takes a ToolStyle"):
        register_tool_style("slash")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'xml' is a built-in level; choose another name"):
        register_tool_style(type("Again", (Tilde,), {"name": "xml"})())
    with pytest.raises(ValueError, match="unknown tool style 'nope'"):
        Toolbox(WEB_ACTIONS, style="nope")


def test_a_style_without_a_part_never_falls_back_to_command_syntax(registry: None) -> None:
    register_tool_style(Tilde())
    box = Toolbox(WEB_ACTIONS, style="tilde", lenient=True)
    click = Action.of("click", ref=3)
    assert box.format(click) == "~click 3" and box.parse("~click 3") == click
    # A native call is written in the style's own syntax (its write), not as a command line.
    written = box.write_call("click", '{"ref": 3}')
    assert written == "~click 3" and box.parse(written) == click
    assert box.parse("I would say\n~click 3\nthen stop") == click
    with pytest.raises(ActionError) as err:
        box.parse("~click 3\n~click 4")
    assert err.value.kind == "multiple_actions"
    exact = action_grammar(box, [click], max_alternatives=4)
    assert exact.exact and re.fullmatch(exact.value, "~click 3")
    with pytest.raises(StyleNotImplemented, match="'tilde' does not implement a per-tool grammar"):
        action_grammar(box, [click, Action.of("click", ref=4)], max_alternatives=1)


def test_a_plugin_style_is_found_inside_prose_by_the_lenient_parser(slash: ToolStyle) -> None:
    lenient = Toolbox(WEB_ACTIONS, style="slash", lenient=True)
    strict = Toolbox(WEB_ACTIONS, style="slash")
    click = Action.of("click", ref=3)
    for reply in (
        "Sure. The button is element 3, so:\n/click ref=3\nThat should do it.",
        "```\n$ /click ref=3\n```",
        "Plan: press it.\n`/click ref=3`",
    ):
        assert lenient.parse(reply) == click
        with pytest.raises(ActionError) as err:
            strict.parse(reply)  # strict forgives no prose
        assert err.value.kind == "malformed"
    for parser in (lenient, strict):  # two actions are two actions, under both parsers
        with pytest.raises(ActionError) as err:
            parser.parse("/click ref=3\n/click ref=4")
        assert err.value.kind == "multiple_actions"
    with pytest.raises(ActionError) as err:
        lenient.parse("First:\n/click ref=3\nthen:\n/click ref=4")
    assert err.value.kind == "multiple_actions"
    with pytest.raises(ActionError) as err:  # the most specific error of a named tool
        lenient.parse('Let me think.\n/click ref="x"\nok')
    assert err.value.kind == "wrong_type"
    # Inside fences, only the fenced action counts.
    assert lenient.parse("Not /click ref=9 here:\n```\n/click ref=3\n```") == click


def test_a_plugin_finder_gives_the_spans_and_a_broken_one_gives_none(
    slash: ToolStyle, registry: None
) -> None:
    def bracketed(text: str, names: Sequence[str]) -> list[tuple[int, int]]:
        return [(m.start(1), m.end(1)) for m in re.finditer(r"<<(.*?)>>", text)]

    def broken(text: str, names: Sequence[str]) -> list[tuple[int, int]]:
        raise RuntimeError("finder bug")

    register_tool_style(ToolStyle("angle", slash.write, slash.read, "x", find=bracketed))
    register_tool_style(ToolStyle("fragile", slash.write, slash.read, "x", find=broken))
    box = Toolbox(WEB_ACTIONS, style="angle", lenient=True)
    assert box.parse("so: <</click ref=3>> ok") == Action.of("click", ref=3)
    with pytest.raises(ActionError) as err:
        Toolbox(WEB_ACTIONS, style="fragile", lenient=True).parse("so:\n/click ref=3\nok")
    assert err.value.kind == "malformed"


DRAWS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _slash_env() -> Any:
    env = make_env("EnterText", Harness(tool_style="slash"))
    env.reset(seed=0)
    return env


def test_a_plugin_grammar_past_the_limit_is_the_styles_pattern(slash: ToolStyle) -> None:
    env = _slash_env()
    legal = env.legal_actions()
    box = env.bound.toolbox
    grammar = action_grammar(box, legal, max_alternatives=1)
    assert grammar.kind == "regex" and not grammar.exact
    assert "[\\s\\S]" not in grammar.value  # not "any text"
    for action in legal:
        assert re.fullmatch(grammar.value, box.format(action)), box.format(action)
    for text in ("click 3", "/nosuch ref=1", '/click ref="3"', "/click ref=3 extra=1", "anything at all"):
        assert re.fullmatch(grammar.value, text) is None, text


@DRAWS
@given(data=st.data())
def test_every_reply_a_plugin_grammar_admits_parses(data: st.DataObject) -> None:
    saved = dict(STYLES), dict(_ALL_STYLES)
    import sys

    sys.path.insert(0, str(DEMO_SRC))
    try:
        from hg_demo_plugin.styles import SLASH

        register_tool_style(SLASH)
        env = _slash_env()
        box = env.bound.toolbox
        grammar = action_grammar(box, env.legal_actions(), max_alternatives=1, max_string=12)
        text = data.draw(st.from_regex(grammar.value, fullmatch=True))
        try:
            box.parse(text)
        except ActionError as err:
            assert err.kind not in ("malformed", "unknown_tool", "missing_argument", "extra_argument"), text
    finally:
        sys.path.remove(str(DEMO_SRC))
        for reg, before in zip((STYLES, _ALL_STYLES), saved, strict=True):
            reg.clear()
            reg.update(before)


def test_a_plugin_style_without_a_pattern_says_what_to_give(slash: ToolStyle) -> None:
    register_tool_style(ToolStyle("bare_slash", slash.write, slash.read, slash.hint))
    env = make_env("EnterText", Harness(tool_style="bare_slash"))
    env.reset(seed=0)
    assert env.action_grammar().exact  # few legal actions: listed one by one
    with pytest.raises(StyleNotImplemented, match=r"ToolStyle\(pattern=\.\.\.\).*max_alternatives"):
        action_grammar(env.bound.toolbox, env.legal_actions(), max_alternatives=1)


def test_a_style_object_is_a_plugin_entry_point_too(registry: None) -> None:
    plugins._loader("tool_styles")("tilde", Tilde())
    assert get_style("tilde").name == "tilde" and STYLES["tilde"].name == "tilde"
    with pytest.raises(plugins.PluginError, match="names the tool style 'tilde'"):
        plugins._loader("tool_styles")("other", Tilde())
    with pytest.raises(plugins.PluginError, match=r"must name a harness_gym.core.tools.ToolStyle \(or a"):
        plugins._loader("tool_styles")("thing", object())


@pytest.mark.parametrize("name", [*TOOL_STYLES, "slash"])
def test_a_toolbox_pickles_and_copies_with_its_style_by_name(name: str, slash: ToolStyle) -> None:
    import copy
    import pickle

    box = Toolbox(WEB_ACTIONS, style=name, naming="synonyms")
    text = box.format(Action.of("type", ref=2, text='it\'s "x"'))
    for other in (pickle.loads(pickle.dumps(box)), copy.deepcopy(box)):
        assert other.syntax is box.syntax is get_style(name)
        assert other.format(Action.of("type", ref=2, text='it\'s "x"')) == text
        assert other.parse(text) == box.parse(text)
