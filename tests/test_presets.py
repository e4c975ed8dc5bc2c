"""Presets that mean what they say: one-change presets change one factor, convention presets
write actions as the real systems do, bundles are named as bundles, old names still work."""

from __future__ import annotations

import io
import json
import re
import warnings

import gymnasium as gym
import pytest

import harness_gym
from harness_gym import Harness, HarnessSpecError, make_env
from harness_gym.cli import main
from harness_gym.core.formats import BUILTIN_FORMATS, render_axtree
from harness_gym.core.harness import LEVELS
from harness_gym.core.presets import (
    DEPRECATED_PRESETS,
    KINDS,
    PRESET_INFO,
    PRESETS,
    get_preset,
    preset_applies,
    register_preset,
    resolve_harness,
)
from harness_gym.core.task import Action
from harness_gym.core.tools import TOOL_STYLES, ActionError
from harness_gym.envs.web.base import WEB_ACTIONS, WebTask

FIELDS = ("instruction", "title", "page")


def bound(preset: str):
    return PRESETS[preset].bind(FIELDS, WEB_ACTIONS)


# -- one-change presets ---------------------------------------------------------------------

#: What each one-change name says, read from the name: prefix -> factor, rest -> level.
PREFIXES = {
    "Obs": "obs_format",
    "Tools": "tool_style",
    "Names": "tool_naming",
    "Parser": "parser",
    "Invalid": "invalid_action",
}
#: The one-change presets that predate the prefixes, and what their names say.
NAMED_BEFORE = {
    "JsonReversed": {"field_order": "reversed"},
    "JsonElementsReversed": {"element_order": "reversed"},
    "JsonNative": {"tool_channel": "native"},
    "JsonFewShot": {"few_shot": 2},
    # A transcript shows earlier turns only through a history window: the one documented
    # preset of this kind that sets two factors.
    "JsonTranscript": {"context": "transcript", "history_window": "all"},
}


def snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


def said_by_name(name: str) -> dict:
    if name in NAMED_BEFORE:
        return NAMED_BEFORE[name]
    for prefix, factor in PREFIXES.items():
        if name.startswith(prefix):
            return {factor: snake(name[len(prefix) :])}
    raise AssertionError(f"one-change preset {name!r} has no prefix that names its factor")


ONE_CHANGE = [n for n, p in PRESET_INFO.items() if p.kind == "one-change"]


@pytest.mark.parametrize("name", ONE_CHANGE)
def test_each_one_change_preset_differs_from_the_canonical_harness_in_what_its_name_says(name: str) -> None:
    diff = PRESETS[name].to_dict(full=False)  # the spec, not the name
    assert diff == said_by_name(name)
    assert PRESET_INFO[name].changes() == diff
    if name != "JsonTranscript":
        assert len(diff) == 1


@pytest.mark.parametrize(
    ("factor", "levels"),
    [
        ("obs_format", BUILTIN_FORMATS),
        ("tool_style", TOOL_STYLES),
        ("tool_naming", tuple(LEVELS["tool_naming"])),
        ("parser", tuple(LEVELS["parser"])),
        ("invalid_action", tuple(LEVELS["invalid_action"])),
        ("field_order", ("canonical", "reversed")),
        ("element_order", ("canonical", "reversed")),
    ],
)
def test_every_level_users_compare_has_a_one_change_preset(factor: str, levels: tuple) -> None:
    default = getattr(Harness(), factor)
    single = [PRESETS[n].to_dict(full=False) for n in ONE_CHANGE]
    have = {diff.get(factor) for diff in single if len(diff) == 1}
    assert {lv for lv in levels if lv != default} <= have


def test_every_categorical_level_is_still_covered_by_some_preset() -> None:
    builtin = {"obs_format": BUILTIN_FORMATS, "tool_style": TOOL_STYLES}
    for factor, levels in LEVELS.items():
        wanted = builtin.get(factor, tuple(levels))
        used = {getattr(h, factor) for h in PRESETS.values()}
        assert set(wanted) <= used, (factor, set(wanted) - used)


def test_kinds_are_known_and_bundles_say_they_are_bundles() -> None:
    assert {p.kind for p in PRESET_INFO.values()} <= set(KINDS)
    assert [n for n, p in PRESET_INFO.items() if p.kind == "canonical"] == ["Json"]
    assert PRESETS["Json"] == Harness()
    for name, preset in PRESET_INFO.items():
        assert (preset.kind == "bundle") == name.startswith("Bundle"), name
        if preset.kind == "bundle":
            assert len(preset.changes()) >= 4  # a bundle moves many factors at once


# -- convention presets -----------------------------------------------------------------------

#: Expected strings, written from each system's own docs and examples (docs/presets.md cites them).
CONVENTION_EXAMPLES: dict[str, list[tuple[Action, str]]] = {
    # BrowserGym action/functions.py docstrings: click('a51'), fill('237', 'example value'),
    # select_option('a48', "blue"), keyboard_press('Backspace') (our ids are numbers).
    "BrowserGymStyle": [
        (Action.of("click", ref=51), "click('51')"),
        (Action.of("type", ref=237, text="example value"), "fill('237', 'example value')"),
        (Action.of("select", ref=48, option="blue"), "select_option('48', 'blue')"),
        (Action.of("press", key="Backspace"), "keyboard_press('Backspace')"),
    ],
    # WebArena's prompts and browser_env/actions.py: click [1234], type [164] [restaurants near
    # CMU], press [Enter].
    "WebArenaStyle": [
        (Action.of("click", ref=1234), "click [1234]"),
        (Action.of("type", ref=164, text="restaurants near CMU"), "type [164] [restaurants near CMU]"),
        (Action.of("press", key="Enter"), "press [Enter]"),
        (Action.of("select", ref=7, option="Large"), "select [7] [Large]"),
    ],
    # MiniWoB++ action.py / environment.py: create_action(ActionTypes.CLICK_ELEMENT, ref=...)
    # builds {"action_type": ..., "ref": ...}.
    "MiniWoBStyle": [
        (Action.of("click", ref=4), '{"action_type": "CLICK_ELEMENT", "ref": 4}'),
        (
            Action.of("type", ref=5, text="hello"),
            '{"action_type": "FOCUS_ELEMENT_AND_TYPE_TEXT", "ref": 5, "text": "hello"}',
        ),
        (Action.of("press", key="Enter"), '{"action_type": "PRESS_KEY", "key": "Enter"}'),
    ],
}


@pytest.mark.parametrize(
    ("preset", "action", "expected"),
    [(p, a, e) for p, rows in CONVENTION_EXAMPLES.items() for a, e in rows],
)
def test_convention_presets_write_actions_as_the_real_system_does(
    preset: str, action: Action, expected: str
) -> None:
    harness = bound(preset)
    assert harness.format_action(action) == expected
    assert harness.parse(expected) == action


@pytest.mark.parametrize(
    ("text", "action"),
    [
        # BrowserGym's own docstring examples, quotes and all (ids made numeric).
        ("select_option('48', \"blue\")", Action.of("select", ref=48, option="blue")),
        ("fill('45', \"multi-line\\nexample\")", Action.of("type", ref=45, text="multi-line\nexample")),
        ("```\nclick('51')\n```", Action.of("click", ref=51)),
        ("click(bid='51')", Action.of("click", ref=51)),
    ],
)
def test_browsergym_style_reads_browsergym_examples(text: str, action: Action) -> None:
    assert bound("BrowserGymStyle").parse(text) == action


def test_webarena_style_is_read_by_webarena_own_action_regexes() -> None:
    """Our strings go through the regexes of WebArena's create_id_based_action unchanged."""
    harness = bound("WebArenaStyle")
    click = harness.format_action(Action.of("click", ref=88))
    assert re.search(r"click ?\[(\d+)\]", click).group(1) == "88"
    typed = harness.format_action(Action.of("type", ref=3, text="a [b] c"))
    typed += " [1]"  # what WebArena appends when the flag is absent
    m = re.search(r"type ?\[(\d+)\] ?\[(.+)\] ?\[(\d+)\]", typed)
    assert (m.group(1), m.group(2)) == ("3", "a [b] c")
    press = harness.format_action(Action.of("press", key="Control+a"))
    assert re.search(r"press ?\[(.+)\]", press).group(1) == "Control+a"
    # A WebArena reply: reasoning, then the action in a fence.
    reply = (
        "Let's think step-by-step. The search box has id 164. In summary, the next action I "
        "will perform is ```type [164] [restaurants near CMU]```"
    )
    assert harness.parse(reply) == Action.of("type", ref=164, text="restaurants near CMU")
    # WebArena's press_enter_after flag is what the preset cannot reproduce (documented): a
    # third bracket group is refused, never folded into the typed text (issue 43).
    with pytest.raises(ActionError) as err:
        harness.parse("type [164] [CMU] [1]")
    assert err.value.kind == "extra_argument"


def test_miniwob_style_uses_only_keys_of_the_miniwob_action_space() -> None:
    # ActionSpaceConfig.get_action_space: action_type, coords, ref, key, text, field.
    keys = {"action_type", "coords", "ref", "key", "text", "field"}
    harness = bound("MiniWoBStyle")
    for action, _ in CONVENTION_EXAMPLES["MiniWoBStyle"]:
        assert set(json.loads(harness.format_action(action))) <= keys


def test_openai_functions_sends_function_tools_and_reads_tool_calls() -> None:
    from harness_gym.llm.chat import Turn, chat_messages
    from harness_gym.llm.types import ToolCall

    harness = bound("OpenAIFunctions")
    assert PRESETS["OpenAIFunctions"].tool_channel == "native"
    tool = harness.openai_tools[0]
    assert tool["type"] == "function" and set(tool["function"]) == {"name", "description", "parameters"}
    params = tool["function"]["parameters"]
    assert params["type"] == "object" and params["required"] == ["ref"] and not params["additionalProperties"]
    # A tool call as the Chat Completions API returns it: arguments are JSON text.
    arguments = '{"ref": 3, "text": "hi"}'
    call = {"id": "call_1", "type": "function", "function": {"name": "type", "arguments": arguments}}
    text = harness.write_call(call["function"]["name"], call["function"]["arguments"])
    assert harness.parse(text) == Action.of("type", ref=3, text="hi")
    # The chat: the call as an assistant tool_calls message, the next observation as its tool result.
    turn = Turn("obs 1", text, ToolCall("type", call["function"]["arguments"]))
    messages = chat_messages(PRESETS["OpenAIFunctions"], "system", "obs 2", [turn])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    sent = messages[2]["tool_calls"][0]
    assert sent["type"] == "function" and json.loads(sent["function"]["arguments"]) == json.loads(arguments)
    assert messages[3]["tool_call_id"] == sent["id"] and messages[3]["content"] == "obs 2"


def test_conventions_document_what_they_reproduce_cannot_and_their_sources() -> None:
    conventions = [p for p in PRESET_INFO.values() if p.kind == "convention"]
    names = {p.name for p in conventions}
    assert {"BrowserGymStyle", "WebArenaStyle", "MiniWoBStyle", "OpenAIFunctions"} <= names
    docs = open("docs/presets.md", encoding="utf-8").read()
    for preset in conventions:
        assert preset.reproduces and preset.cannot and preset.sources, preset.name
        assert preset.name in docs
        for source in preset.sources:
            assert source.split(" (")[0].split(" ", 1)[1] in docs, source


@pytest.mark.parametrize("preset", ["BrowserGymStyle", "WebArenaStyle", "MiniWoBStyle", "OpenAIFunctions"])
def test_the_oracle_succeeds_under_each_convention(preset: str) -> None:
    env = make_env("LoginUser", preset)
    for seed in range(3):
        env.reset(seed=seed)
        done, info = False, {}
        while not done:
            _, _, terminated, truncated, info = env.step(env.oracle_action())
            done = terminated or truncated
        assert info["success"] and info["invalid_actions"] == 0


BUTTON = {"ref": 2, "tag": "button", "text": "O'K", "on": True}


def test_axtree_observation_reads_like_an_accessibility_tree() -> None:
    fields = [
        ("instruction", "Click OK"),
        ("page", [{"ref": 1, "tag": "div", "children": [BUTTON]}]),
        ("step", 0),
    ]
    assert render_axtree(fields).splitlines() == [
        "instruction: Click OK",
        "page:",
        "[1] div",
        '\t[2] button "O\'K" on: true',
        "step: 0",
    ]
    obs, _ = make_env("ClickButton", "WebArenaStyle").reset(seed=0)
    assert obs.startswith("instruction: ") and re.search(r"^\t*\[\d+\] button '", obs, re.M)


def test_web_conventions_are_registered_with_web_and_browser_tasks_only() -> None:
    import harness_gym.envs.browser as browser
    import harness_gym.envs.terminal as terminal

    browser.register()
    terminal.register()
    assert "harness_gym/ClickButton-BrowserGymStyle-v0" in gym.registry
    assert "harness_gym/BrowserLoginUser-WebArenaStyle-v0" in gym.registry
    assert "harness_gym/TermGitCommit-BrowserGymStyle-v0" not in gym.registry
    assert "harness_gym/TermGitCommit-ObsMarkdown-v0" in gym.registry  # any-family presets apply
    assert "harness_gym/TermGitCommit-OpenAIFunctions-v0" in gym.registry

    class NoClick(WebTask):  # a task outside the family: applicability by binding alone
        task_id = "NoClickProbe"
        action_specs = tuple(s for s in WEB_ACTIONS if s.name != "click")

    NoClick.__module__ = "someone_else.tasks"
    assert not preset_applies("MiniWoBStyle", NoClick)  # renames click, which this task lacks
    assert preset_applies("WebArenaStyle", NoClick)


# -- old names ------------------------------------------------------------------------------

#: Ids the old bundle names had before the rename (tests and saved runs depend on them).
OLD_IDS = {
    "Markdown": "h-ca433d43bdd7",
    "Xml": "h-ee281aa0495c",
    "Yaml": "h-b48cb4b1b9c3",
    "KeyValue": "h-a1d0c6e081ff",
    "Html": "h-96031f078db9",
    "Python": "h-a27d4d8f37e8",
}


@pytest.mark.parametrize("old", list(OLD_IDS))
def test_old_names_resolve_with_a_warning_to_the_same_harness(old: str) -> None:
    new = DEPRECATED_PRESETS[old]
    assert new == f"Bundle{old}" and old not in PRESETS
    with pytest.warns(DeprecationWarning, match=rf"preset '{old}' is deprecated.*use '{new}'") as caught:
        harness = get_preset(old)
    assert harness == PRESETS[new] and harness.id == PRESETS[new].id == OLD_IDS[old]
    assert caught[0].filename == __file__  # the warning points at the caller's line
    with pytest.warns(DeprecationWarning, match=new):
        assert resolve_harness(old) == PRESETS[new]


def test_old_env_ids_and_saved_runs_still_load() -> None:
    with pytest.warns(DeprecationWarning, match="BundleMarkdown") as caught:
        env = gym.make("harness_gym/ClickButton-Markdown-v0")
    assert caught[0].filename == __file__
    _, info = env.reset(seed=0)
    assert info["harness_id"] == OLD_IDS["Markdown"]
    # A saved row that recorded the old name replays to the same harness.
    row = {"task_id": "ClickButton", "harness_name": "Xml", "harness_id": OLD_IDS["Xml"], "seed": 3}
    with pytest.warns(DeprecationWarning):
        replay = make_env(row["task_id"], row["harness_name"])
    assert replay.reset(seed=row["seed"])[1]["harness_id"] == row["harness_id"]
    # An agent spec recorded as oracle@<old name> still parses and builds.
    from harness_gym.analysis.agent_spec import parse_agent

    with pytest.warns(DeprecationWarning):
        spec = parse_agent("oracle@Yaml")
    assert spec.kind == "oracle@" and spec.target == "Yaml"


def test_old_names_are_not_listed_but_unknown_names_still_fail_clearly() -> None:
    ids = io.StringIO()
    assert main(["list", "envs"], out=ids) == 0
    assert "harness_gym/ClickButton-BundleXml-v0" in ids.getvalue().split()
    assert not any(i.endswith(("-Xml-v0", "-Markdown-v0")) for i in ids.getvalue().split())
    with pytest.raises(HarnessSpecError, match="unknown harness preset 'Markdwon'.*BundleMarkdown"):
        get_preset("Markdwon")


def test_current_names_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in PRESETS:
            get_preset(name)


# -- registering and listing ----------------------------------------------------------------


def test_register_preset_rejects_clashes_and_unknown_kinds() -> None:
    with pytest.raises(ValueError, match="unknown preset kind"):
        register_preset("Probe", Harness(), "favourite", "x")
    with pytest.raises(ValueError, match="already registered as a different harness"):
        register_preset("Json", Harness(obs_format="yaml"), "one-change", "x")
    with pytest.raises(ValueError, match="deprecated alias of 'BundleXml'"):
        register_preset("Xml", Harness(obs_format="xml"), "one-change", "x")
    # Registering the same preset again is a no-op.
    register_preset("Json", Harness(), "canonical", PRESET_INFO["Json"].summary)
    assert list(PRESETS)[0] == "Json"


def test_list_presets_groups_by_kind_and_prints_each_ones_changes() -> None:
    out = io.StringIO()
    assert main(["list", "presets"], out=out) == 0
    text = out.getvalue()
    heads = [text.index(f"\n{kind} (") for kind in KINDS]
    assert heads == sorted(heads)
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    for name, preset in PRESET_INFO.items():
        kind_start = heads[KINDS.index(preset.kind)]
        assert text.index(f"\n{name} ") > kind_start, name
        assert preset.harness.id in lines[name]
        for factor in preset.changes():
            assert f"{factor}=" in lines[name], (name, factor)
    assert "ObsMarkdown" in lines and "obs_format=markdown" in lines["ObsMarkdown"]
    assert re.search(r"^Markdown\s+BundleMarkdown$", text, re.M)  # deprecated names and their successors
    # Task families' own presets are listed as conventions for their family.
    terminal = __import__("harness_gym.envs.terminal.presets", fromlist=["TERMINAL_PRESETS"])
    for name in terminal.TERMINAL_PRESETS:
        assert re.search(rf"^{name}\s+terminal\s+h-", text, re.M)
        assert text.index(f"\n{name} ") > heads[KINDS.index("convention")]


def test_package_exports_the_preset_table() -> None:
    assert harness_gym.PRESETS is PRESETS


def test_a_preset_sweep_runs_each_task_only_under_the_presets_registered_with_it() -> None:
    import harness_gym.envs.terminal as terminal
    from harness_gym.analysis.sweep.spec import SweepSpec

    terminal.register()
    spec = SweepSpec.build("oracle", ["ClickButton", "TermGitCommit"], space="presets", seeds=1)
    cells = spec.cells()
    web_only = {n for n, p in PRESET_INFO.items() if p.family == "web"}
    assert web_only and len(cells) == spec.n_cells == 2 * len(PRESETS) - len(web_only)
    assert {c.harness_name for c in cells if c.task_id == "TermGitCommit"} == set(PRESETS) - web_only
    assert {c.harness_name for c in cells if c.task_id == "ClickButton"} == set(PRESETS)


def test_a_harness_put_into_presets_directly_registers_and_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_gym.core.registry import registered_env_ids

    monkeypatch.setitem(PRESETS, "MineProbe", Harness(obs_format="yaml", parser="lenient"))
    assert "harness_gym/ClickButton-MineProbe-v0" in registered_env_ids()
    out = io.StringIO()
    assert main(["list", "presets"], out=out) == 0
    text = out.getvalue()
    assert text.index("\nother (") < text.index("\nMineProbe ") and "obs_format=yaml parser=lenient" in text
