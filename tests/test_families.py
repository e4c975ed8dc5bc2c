"""The public seam for task families (issue 29 item 5).

A family is declared (``Task.family``), registers itself through ``register_family(presets=,
options=)`` from a ``harness_gym.families`` entry point, and binds its own way through
``HarnessEnv.bind_harness``. The proof is tests/plugins/hg_support_family (customer service
with a simulated user): declared by a ``.dist-info`` folder written here, it edits no package
file, yet ``import harness_gym`` registers its ids, ``list presets`` shows its preset, and an
oracle plays its task to success through plain ``gym.make``. Also: ``Param`` types beyond int
and str (numbers, lists, enums) in every tool style.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from harness_gym.core import plugins
from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import LEVELS, Harness, HarnessSpecError
from harness_gym.core.presets import FAMILY_PRESETS, PRESETS, preset_applies, task_family
from harness_gym.core.registry import register_family
from harness_gym.core.task import Action, ActionSpec, Param
from harness_gym.core.tools import ActionError

PLUGINS = Path(__file__).resolve().parent / "plugins"
REPO = PLUGINS.parents[1]
FAMILY_SRC = PLUGINS / "hg_support_family"


@pytest.fixture(scope="module")
def family_path(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """PYTHONPATH on which the support family is installed (its dist-info declares the entry
    point; its source folder holds the code), the repository last."""
    site = tmp_path_factory.mktemp("family site")
    info = site / "hg_support_family-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hg-support-family\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[harness_gym.families]\nsupport = hg_support_family:register\n")
    return [str(site), str(FAMILY_SRC), str(REPO)]


def run_python(code: str, path: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    env.pop(plugins.IMPORT_VAR, None)
    return subprocess.run(
        [sys.executable, *(["-c", code] if code else []), *args],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip


PLAY = """
import json, gymnasium as gym, harness_gym
from harness_gym.core.registry import FAMILY_ENV_IDS
ids = sorted(i for i in gym.registry if i.startswith("harness_gym/SupportRefund-"))
env = gym.make("harness_gym/SupportRefund-SupportStyle-v0")
obs, info = env.reset(seed=4)
u = env.unwrapped
first = dict(family_options=json.loads(json.dumps(info["harness"]["family_options"])), env=type(u).__name__,
             bound=type(u.bound).__name__, obs=obs)
info["harness"]["family_options"]["support"]["user_messages"] = "all"  # infos share nothing
returns, texts = 0.0, []
while True:
    text = u.oracle_action(); texts.append(text)
    obs, reward, terminated, truncated, info = env.step(text)
    returns += reward
    if terminated or truncated:
        break
plain = gym.make("harness_gym/SupportRefund-v0", harness="SupportStyle").unwrapped
plain_obs, _ = plain.reset(seed=4)
all_env = gym.make("harness_gym/SupportRefund-ObsMarkdown-v0").unwrapped
all_env.reset(seed=4); all_env.step(all_env.oracle_action())
print(json.dumps(dict(ids=ids, first=first, returns=returns, success=info["success"], texts=texts,
    after=info["harness"]["family_options"], last_obs=obs, plain_obs=plain_obs,
    all_obs=all_env._observation, listed="harness_gym/SupportRefund-SupportStyle-v0" in FAMILY_ENV_IDS)))
"""


def test_a_plugin_family_registers_binds_and_plays_through_plain_gym_make(family_path: list[str]) -> None:
    done = run_python(PLAY, family_path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    ids = set(got["ids"])
    # its own preset, the generic ones, none written for another family
    assert {"harness_gym/SupportRefund-SupportStyle-v0", "harness_gym/SupportRefund-ToolsXml-v0"} <= ids
    assert not {i for i in ids if "MiniWoBStyle" in i or "BrowserGymStyle" in i or "MiniSweAgentStyle" in i}
    assert got["listed"]
    # bound through the public hook: the family's env and bound harness, its option applied
    assert got["first"]["env"] == "SupportEnv" and got["first"]["bound"] == "SupportBoundHarness"
    assert got["first"]["family_options"] == {"support": {"user_messages": "last"}}
    assert got["after"] == {"support": {"user_messages": "last"}}  # the mutation did not leak
    # the oracle plays to success; the refund carries a number, an enum and a list
    assert got["success"] and got["returns"] == 1.0 and len(got["texts"]) == 2
    refund = json.loads(got["texts"][1])["arguments"]
    assert isinstance(refund["amount"], float) and isinstance(refund["items"], list)
    # user_messages=last shows only the customer's answer; ObsMarkdown (default: all) shows all
    assert "I want my money back" not in got["last_obs"] and "customer: order" in got["last_obs"]
    assert "I want my money back" in got["all_obs"] and "customer: order" in got["all_obs"]
    assert got["plain_obs"] == got["first"]["obs"]  # the preset name works as harness= too


def test_list_presets_shows_a_plugin_familys_preset(family_path: list[str]) -> None:
    done = run_python("", family_path, "-m", "harness_gym.cli", "list", "presets")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.strip()}
    assert rows["SupportStyle"][1] == "support", rows["SupportStyle"]
    assert rows["MiniSweAgentStyle"][1] == "terminal"  # the terminal family's, from the same table


def test_a_bad_family_option_names_the_option(family_path: list[str]) -> None:
    code = """
import harness_gym
from harness_gym.core.harness import Harness, HarnessSpecError
for bad in ({"user_messages": "some"}, {"colour": 1}):
    try:
        Harness(family_options={"support": bad})
    except HarnessSpecError as err:
        print(err)
from harness_gym.cli.common import CommandError, check_family_options
check_family_options("harness_gym/SupportRefund-v0", "SupportStyle")  # its own family: fine
try:
    spec = {"family_options": {"support": {"user_messages": "last"}}}
    check_family_options("harness_gym/ClickButton-v0", spec)
except CommandError as err:
    print(err)
"""
    done = run_python(code, family_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "user_messages must be one of ['all', 'last'], got 'some'" in lines[0]
    assert "unknown support option(s) ['colour']" in lines[1]
    assert "sets family_options for support, but harness_gym/ClickButton-v0 is not a task" in lines[2]


def test_family_seam_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="needs family="):
        register_family([], "x:y", presets={"Nope": Harness()})
    with pytest.raises(ValueError, match="clashes with a generic preset name"):
        register_family([], "x:y", family="h29d_clash", presets={"Json": Harness(obs_format="yaml")})
    with pytest.raises(TypeError, match="must be a Harness or a Preset"):
        register_family([], "x:y", family="h29d_type", presets={"Odd": 3})  # type: ignore[dict-item]
    assert "Json" in PRESETS and "Json" not in FAMILY_PRESETS.get("h29d_clash", {})
    with pytest.raises(ValueError, match="needs family="):
        register_family([], "x:y", also=("web",))


def test_a_family_takes_another_familys_presets_through_register_family() -> None:
    """``also=`` is the one seam: the browser family takes the web family's presets through it,
    and a family registered outside the package does the same."""
    from harness_gym.core.presets import FAMILY_ALSO, PRESET_INFO, preset_for_family

    web_only = next(name for name, info in PRESET_INFO.items() if info.family == "web")
    assert FAMILY_ALSO["browser"] == ("web",) and preset_for_family(web_only, "browser")
    assert not preset_for_family(web_only, "h44_pages")
    from harness_gym.envs.web.tasks import ClickButton

    page = {"H44Page": f"{ClickButton.__module__}:ClickButton"}  # a real, importable page task
    register_family(page, add_to_task_registry=False, family="h44_pages", also=("web",))
    assert preset_for_family(web_only, "h44_pages")
    assert f"harness_gym/H44Page-{web_only}-v0" in gym.registry


def test_the_family_is_declared_not_inferred_from_the_module() -> None:
    from harness_gym.envs.terminal.task import TerminalTask
    from harness_gym.envs.web.base import WebTask

    class Outside(WebTask):  # a web task written outside the package: its base declares web
        task_id = "H29dOutside"

    class Stray(Outside):
        family = "support"

    assert task_family(WebTask) == task_family(Outside) == "web"
    assert task_family(TerminalTask) == "terminal" and task_family(Stray) == "support"
    assert preset_applies("MiniWoBStyle", Outside)  # a web preset that binds to a web task
    assert not preset_applies("MiniWoBStyle", Stray)  # it binds too, but is written for web only


def test_terminal_env_binds_through_the_public_hook_only() -> None:
    from harness_gym.envs.terminal.env import TerminalEnv

    assert "bind_harness" in TerminalEnv.__dict__
    assert not {"_bind", "_spec_copy", "_tools_json"} & set(TerminalEnv.__dict__)
    assert HarnessEnv.bind_harness.__doc__


# -- Param types beyond int and str --------------------------------------------------------------

REFUND = ActionSpec(
    "refund",
    "Refund.",
    (
        Param("order", "int", "o"),
        Param("amount", "float", "a"),
        Param("items", "list[str]", "i"),
        Param("ids", "list[int]", "n"),
        Param("reason", "str", "r", choices=("damaged", "late")),
    ),
)
ODD = ("a b", 'q"x', "back\\slash", "é]", "new\nline", "")


@pytest.mark.parametrize("style", LEVELS["tool_style"])
@pytest.mark.parametrize("channel", LEVELS["tool_channel"])
def test_numbers_lists_and_enums_round_trip_in_every_style(style: str, channel: str) -> None:
    bound = Harness(tool_style=style, tool_channel=channel).bind(("x",), (REFUND,))
    for action in (
        Action.of("refund", order=3, amount=12.5, items=ODD, ids=(1, 2), reason="late"),
        Action.of("refund", order=0, amount=-0.25, items=(), ids=(), reason="damaged"),
    ):
        assert bound.parse(bound.format_action(action)) == action


def test_typed_params_have_json_schemas_and_clear_errors() -> None:
    bound = Harness().bind(("x",), (REFUND,))
    props = bound.openai_tools[0]["function"]["parameters"]["properties"]
    assert props["amount"]["type"] == "number"
    assert props["items"] == {"type": "array", "items": {"type": "string"}, "description": "i"}
    assert props["ids"]["items"] == {"type": "integer"}
    assert props["reason"]["enum"] == ["damaged", "late"]
    good = {"order": 1, "amount": 2, "items": [], "ids": [], "reason": "late"}
    assert bound.parse(json.dumps({"name": "refund", "arguments": good}))["amount"] == 2.0
    for change, message in (
        ({"amount": "lots"}, "argument 'amount'"),
        ({"amount": True}, "expected a number"),
        ({"items": [1]}, "expected a list of str"),
        ({"ids": "[1, 2.5]"}, "expected a list of int"),
        ({"reason": "bored"}, "must be one of ['damaged', 'late']"),
    ):
        text = json.dumps({"name": "refund", "arguments": {**good, **change}})
        with pytest.raises(ActionError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
            bound.parse(text)
        assert err.value.kind == "wrong_type"


def test_bad_param_declarations_are_refused() -> None:
    with pytest.raises(ValueError, match="Param type must be one of"):
        Param("x", "dict", "d")
    with pytest.raises(ValueError, match="choice 'two' is not a int"):
        Param("x", "int", "d", choices=(1, "two"))
    with pytest.raises(HarnessSpecError):
        Harness(family_options={"h29d_never_registered": {}})


# -- the terminal family registers lazily ----------------------------------------------------------


def test_terminal_catalog_lists_every_terminal_task_in_order() -> None:
    from harness_gym.envs.terminal.catalog import TASK_CLASSES
    from harness_gym.envs.terminal.tasks import TERMINAL_TASKS

    assert TASK_CLASSES == {t.task_id: f"{t.__module__}:{t.__name__}" for t in TERMINAL_TASKS}
    assert list(TASK_CLASSES) == [t.task_id for t in TERMINAL_TASKS]


LAZY = """
import json, sys, gymnasium as gym, harness_gym
from harness_gym.envs.terminal import TERMINAL_PRESETS, TERMINAL_TASK_IDS
before = sorted(m for m in sys.modules if m.startswith("harness_gym.envs.terminal"))
ids = [f"harness_gym/{t}-{p}-v0" for t in TERMINAL_TASK_IDS for p in ("Json", "ToolsXml", *TERMINAL_PRESETS)]
ids += [f"harness_gym/{t}-v0" for t in TERMINAL_TASK_IDS]
specs = [gym.spec(i).entry_point for i in ids]
classes = [harness_gym.get_task(t).task_id for t in TERMINAL_TASK_IDS]
from harness_gym.envs import terminal
print(json.dumps(dict(before=before, entry=sorted(set(specs)), classes=classes, ids=list(TERMINAL_TASK_IDS),
                      sandbox=terminal.SandboxUnavailable.__name__)))
"""


def test_import_harness_gym_imports_no_terminal_task_or_sandbox_and_every_id_resolves() -> None:
    done = run_python(LAZY, [str(REPO)])
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    heavy = ("sandbox", "task", "tasks", "env", "runner", "harbor")
    assert not [m for m in got["before"] if m.split(".")[3:4] and m.split(".")[3] in heavy], got["before"]
    assert got["entry"] == ["harness_gym.envs.terminal.env:make_terminal_env"]
    assert got["classes"] == got["ids"] and len(got["ids"]) >= 20
    assert got["sandbox"] == "SandboxUnavailable"  # the package's lazy names still work


@pytest.mark.parametrize("style", LEVELS["tool_style"])
def test_per_tool_grammars_admit_typed_arguments(style: str) -> None:
    import re

    import jsonschema

    from harness_gym.core.tools import action_grammar

    bound = Harness(tool_style=style).bind(("x",), (REFUND,))
    actions = [
        Action.of("refund", order=3, amount=12.5, items=ODD[:4], ids=(1, -2), reason="late"),
        Action.of("refund", order=0, amount=1e-05, items=(), ids=(), reason="damaged"),
    ]
    grammar = action_grammar(bound.toolbox, actions, max_alternatives=0)
    for action in actions:
        text = bound.format_action(action)
        if grammar.kind == "regex":
            assert re.fullmatch(grammar.value, text), (text, grammar.value)
        else:
            assert jsonschema.Draft202012Validator(grammar.value).is_valid(json.loads(text)), text
