"""Plugins: a real out-of-tree package extends harness-gym through entry points or ``--import``.

The demo plugin (tests/plugins/hg_demo_plugin: the task PickLargest, the format ini_like, the
tool style slash, the agent first-legal) is installed with pip into a temporary folder that goes
on PYTHONPATH, so importlib.metadata finds its entry points exactly as for an installed
package; the CLI then runs in subprocesses. Broken and rule-breaking plugins are declared by
.dist-info folders written here (a real entry-point lookup too).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest

from harness_gym import Harness, make_env
from harness_gym.analysis.ceiling import seed_ceiling
from harness_gym.core import plugins
from harness_gym.core.checker import TASK_RULES, check_harness, check_task
from harness_gym.core.formats import RENDERERS, register_format
from harness_gym.core.harness import HarnessSpecError
from harness_gym.core.registry import TASKS, get_task
from harness_gym.core.tools import STYLES, Toolbox, ToolStyle, register_tool_style

PLUGINS = Path(__file__).resolve().parent / "plugins"
REPO = PLUGINS.parents[1]
DEMO_SRC = PLUGINS / "hg_demo_plugin"
IMPORT_ONLY = PLUGINS / "hg_import_only"
TOO = "harness_gym/PickLargestToo-Json-v0"


# -- helpers -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def demo_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo plugin installed by pip (its own pyproject declares the entry points)."""
    root = tmp_path_factory.mktemp("demo_plugin")
    src = root / "src"
    shutil.copytree(DEMO_SRC, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = root / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(src)],
        check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert (site / "hg_demo_plugin-0.1.0.dist-info" / "entry_points.txt").is_file()
    return site


def write_dist(site: Path, name: str, entry_points: dict[str, dict[str, str]]) -> Path:
    """Declare a distribution with these entry points (a .dist-info folder in ``site``)."""
    info = site / f"{name.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    text = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
        for group, eps in entry_points.items()
    )
    (info / "entry_points.txt").write_text(text)
    return site


def cli(*args: str, path: list[Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``harness-gym ARGS`` in a fresh process with ``path`` (then this checkout) as PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [*path, REPO]))}
    env.pop(plugins.IMPORT_VAR, None)
    return subprocess.run(
        [sys.executable, "-m", "harness_gym.cli", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=900,
    )  # fmt: skip


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one ``harness-gym: error:`` line of a failed command (exit code 2, no traceback)."""
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip() and "warning" not in ln]
    assert len(lines) == 1 and lines[0].startswith("harness-gym: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


SPACE_YAML = "factors:\n  obs_format: [json, ini_like]\n  tool_style: [json, slash]\n"


def sweep_and_report(tmp_path: Path, path: list[Path], agent: str, task: str, *extra: str) -> list[dict]:
    """Sweep the plugin's task over a space using its format and tool style; build the report."""
    (tmp_path / "space.yaml").write_text(SPACE_YAML)
    out = ok(
        cli(
            "sweep", *extra, "--agent", agent, "--agent", "oracle", "--tasks", task,
            "--space", "space.yaml", "--subset", "all", "--seeds", "2", "--workers", "1",
            "--out", "run", "--quiet", path=path, cwd=tmp_path,
        )
    )  # fmt: skip
    assert "16 cells" in out
    rows = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert len(rows) == 16 and not [r["error"] for r in rows if r["error"]]
    assert {r["task_id"] for r in rows} == {task}
    assert {r["level_obs_format"] for r in rows} == {"json", "ini_like"}
    assert {r["level_tool_style"] for r in rows} == {"json", "slash"}
    assert all(r["success"] for r in rows if r["agent"] == "oracle")
    assert not any(r["success"] for r in rows if r["agent"] == agent)  # first-legal never submits
    assert all(r["ceiling"] == 1.0 and r["ceiling_method"] == "exact" for r in rows)
    ok(cli("report", "run", *extra, path=path, cwd=tmp_path))
    report = (tmp_path / "run" / "report" / "report.md").read_text()
    assert task in report and agent in report
    return rows


# -- the demo plugin through entry points --------------------------------------------------------


def test_installed_plugin_is_listed_checked_and_evaluated(demo_site: Path, tmp_path: Path) -> None:
    path = [demo_site]
    listing = ok(cli("list", path=path, cwd=tmp_path))
    assert "PickLargest" in listing
    factors = {ln.split()[0]: ln for ln in listing.split("Factors:")[1].splitlines()[2:] if ln.strip()}
    assert "ini_like" in factors["obs_format"] and "slash" in factors["tool_style"]
    # A YAML harness using the plugin's format and tool style, given to the CLI.
    (tmp_path / "plugin.yaml").write_text("obs_format: ini_like\ntool_style: slash\nfield_order: reversed\n")
    checked = ok(
        cli("check", "--task", "PickLargest", "--harness", "Json", "--harness", "plugin.yaml",
            "--seeds", "4", "-v", path=path, cwd=tmp_path)
    )  # fmt: skip
    assert "1 task(s) against the task rules on 4 seeds each: 1 ok, 0 with failures" in checked
    assert "2 (task, harness) pairs on 4 seeds each: 2 ok, 0 with failures" in checked
    assert "oracle_optimal=4" in checked and "round_trip=" in checked
    table = ok(
        cli("eval", "--agent", "first-legal", "--agent", "oracle", "--env",
            "harness_gym/PickLargest-Json-v0", "--episodes", "3", path=path, cwd=tmp_path)
    )  # fmt: skip
    assert "first-legal" in table and "PickLargest" in table  # its env ids are registered


def test_installed_plugin_levels_reach_validation_and_default_space(demo_site: Path, tmp_path: Path) -> None:
    """Nothing imports the plugin explicitly: a level it registers loads it on demand."""
    (tmp_path / "h.yaml").write_text("obs_format: ini_like\ntool_style: slash\n")
    script = """
import json
from harness_gym import Harness, make_env
from harness_gym.analysis.ceiling import seed_ceiling
from harness_gym.core.checker import check_harness
from harness_gym.core.space import DEFAULT_SPACE
h = Harness.from_yaml("h.yaml")
env = make_env("PickLargest", h)
obs, info = env.reset(seed=1)
report = check_harness(h, "PickLargest", seeds=range(3), ceiling=seed_ceiling, task_rules=True)
levels = {f.name: list(f.level_names) for f in DEFAULT_SPACE.factors}
print(json.dumps({"obs": obs, "legal": info["legal_actions"], "levels": levels, "ok": report.ok}))
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [demo_site, REPO]))}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["obs"].startswith("[instruction]\n")
    assert "/pick index=0" in result["legal"] and "/submit" in result["legal"]
    assert "ini_like" in result["levels"]["obs_format"] and "slash" in result["levels"]["tool_style"]
    assert result["ok"]


def test_installed_plugin_ids_work_in_plain_gym_make(demo_site: Path, tmp_path: Path) -> None:
    """``import harness_gym`` registers an installed plugin's ids (no CLI, no explicit load);
    a web-family preset that cannot bind to its actions is not registered with it."""
    script = """
import json
import gymnasium as gym
import harness_gym
env = gym.make("harness_gym/PickLargest-ToolsXml-v0")
obs, info = env.reset(seed=3)
print(json.dumps({"task": info["task_id"], "legal": info["legal_actions"],
                  "plain": "harness_gym/PickLargest-v0" in gym.registry,
                  "miniwob": "harness_gym/PickLargest-MiniWoBStyle-v0" in gym.registry}))
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(demo_site), str(REPO)])}
    env.pop(plugins.IMPORT_VAR, None)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["task"] == "PickLargest" and result["plain"]
    assert any(a.startswith("<pick") for a in result["legal"]), result["legal"]  # ToolsXml writes XML
    assert not result["miniwob"]  # MiniWoBStyle renames click, which PickLargest lacks


def test_installed_plugin_runs_in_sweep_and_report(demo_site: Path, tmp_path: Path) -> None:
    """The sweep's worker process finds the plugin through its entry points on its own."""
    sweep_and_report(tmp_path, [demo_site], "first-legal", "PickLargest")


# -- --import and MODULE:ID for code that is not installed ----------------------------------------


def test_import_option_loads_code_that_is_not_installed(tmp_path: Path) -> None:
    path = [IMPORT_ONLY, DEMO_SRC]  # importable, but no distribution declares entry points
    assert "PickLargestToo" not in ok(cli("list", "tasks", path=path, cwd=tmp_path))
    assert "PickLargestToo" in ok(cli("--import", "hg_import_only", "list", "tasks", path=path, cwd=tmp_path))
    # --import after the verb, and the format it registers accepted in a YAML harness.
    (tmp_path / "too.yaml").write_text("obs_format: ini_too\n")
    checked = ok(
        cli("check", "--import", "hg_import_only", "--task", "PickLargestToo", "--harness",
            "too.yaml", "--seeds", "3", path=path, cwd=tmp_path)
    )  # fmt: skip
    assert "1 ok, 0 with failures" in checked
    # Gymnasium's MODULE:ID imports the module itself.
    table = ok(
        cli("eval", "--agent", "first-legal-too", "--env", f"hg_import_only:{TOO}", "--episodes", "2",
            path=path, cwd=tmp_path)
    )  # fmt: skip
    assert "PickLargestToo" in table and "first-legal-too" in table
    played = subprocess.run(
        [sys.executable, "-m", "harness_gym.cli", "play", f"hg_import_only:{TOO}"],
        input="#0\n#5\n", capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(map(str, path))},
    )  # fmt: skip
    assert played.returncode == 0, played.stderr
    assert "episode over: return=" in played.stdout and "steps=2 invalid=0" in played.stdout


@pytest.mark.slow
def test_import_option_reaches_sweep_workers_and_report(tmp_path: Path) -> None:
    """Worker processes import the --import modules too (HARNESS_GYM_IMPORT)."""
    path = [IMPORT_ONLY, DEMO_SRC]
    (tmp_path / "space.yaml").write_text(SPACE_YAML.replace("ini_like", "ini_too").replace(", slash", ""))
    out = ok(
        cli("--import", "hg_import_only", "sweep", "--agent", "first-legal-too", "--agent", "oracle",
            "--tasks", "PickLargestToo", "--space", "space.yaml", "--subset", "all", "--seeds", "2",
            "--workers", "1", "--out", "run", "--quiet", path=path, cwd=tmp_path)
    )  # fmt: skip
    assert "8 cells" in out
    rows = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert not [r["error"] for r in rows if r["error"]]
    assert {r["level_obs_format"] for r in rows} == {"json", "ini_too"}
    assert all(r["success"] for r in rows if r["agent"] == "oracle")
    ok(cli("--import", "hg_import_only", "report", "run", path=path, cwd=tmp_path))
    assert "PickLargestToo" in (tmp_path / "run" / "report" / "report.md").read_text()


def test_import_of_a_missing_or_failing_module_is_one_clear_error(tmp_path: Path) -> None:
    path = [DEMO_SRC]
    line = error_line(cli("--import", "hg_no_such_module", "list", path=path, cwd=tmp_path))
    assert "--import: no module named 'hg_no_such_module'" in line and "PYTHONPATH" in line
    line = error_line(cli("check", "--import", "hg_demo_plugin.raises", path=path, cwd=tmp_path))
    assert "hg_demo_plugin.raises" in line and "RuntimeError: hg_demo_plugin.raises exploded" in line
    line = error_line(
        cli("eval", "--env", "hg_no_such_module:harness_gym/X-v0", "--episodes", "1", path=path, cwd=tmp_path)
    )
    assert "no module named 'hg_no_such_module'" in line


# -- plugins that break the rules, fail to load, or clash ----------------------------------------


def test_check_names_the_task_rule_a_plugin_breaks(tmp_path: Path) -> None:
    site = write_dist(
        tmp_path / "site",
        "hg-bad-tasks",
        {"harness_gym.tasks": {name: f"hg_demo_plugin.bad:{name}" for name in ("LazyOracle", "Frozen")}},
    )
    done = cli("check", "--task", "LazyOracle", "--task", "Frozen", "--harness", "Json", "--seeds", "8",
               path=[site, DEMO_SRC], cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr  # check found failures
    reports = {chunk.split()[0]: chunk for chunk in done.stdout.split("task rules: ")[1:]}
    lazy, frozen = reports["LazyOracle"], reports["Frozen"]
    assert "[oracle_optimal]" in lazy and "exact ceiling 1" in lazy and TASK_RULES["oracle_optimal"] in lazy
    assert "[instances_vary]" not in lazy
    assert "[instances_vary]" in frozen and "8 seeds built 1 distinct instance(s)" in frozen
    assert TASK_RULES["instances_vary"] in frozen and "[oracle_optimal]" not in frozen
    assert "2 task(s) against the task rules on 8 seeds each: 0 ok, 2 with failures" in done.stdout


def test_a_broken_plugin_is_one_line_and_the_others_still_load(demo_site: Path, tmp_path: Path) -> None:
    broken = {
        "harness_gym.tasks": {
            "Nope": "hg_demo_plugin.broken:Nope",  # its module imports a missing dependency
            "Exploding": "hg_demo_plugin.raises:Task",  # its module raises
            "Ghost": "hg_ghost_module:Ghost",  # no such module
            "ClickButton": "hg_demo_plugin.bad:ClickButton",  # a built-in task's id
            "NotATask": "hg_demo_plugin.formats:render_ini_like",
        },
        "harness_gym.formats": {"json": "hg_demo_plugin.bad:render_json_again"},  # a built-in level
        "harness_gym.tool_styles": {"python": "hg_demo_plugin.bad:PYTHON_AGAIN"},
    }
    site = write_dist(tmp_path / "site", "hg-broken-plugins", broken)
    path = [demo_site, site]
    done = cli("list", path=path, cwd=tmp_path)
    out = ok(done)
    assert "PickLargest" in out and "ini_like" in out and "slash" in out  # the good plugin loaded
    warnings = done.stderr.strip().splitlines()
    assert len(warnings) == 7, done.stderr
    assert all(w.startswith("harness-gym: warning: plugin '") and "hg-broken-plugins" in w for w in warnings)
    by_name = {w.split("'")[1]: w for w in warnings}
    assert "No module named 'hg_dependency_that_is_not_installed'" in by_name["Nope"]
    assert "RuntimeError: hg_demo_plugin.raises exploded on import" in by_name["Exploding"]
    assert "No module named 'hg_ghost_module'" in by_name["Ghost"]
    assert "task id 'ClickButton' is already registered" in by_name["ClickButton"]
    assert "must name a Task subclass" in by_name["NotATask"]
    assert "observation format 'json' is a built-in level" in by_name["json"]
    assert "tool style 'python' is a built-in level" in by_name["python"]
    # The built-ins keep their meaning.
    assert "ClickButton" in out
    # Asking for the broken plugin's task: one error line that says why it is missing.
    line = error_line(cli("check", "--task", "Nope", path=path, cwd=tmp_path))
    assert "unknown task 'Nope'" in line and "plugin 'Nope'" in line
    assert "hg_dependency_that_is_not_installed" in line


# -- in process ----------------------------------------------------------------------------------


@pytest.fixture
def demo_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(DEMO_SRC))


@pytest.fixture
def fresh_registries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Undo whatever a test registers (tasks, env ids, levels, agents) so other tests see the suite."""
    from harness_gym.core import tools
    from harness_gym.core.registry import TASKS

    registries = [TASKS, RENDERERS, STYLES, tools._ALL_STYLES, plugins.AGENTS, gym.registry]
    saved = [dict(r) for r in registries]
    monkeypatch.setattr(plugins, "_loaded_groups", set())
    monkeypatch.setattr(plugins, "_failures", [])
    yield
    for registry, before in zip(registries, saved, strict=True):
        registry.clear()
        registry.update(before)


def test_levels_load_installed_plugins_on_demand(
    demo_site: Path, monkeypatch: pytest.MonkeyPatch, fresh_registries: None
) -> None:
    """A real entry-point lookup in this process: naming a plugin's level loads the plugins."""
    monkeypatch.syspath_prepend(str(demo_site))
    assert "ini_like" not in RENDERERS
    env = make_env("ClickButton", Harness(obs_format="ini_like", tool_style="slash"))
    obs, info = env.reset(seed=0)
    assert obs.startswith("[instruction]")
    assert all(a.startswith("/") for a in info["legal_actions"])
    assert "slash command" in info["system_prompt"]
    assert "PickLargest" not in TASKS and "first-legal" not in plugins.AGENTS  # only what was needed
    assert get_task("PickLargest").task_id == "PickLargest"  # a task id loads the task plugins
    assert "harness_gym/PickLargest-Json-v0" in gym.registry
    assert plugins.find_agent("first-legal") is not None
    assert plugins.load_errors() == []


def test_check_harness_compares_the_oracle_with_the_exact_ceiling(demo_modules: None) -> None:
    from hg_demo_plugin.bad import LazyOracle
    from hg_demo_plugin.tasks import PickLargest

    good = check_harness(Harness(field_order="reversed"), PickLargest, seeds=range(6), ceiling=seed_ceiling)
    assert good.ok and good.checks["oracle"] == 6
    flipped = Harness(field_order="reversed")
    report = check_harness(flipped, LazyOracle, range(6), ceiling=seed_ceiling, raise_on_failure=False)
    failed = [f for f in report.failures if f.check == "oracle"]
    assert failed and all("exact ceiling is 1" in f.message for f in failed)
    # Without the search the same oracle passes: the canonical harness shares its mistakes.
    assert check_harness(Harness(field_order="reversed"), LazyOracle, seeds=range(6)).ok


@pytest.mark.parametrize(
    ("task", "rule"),
    [
        ("LazyOracle", "oracle_optimal"),
        ("Frozen", "instances_vary"),
        ("Generous", "random_agent"),
        ("EarlyWin", "tight_budget"),
        ("Forgetful", "snapshot_restore"),
    ],
)
def test_each_task_rule_fails_exactly_the_task_built_to_break_it(
    demo_modules: None, task: str, rule: str
) -> None:
    from hg_demo_plugin import bad

    report = check_task(getattr(bad, task), seeds=range(10), ceiling=seed_ceiling, raise_on_failure=False)
    assert [f.check for f in report.failures] == [rule]
    assert TASK_RULES[rule] in report.failures[0].message


def test_the_demo_task_passes_every_rule(demo_modules: None) -> None:
    from hg_demo_plugin.tasks import PickLargest

    report = check_task(PickLargest, seeds=range(10), ceiling=seed_ceiling)
    assert report.ok and set(report.checks) == set(TASK_RULES)


def test_a_task_that_raises_fails_the_rule_it_was_checked_for(demo_modules: None) -> None:
    from hg_demo_plugin.tasks import PickLargest

    class Crashing(PickLargest):
        task_id = "Crashing"

        def snapshot(self) -> object:
            raise RuntimeError("no snapshots here")

    report = check_task(Crashing, seeds=range(4), raise_on_failure=False)
    assert [f.check for f in report.failures] == ["snapshot_restore"]
    assert "raised RuntimeError: no snapshots here" in report.failures[0].message


def test_a_registered_tool_style_round_trips_under_check_harness(
    demo_modules: None, fresh_registries: None
) -> None:
    from hg_demo_plugin.styles import SLASH

    from harness_gym.core.tools import ActionError

    register_tool_style(SLASH)
    for task in ("EnterText", "LoginUser", "BookFlight"):
        assert check_harness(Harness(tool_style="slash", tool_naming="opaque"), task, seeds=range(3)).ok
    env = make_env("EnterText", Harness(tool_style="slash"))
    _, info = env.reset(seed=0)
    assert SLASH.hint in info["system_prompt"]
    box = Toolbox(env.task.action_specs, style="slash")
    cases = [("click 3", "malformed"), ("/nosuch", "unknown_tool"), ('/click ref="x"', "wrong_type")]
    for bad_text, kind in cases:
        with pytest.raises(ActionError) as err:
            box.parse(bad_text)
        assert err.value.kind == kind
    with pytest.raises(ValueError, match="built-in level"):
        register_tool_style(ToolStyle("json", SLASH.write, SLASH.read, "x"))
    with pytest.raises(ValueError, match="already registered"):
        register_tool_style(ToolStyle("slash", SLASH.write, SLASH.read, "another hint"))


def test_registering_a_clashing_level_or_agent_is_a_clear_error(fresh_registries: None) -> None:
    with pytest.raises(ValueError, match="'json' is a built-in level; choose another name"):
        register_format("json", lambda fields: "")
    with pytest.raises(ValueError, match="must be an identifier"):
        register_format("two words", lambda fields: "")
    with pytest.raises(HarnessSpecError, match="unknown level 'no_such_format'.*valid levels"):
        Harness(obs_format="no_such_format")
    with pytest.raises(plugins.PluginError, match="clashes with a built-in agent spec"):
        plugins.register_agent("oracle", lambda env: None)
    plugins.register_agent("mine", print)
    with pytest.raises(plugins.PluginError, match="already registered"):
        plugins.register_agent("mine", repr)
