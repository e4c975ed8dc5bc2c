"""Every option of every verb changes what runs, or is refused (issue 43, section 2).

:data:`HOW` says, for each option of each verb, which test here observes its effect. The walk
(:func:`test_every_option_has_an_entry`) reads argparse's own definitions
(:func:`harness_gym.cli.build_parser`, every verb and nested verb), so a new option fails it
until it has an entry. Each test runs the verb for real on the smallest input that shows the
option (ClickButton, one seed, a 4-point space), once as given (:data:`SWEEP`, :data:`SEARCH`,
:data:`EVAL`, :data:`EXPORT`, ...) and once with the option set, and fingerprints what it
produced (stdout, the files written and their rows) to assert the difference lands where it
should (``--seeds 2``: two seeds in the rows); an option a run would ignore is refused, and the
test feeds it. Runs shared between tests are made once (:meth:`Runner.base`). Options that
say *how* (``--workers``, ``--quiet``, ``--log``) get a probe of that how (which process
played, progress lines, a log folder), never a timing. Where this machine
lacks what a run needs (``serve`` without the ``openenv`` extra, ``rootfs build`` minutes
long, a language-model server), the test checks the narrowest real seam: the function the verb
calls with the parsed options, and its entry says ``seam``.

``train`` is not here: ``tests/test_cli_option_table.py`` walks its options (``READ_BY``), and
the tests named there check each one's effect.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import harness_gym
from harness_gym.cli import CLIExit, CommandError, build_parser, main

ROOT = Path(__file__).resolve().parents[1]
ENV = "harness_gym/ClickButton-Json-v0"
SPACE = "base: {}\nfactors:\n  obs_format: [json, markdown]\n  tool_style: [json, python]\n"
SPACE2 = "base: {}\nfactors:\n  obs_format: [json, yaml]\n  tool_style: [json, xml]\n"
SEARCH_SPACE = (
    "base: {}\nfactors:\n  obs_format: [json, markdown, yaml]\n  tool_style: [json, python]\n"
    "  field_order: [canonical, reversed]\n"
)
#: An agent that plays the first legal action and leaves a file named by its process id.
AGENT = """import os, pathlib
class First:
    def reset(self, seed=None):
        pass
    def act(self, observation, info):
        return info["legal_actions"][0]
def make(env):
    (pathlib.Path(__file__).parent / f"pid-{os.getpid()}").touch()
    return First()
"""
#: An agent whose every step raises while the file ``broken`` is beside it.
BROKEN = """import pathlib
class Broken:
    def reset(self, seed=None):
        pass
    def act(self, observation, info):
        if (pathlib.Path(__file__).parent / "broken").exists():
            raise RuntimeError("agent broke")
        return info["legal_actions"][0]
def make(env):
    return Broken()
"""
#: An agent that plays the first legal action, except under a reversed field order, where every
#: reply is one no harness parses: its outcome differs between the two harnesses by construction.
HARNESSED = """class Agent:
    def __init__(self, broken):
        self.broken = broken
    def reset(self, seed=None):
        pass
    def act(self, observation, info):
        return "no such action" if self.broken else info["legal_actions"][0]
def make(env):
    return Agent(env.unwrapped.harness.field_order == "reversed")
"""
INPUTS = {
    "space.yaml": SPACE,
    "space2.yaml": SPACE2,
    "search.yaml": SEARCH_SPACE,
    "agent.py": AGENT,
    "broken_agent.py": BROKEN,
    "harnessed_agent.py": HARNESSED,
    "yaml_harness.yaml": "obs_format: yaml\n",
}

SWEEP = [
    "sweep", "--agent", "random", "--tasks", "ClickButton", "--space", "@W/space.yaml", "--seeds", "1",
    "--workers", "0", "--out", "@W/run",
]  # fmt: skip
SEARCH = [
    "search", "--agent", "random", "--tasks", "ClickButton", "--space", "@W/search.yaml", "--budget", "60",
    "--dev-seeds", "2", "--test-seeds", "1", "--random", "0", "--no-local", "--out", "@W/run",
]  # fmt: skip
EVAL = ["eval", "--env", ENV, "--episodes", "1", "--agent", "random", "--out", "@W/rows.jsonl"]
EXPORT = ["export", "--env", ENV, "--episodes", "1", "--out", "@W/chat.jsonl"]
LLM = "openai:m@http://127.0.0.1:9/v1"


# -- running a verb and fingerprinting what it left ------------------------------------------


@dataclass
class Run:
    """What one command produced: exit code, stdout, stderr (folder shown as ``@W``), files."""

    code: int
    out: str
    err: str
    files: dict[str, Any]
    where: Path

    def rows(self, name: str = "run/episodes.parquet") -> list[dict[str, Any]]:
        if name.endswith(".parquet"):  # the rows of record (the .jsonl log keeps re-run cells' old rows)
            return json.loads(self.files[name])
        return [json.loads(line) for line in self.files[name].splitlines() if line.strip()]

    def column(self, name: str, file: str = "run/episodes.parquet") -> set[Any]:
        return {json.dumps(r.get(name), sort_keys=True) for r in self.rows(file)}


def _fingerprint(path: Path) -> Any:
    data = path.read_bytes()
    if path.suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(path).to_json(orient="records")
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return hashlib.sha256(data).hexdigest()


def invoke(argv: list[str], where: Path, stdin: str = "") -> Run:
    """Run ``harness-gym ARGV`` in this process (``@W`` is ``where``); never raises ``CLIExit``."""
    where.mkdir(parents=True, exist_ok=True)
    for name, text in INPUTS.items():
        (where / name).write_text(text)
    argv = [a.replace("@W", str(where)) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(argv, out=out, inp=io.StringIO(stdin))
        except CLIExit as exit_:
            code = int(exit_.code or 0)
    files = {
        str(p.relative_to(where)): _fingerprint(p)
        for p in sorted(where.rglob("*"))
        if p.is_file() and p.name not in INPUTS and not p.name.startswith("pid-")
    }
    w = str(where)
    return Run(code, out.getvalue().replace(w, "@W"), err.getvalue().replace(w, "@W"), files, where)


class Runner:
    """Runs verbs in fresh folders; the runs every option is compared with are made once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0
        self.cache: dict[tuple[str, ...], Run] = {}

    def __call__(self, argv: list[str], stdin: str = "", where: Path | None = None) -> Run:
        self.count += 1
        return invoke(argv, where or self.root / f"r{self.count}", stdin)

    def base(self, argv: list[str], stdin: str = "") -> Run:
        key = (*argv, stdin)
        if key not in self.cache:
            self.cache[key] = self(argv, stdin)
            assert self.cache[key].code == 0, (argv, self.cache[key].err)
        return self.cache[key]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    return Runner(tmp_path_factory.mktemp("every-option"))


def ok(result: Run) -> Run:
    assert result.code == 0, result.err
    return result


def refused(result: Run, *words: str) -> None:
    """One error line naming ``words``, exit 2."""
    assert result.code == 2, (result.code, result.err)
    line = result.err.strip().splitlines()[-1]
    assert line.startswith("harness-gym: error:") and all(w in line for w in words), line


class Stop(Exception):
    """Raised by a seam spy once it has seen what the verb passed: nothing more runs."""


def seam(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[tuple[tuple, dict]]:
    """Replace ``module.name`` with a spy that records its call and stops the verb."""
    seen: list[tuple[tuple, dict]] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        raise Stop

    monkeypatch.setattr(module, name, spy)
    return seen


def stopped(argv: list[str], tmp: Path) -> None:
    """Run ``--debug ARGV`` until a seam spy stops it."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name, text in INPUTS.items():
        (tmp / name).write_text(text)
    with pytest.raises(Stop):
        main(["--debug", *[a.replace("@W", str(tmp)) for a in argv]], out=io.StringIO())


# -- the table -------------------------------------------------------------------------------

#: "VERB DEST" -> the test of this file that observes the option's effect (or its refusal).
HOW: dict[str, str] = {
    # the global options (each verb takes --debug and --import too: the same dest)
    "debug": "test_debug_shows_the_traceback",
    "imports": "test_import_loads_a_module_first",
    "version": "test_version_prints_the_version",
    # list
    "list what": "test_list_what_and_filters",
    "list family": "test_list_what_and_filters",
    "list match": "test_list_what_and_filters",
    # play
    "play env_id": "test_play_env_and_seed",
    "play seed": "test_play_env_and_seed",
    # eval
    "eval agent": "test_eval_rows",
    "eval env": "test_eval_rows",
    "eval episodes": "test_eval_rows",
    "eval seed": "test_eval_rows",
    "eval out": "test_eval_rows",
    "eval harness": "test_eval_rows",
    "eval trajectories": "test_eval_trajectories",
    "eval model": "test_eval_model",
    "eval stochastic": "test_eval_model",
    "eval temperature": "test_eval_llm_options_reach_the_agents (seam)",
    "eval max_tokens": "test_eval_llm_options_reach_the_agents (seam)",
    "eval concurrency": "test_eval_llm_options_reach_the_agents (seam)",
    "eval constrain": "test_eval_llm_options_reach_the_agents (seam)",
    "eval in_flight": "test_eval_llm_options_reach_the_agents (seam)",
    # check
    "check task": "test_check",
    "check harness": "test_check",
    "check seeds": "test_check",
    "check verbose": "test_check",
    "check no_task_rules": "test_check",
    # sweep
    "sweep agent": "test_sweep_what_runs",
    "sweep tasks": "test_sweep_what_runs",
    "sweep space": "test_sweep_what_runs",
    "sweep subset": "test_sweep_what_runs",
    "sweep design_seed": "test_sweep_what_runs",
    "sweep seeds": "test_sweep_what_runs",
    "sweep first_seed": "test_sweep_what_runs",
    "sweep out": "test_sweep_what_runs",
    "sweep no_ceiling": "test_sweep_ceiling_options",
    "sweep node_limit": "test_sweep_ceiling_options",
    "sweep max_harnesses": "test_sweep_what_runs",
    "sweep workers": "test_sweep_workers_play_in_other_processes",
    "sweep chunk_size": "test_sweep_chunk_size (seam: the batches run_local gets)",
    "sweep backend": "test_sweep_ray_address (seam) and test_sweep_backend_ray (slow: starts Ray)",
    "sweep ray_address": "test_sweep_ray_address (seam: the address run_ray gets)",
    "sweep overwrite": "test_sweep_resume_options",
    "sweep retry_errors": "test_sweep_resume_options",
    "sweep report": "test_sweep_outputs",
    "sweep reference": "test_sweep_outputs",
    "sweep quiet": "test_sweep_outputs",
    "sweep trajectories": "test_sweep_outputs",
    "sweep log": "test_sweep_logs",
    "sweep log_dir": "test_sweep_logs",
    "sweep temperature": "test_sweep_and_search_llm_options (seam)",
    "sweep max_tokens": "test_sweep_and_search_llm_options (seam)",
    "sweep concurrency": "test_sweep_and_search_llm_options (seam)",
    "sweep constrain": "test_sweep_and_search_llm_options (seam)",
    "sweep in_flight": "test_sweep_and_search_llm_options (seam)",
    # report
    "report dir": "test_report",
    "report out": "test_report",
    "report title": "test_report",
    "report reference": "test_report",
    # search
    "search agent": "test_search_what_runs",
    "search tasks": "test_search_what_runs",
    "search space": "test_search_what_runs",
    "search default": "test_search_what_runs",
    "search budget": "test_search_what_runs",
    "search dev_seeds": "test_search_what_runs",
    "search test_seeds": "test_search_what_runs",
    "search eta": "test_search_pool_options",
    "search random": "test_search_pool_options",
    "search start": "test_search_pool_options",
    "search no_local": "test_search_pool_options",
    "search seed": "test_search_pool_options",
    "search no_ceiling": "test_search_what_runs",
    "search out": "test_search_what_runs",
    "search workers": "test_search_workers_play_in_other_processes",
    "search overwrite": "test_search_resume_options",
    "search retry_errors": "test_search_resume_options",
    "search report": "test_search_outputs",
    "search quiet": "test_search_outputs",
    "search trajectories": "test_search_outputs",
    "search log": "test_search_outputs",
    "search log_dir": "test_search_outputs",
    "search temperature": "test_sweep_and_search_llm_options (seam)",
    "search max_tokens": "test_sweep_and_search_llm_options (seam)",
    "search concurrency": "test_sweep_and_search_llm_options (seam)",
    "search constrain": "test_sweep_and_search_llm_options (seam)",
    "search in_flight": "test_sweep_and_search_llm_options (seam)",
    # export
    "export env": "test_export_played",
    "export agent": "test_export_played",
    "export harness": "test_export_played",
    "export episodes": "test_export_played",
    "export seed": "test_export_played",
    "export unit": "test_export_played",
    "export format": "test_export_played",
    "export out": "test_export_played",
    "export run": "test_export_run",
    "export temperature": "test_export_llm_options_reach_the_agent (seam)",
    "export max_tokens": "test_export_llm_options_reach_the_agent (seam)",
    "export concurrency": "test_export_llm_options_reach_the_agent (seam)",
    "export constrain": "test_export_llm_options_reach_the_agent (seam)",
    # serve (seam: openenv is not in this venv; the serve(...) call the verb makes)
    "serve task": "test_serve_options_reach_the_server (seam)",
    "serve harness": "test_serve_options_reach_the_server (seam)",
    "serve host": "test_serve_options_reach_the_server (seam)",
    "serve port": "test_serve_options_reach_the_server (seam)",
    "serve max_sessions": "test_serve_options_reach_the_server (seam)",
    "serve session_timeout": "test_serve_options_reach_the_server (seam)",
    # rootfs
    "rootfs cache": "test_rootfs_list_and_prune",
    "rootfs list json": "test_rootfs_list_and_prune",
    "rootfs prune unused_days": "test_rootfs_list_and_prune",
    "rootfs prune all": "test_rootfs_list_and_prune",
    "rootfs prune bases": "test_rootfs_list_and_prune",
    "rootfs build folders": "test_rootfs_build_options_reach_the_builder (seam)",
    "rootfs build image": "test_rootfs_build_options_reach_the_builder (seam)",
    "rootfs build run": "test_rootfs_build_options_reach_the_builder (seam)",
    "rootfs build no_progress": "test_rootfs_build_options_reach_the_builder (seam)",
    # validate
    "validate task": "test_validate",
    "validate harness": "test_validate",
    "validate seeds": "test_validate",
    "validate json": "test_validate",
    "validate verbose": "test_validate",
    "validate tasks": "test_validate_task_folders (seam: the task ids validate plans)",
    # view
    "view dir": "test_view",
    "view out": "test_view",
    "view serve": "test_view_serve",
    "view port": "test_view_serve",
    "view no_open": "test_view_serve",
}


def _options() -> set[str]:
    """ "VERB DEST" for every option and positional of every verb, from argparse itself."""
    found: set[str] = set()
    own = {"help", "debug", "imports"}  # argparse's --help; every verb's --debug / --import

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}".strip())
            elif action.dest != "help" and not (prefix and action.dest in own):
                found.add(f"{prefix} {action.dest}".strip())

    walk(build_parser(), "")
    return {o for o in found if not o.startswith("train ")}  # train: test_cli_option_table.py


def test_every_option_has_an_entry() -> None:
    options = _options()
    assert not options - set(HOW), f"options with no entry in HOW (add a test): {options - set(HOW)}"
    assert not set(HOW) - options, f"entries for options that no longer exist: {set(HOW) - options}"
    here = sys.modules[__name__]
    for how in HOW.values():
        for name in how.replace(" and ", " ").split():
            if name.startswith("test_"):
                assert callable(getattr(here, name, None)), f"HOW names {name}, which is not a test here"


# -- the global options ------------------------------------------------------------------------


def test_debug_shows_the_traceback() -> None:
    argv = ["eval", "--env", "harness_gym/Nope-v0"]
    with pytest.raises(CLIExit):  # one line, no traceback
        main(argv, out=io.StringIO())
    with pytest.raises(CommandError):  # the exception itself comes through, before and after the verb
        main(["--debug", *argv], out=io.StringIO())
    with pytest.raises(CommandError):
        main([*argv, "--debug"], out=io.StringIO())


def test_import_loads_a_module_first(tmp_path: Path) -> None:
    """In a subprocess: the plugin registers a task for good, which must not leak into other tests."""
    plugins = ROOT / "tests" / "plugins"
    path = os.pathsep.join([str(ROOT), str(plugins / "hg_import_only"), str(plugins / "hg_demo_plugin")])
    env = {**os.environ, "PYTHONPATH": path}

    def tasks(*argv: str) -> str:
        cmd = [sys.executable, "-m", "harness_gym.cli", *argv]
        done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "PickLargestToo" not in tasks("list", "tasks")
    assert "PickLargestToo" in tasks("--import", "hg_import_only", "list", "tasks")
    assert "PickLargestToo" in tasks("list", "tasks", "--import", "hg_import_only")


def test_version_prints_the_version(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"], out=io.StringIO())
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == harness_gym.__version__


# -- list, play ------------------------------------------------------------------------------


def test_list_what_and_filters(run: Runner) -> None:
    tasks = run.base(["list", "tasks"])
    assert "ClickButton" in tasks.out and "harness_gym/" not in tasks.out
    envs = ok(run(["list", "envs"]))
    assert "harness_gym/ClickButton-Json-v0" in envs.out and "Tasks:" not in envs.out
    terminal = ok(run(["list", "tasks", "--family", "terminal"]))
    lines = [line for line in terminal.out.splitlines()[3:] if line.strip()]
    assert lines and all(line.split()[1] == "terminal" for line in lines)
    assert "ClickButton" not in terminal.out
    matched = ok(run(["list", "envs", "--match", "ClickButton"]))
    assert matched.out.splitlines() and all("ClickButton" in line for line in matched.out.splitlines())
    assert len(matched.out.splitlines()) < len(envs.out.splitlines())
    for what in ("presets", "factors"):  # these list no task or env: a filter would be ignored
        refused(run(["list", what, "--match", "Click"]), "--match would be ignored")
        refused(run(["list", what, "--family", "web"]), "--family would be ignored")


def test_play_env_and_seed(run: Runner) -> None:
    base = run.base(["play", ENV], stdin="q\n")
    seeded = ok(run(["play", ENV, "--seed", "1"], stdin="q\n"))
    other = ok(run(["play", "harness_gym/ClickButton-ObsMarkdown-v0"], stdin="q\n"))

    def observation(result: Run) -> str:
        return result.out.split("=== observation (step 0) ===")[1]

    assert observation(seeded) != observation(base)  # another instance
    assert observation(other) != observation(base) and "#" in observation(other)  # markdown


# -- eval --------------------------------------------------------------------------------------


def test_eval_rows(run: Runner) -> None:
    base = run.base(EVAL)
    rows = base.rows("rows.jsonl")
    assert len(rows) == 1 and rows[0]["agent"] == "random" and rows[0]["seed"] == 0
    assert {r["agent"] for r in ok(run([*EVAL, "--agent", "oracle"])).rows("rows.jsonl")} == {
        "random",
        "oracle",
    }
    two = ok(run([*EVAL, "--env", "harness_gym/EnterText-Json-v0"])).rows("rows.jsonl")
    assert {r["task_id"] for r in two} == {"ClickButton", "EnterText"}
    assert [r["seed"] for r in ok(run([*EVAL, "--episodes", "3"])).rows("rows.jsonl")] == [0, 1, 2]
    assert [r["seed"] for r in ok(run([*EVAL, "--seed", "7"])).rows("rows.jsonl")] == [7]
    harnessed = ok(run([*EVAL, "--harness", "@W/yaml_harness.yaml"])).rows("rows.jsonl")
    assert harnessed[0]["harness_id"] != rows[0]["harness_id"]
    no_file = ok(run(EVAL[:-2]))
    assert not no_file.files and "Success rate" in no_file.out


def _stored(result: Run, name: str = "rows/trajectories.jsonl.gz") -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.files[name].splitlines()]


def test_eval_trajectories(run: Runner) -> None:
    base = run.base(EVAL)  # with --out the default is pairs: one env, so the first seed
    assert [t["seed"] for t in _stored(base)] == [0] and "rows/sweep.json" in base.files
    assert not any(f.startswith("rows/") for f in ok(run([*EVAL, "--trajectories", "none"])).files)
    three = [*EVAL, "--episodes", "3"]
    every = ok(run([*three, "--trajectories", "all"]))
    rows = every.rows("rows.jsonl")
    assert [(t["seed"], t["success"]) for t in _stored(every)] == [(r["seed"], r["success"]) for r in rows]
    for record, row in zip(_stored(every), rows):
        steps = record["trajectory"]["steps"]
        assert len(steps) == row["steps"] and all(s["observation"] and s["action"] for s in steps)
    assert [t["seed"] for t in _stored(ok(run([*three, "--trajectories", "sample:2"])))] == [0, 1]
    failed = ok(run([*three, "--trajectories", "failures"]))
    lost = [r["seed"] for r in failed.rows("rows.jsonl") if not r["success"]]
    assert [t["seed"] for t in _stored(failed)] == lost and 0 < len(lost) < 3
    # A recording policy needs --out (the trajectories go beside the rows): refused, nothing written.
    no_out = run([*EVAL[:-2], "--trajectories", "all"])
    refused(no_out, "--trajectories all", "give --out")
    assert not no_out.files
    # The folder opens in the viewer and exports, as a sweep's does.
    viewed = ok(run(["view", "@W/rows"], where=every.where))
    assert "rows/view/index.html" in viewed.files and any(
        f.startswith("rows/view/data/t_") for f in viewed.files
    )
    atif = ok(
        run(["export", "--run", "@W/rows", "--format", "atif", "--out", "@W/t.jsonl"], where=every.where)
    )
    assert [a["extra"]["seed"] for a in atif.rows("t.jsonl")] == [0, 1, 2]
    chat = ok(run(["export", "--run", "@W/rows", "--out", "@W/c.jsonl"], where=every.where))
    assert len(chat.rows("c.jsonl")) == 3 and "messages" in chat.rows("c.jsonl")[0]


def test_eval_trajectories_pairs_and_refusals(run: Runner) -> None:
    """``pairs`` over two harnesses of one task keeps the first seed and both sides of every
    pair whose outcomes differ; a folder holding a sweep is never overwritten."""
    reversed_env = "harness_gym/ClickButton-JsonReversed-v0"
    argv = ["eval", "--agent", "@W/harnessed_agent.py:make", "--env", ENV, "--env", reversed_env,
            "--episodes", "6", "--out", "@W/rows.jsonl"]  # fmt: skip
    paired = ok(run(argv))
    rows = paired.rows("rows.jsonl")
    wins = {r["seed"] for r in rows if r["success"]}
    assert wins - {0} and not any(r["success"] for r in rows if r["env_id"].endswith("Reversed-v0"))
    expected = sorted(
        (r["env_id"].split("-")[1], r["seed"]) for r in rows if r["seed"] == 0 or r["seed"] in wins
    )
    assert sorted((t["harness_name"], t["seed"]) for t in _stored(paired)) == expected
    assert json.loads(paired.files["rows/sweep.json"])["factors"] == ["field_order"]
    swept = ok(run(SWEEP))
    clash = run([*EVAL[:-1], "@W/run.jsonl", "--trajectories", "all"], where=swept.where)
    refused(clash, "holds a sweep or search", "give another --out")
    assert clash.files["run/sweep.json"] == swept.files["run/sweep.json"] and "run.jsonl" not in clash.files


@pytest.fixture(scope="module")
def model(run: Runner) -> Path:
    """A text policy trained for one iteration (seconds)."""
    result = run.base(
        [
            "train",
            "--algo",
            "text_policy",
            "--env",
            ENV,
            "--steps",
            "1",
            "--eval-episodes",
            "0",
            "--out",
            "@W/m",
        ]
    )
    return result.where / "m"


def test_eval_model(run: Runner, model: Path) -> None:
    argv = ["eval", "--model", str(model), "--env", ENV, "--episodes", "6", "--out", "@W/rows.jsonl"]
    greedy = ok(run(argv))
    assert "text_policy" in greedy.out and len(greedy.rows("rows.jsonl")) == 6
    assert [t["seed"] for t in _stored(greedy)] == [0]  # --trajectories pairs, the default with --out
    sampled = ok(run([*argv, "--stochastic"]))

    def play(result: Run) -> list[Any]:
        return [(r["steps"], r["episode_return"], r["invalid_actions"]) for r in result.rows("rows.jsonl")]

    assert play(sampled) != play(greedy)  # an untrained policy: its samples differ from its argmax
    refused(run([*argv, "--agent", "oracle"]), "--agent would be ignored")
    refused(run([*argv, "--temperature", "0.5"]), "--temperature would be ignored")
    refused(run([*EVAL, "--stochastic"]), "--stochastic applies to --model only")


def test_eval_llm_options_reach_the_agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seam (no model server here): the agent specs and the in-flight count ``eval`` runs with."""
    import harness_gym.analysis.agent_spec as agent_spec
    import harness_gym.rollout as rollout

    seen = seam(monkeypatch, rollout, "run_batched")
    real, specs = agent_spec.parse_agent, []
    monkeypatch.setattr(agent_spec, "parse_agent", lambda s: specs.append(s) or real(s))
    argv = ["eval", "--env", ENV, "--episodes", "1", "--agent", LLM]
    stopped(argv, tmp_path)
    stopped([*argv, "--temperature", "0.5", "--max-tokens", "9", "--concurrency", "3", "--constrain",
             "--in-flight", "2"], tmp_path)  # fmt: skip
    (_, kw0), (_, kw1) = seen
    assert kw0["in_flight"] == 8 and kw1["in_flight"] == 2
    assert specs[0] == LLM
    assert all(p in specs[1] for p in ("temperature=0.5", "max_tokens=9", "concurrency=3", "constrain="))
    for flag in (["--temperature", "0.5"], ["--in-flight", "2"], ["--constrain"]):
        with pytest.raises(CLIExit, match="applies to language-model agents"):
            main([*EVAL[:-2], *flag], out=io.StringIO())


# -- check -------------------------------------------------------------------------------------


def test_check(run: Runner) -> None:
    check = ["check", "--task", "ClickButton", "--harness", "Json", "--seeds", "1"]
    base = run.base(check)
    assert "checked 1 task(s) against the task rules on 1 seeds" in base.out
    assert "checked 1 (task, harness) pairs on 1 seeds" in base.out and "PASS" not in base.out
    two = ok(run([*check, "--task", "EnterText", "--harness", "@W/yaml_harness.yaml", "--seeds", "2"]))
    assert "checked 2 task(s) against the task rules on 2 seeds" in two.out
    assert "checked 4 (task, harness) pairs on 2 seeds" in two.out
    verbose = ok(run([*check, "--verbose"]))
    assert len(verbose.out.splitlines()) > len(base.out.splitlines())
    harness_only = ok(run([*check, "--no-task-rules"]))
    assert "task rules" not in harness_only.out and "(task, harness) pairs" in harness_only.out


# -- sweep -------------------------------------------------------------------------------------


def test_sweep_what_runs(run: Runner) -> None:
    base = run.base(SWEEP)
    assert base.column("agent") == {'"random"'} and base.column("task_id") == {'"ClickButton"'}
    assert base.column("seed") == {"0"} and len(base.column("harness_id")) == 4

    def sweep(*extra: str) -> Run:
        return ok(run([*SWEEP, *extra]))

    assert sweep("--agent", "oracle").column("agent") == {'"random"', '"oracle"'}
    assert sweep("--tasks", "EnterText").column("task_id") == {'"EnterText"'}
    assert sweep("--space", "@W/space2.yaml").column("harness_id") != base.column("harness_id")
    sample = sweep("--subset", "sample:2")
    assert len(sample.column("harness_id")) == 2
    assert sweep("--subset", "sample:2", "--design-seed", "3").column("harness_id") != sample.column(
        "harness_id"
    )
    refused(run([*SWEEP, "--subset", "all", "--design-seed", "3"]), "--design-seed would be ignored")
    assert sweep("--seeds", "2").column("seed") == {"0", "1"}
    assert sweep("--first-seed", "5").column("seed") == {"5"}
    moved = sweep("--out", "@W/elsewhere")
    assert "elsewhere/episodes.parquet" in moved.files and "run/episodes.parquet" not in moved.files
    refused(run([*SWEEP, "--max-harnesses", "3"]), "would run 4 harnesses (limit 3)")


def test_sweep_ceiling_options(run: Runner) -> None:
    base = run.base(SWEEP)
    assert base.column("ceiling") != {"null"}
    assert ok(run([*SWEEP, "--no-ceiling"])).column("ceiling") == {"null"}
    text = [*SWEEP, "--tasks", "EnterText"]  # a search of more than one node
    assert ok(run(text)).column("ceiling_method") == {'"exact"'}
    assert ok(run([*text, "--node-limit", "1"])).column("ceiling_method") == {'"oracle"'}  # budget spent
    refused(run([*SWEEP, "--no-ceiling", "--node-limit", "5"]), "--node-limit would be ignored")


def _pids(where: Path) -> set[int]:
    return {int(p.name.removeprefix("pid-")) for p in where.glob("pid-*")}


def test_sweep_workers_play_in_other_processes(run: Runner) -> None:
    argv = [*SWEEP, "--agent", "@W/agent.py:make", "--no-ceiling"]
    here = ok(run(argv))
    assert _pids(here.where) == {os.getpid()}
    pool = ok(run([*argv, "--workers", "1"]))
    assert pool.column("success") == here.column("success")
    assert _pids(pool.where) and os.getpid() not in _pids(pool.where)


def test_sweep_chunk_size(run: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seam: the batches the local pool is given (a pool's chunking shows in no output)."""
    import harness_gym.analysis.sweep.run as sweeps  # where run_sweep looks them up

    real = sweeps.run_local
    sizes: list[list[int]] = []

    def spy(batches: list, *args: Any, **kwargs: Any) -> Any:
        sizes.append([len(b) for b in batches])
        return real(batches, *args, **kwargs)

    monkeypatch.setattr(sweeps, "run_local", spy)
    argv = [*SWEEP, "--workers", "1", "--no-ceiling"]
    ok(run(argv))
    ok(run([*argv, "--chunk-size", "3"]))
    assert sizes[0] != sizes[1] and sizes[1] == [3, 1]
    refused(run([*SWEEP, "--chunk-size", "3"]), "--chunk-size would be ignored", "--workers 0")


def test_sweep_ray_address(run: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seam (joining a cluster needs one): the address the Ray executor is given."""
    import harness_gym.analysis.sweep.run as sweeps  # where run_sweep looks them up

    seen = seam(monkeypatch, sweeps, "run_ray")
    argv = [*SWEEP[:-4], "--workers", "1", "--out", "@W/run", "--backend", "ray", "--no-ceiling"]
    stopped(argv, tmp_path / "a")
    stopped([*argv, "--ray-address", "10.1.2.3:6379"], tmp_path / "b")
    assert [args[5] for args, _ in seen] == [None, "10.1.2.3:6379"]
    refused(run([*SWEEP, "--ray-address", "10.1.2.3:6379"]), "--ray-address would be ignored")


@pytest.mark.slow
def test_sweep_backend_ray(run: Runner) -> None:
    """Ray tasks play the cells: the rows are those of the local backend."""
    argv = [*SWEEP[:-4], "--workers", "1", "--out", "@W/run", "--no-ceiling"]
    local = ok(run(argv))
    assert ok(run([*argv, "--backend", "ray"])).column("success") == local.column("success")


def test_sweep_resume_options(run: Runner) -> None:
    where = run.root / "resume"
    ok(run(SWEEP, where=where))
    again = ok(run(SWEEP, where=where))
    assert "4 already done, 0 run" in again.out
    other = [*SWEEP, "--seeds", "2"]
    assert run(other, where=where).code == 2  # another sweep's folder
    assert "8 cells: 0 already done, 8 run" in ok(run([*other, "--overwrite"], where=where)).out
    where = run.root / "retry"
    argv = [*SWEEP[:2], "@W/broken_agent.py:make", *SWEEP[3:], "--no-ceiling"]
    where.mkdir()
    (where / "broken").touch()
    broken = ok(run(argv, where=where))
    assert "4 with errors" in broken.out and "agent broke" in broken.files["run/episodes.parquet"]
    (where / "broken").unlink()
    assert " 0 run" in ok(run(argv, where=where)).out
    retried = ok(run([*argv, "--retry-errors"], where=where))
    assert " 4 run" in retried.out and retried.column("error") == {"null"}


def test_sweep_outputs(run: Runner) -> None:
    base = run.base(SWEEP)
    assert not any(f.startswith("run/report/") for f in base.files) and "next: harness-gym report" in base.out
    assert "sweep" in base.err  # the progress bar
    assert any(f.startswith("run/report/") for f in ok(run([*SWEEP, "--report"])).files)
    ref = ok(run([*SWEEP, "--reference", "oracle"]))
    assert ref.column("agent") == {'"random"', '"oracle"'} and "--reference oracle" in ref.out
    assert len(ref.out) > len(base.out) + 100  # the reference analysis
    assert "sweep" not in ok(run([*SWEEP, "--quiet"])).err
    assert "run/trajectories.jsonl.gz" in base.files
    assert "run/trajectories.jsonl.gz" not in ok(run([*SWEEP, "--trajectories", "none"])).files
    every = ok(run([*SWEEP, "--seeds", "2", "--trajectories", "all"])).files["run/trajectories.jsonl.gz"]
    first = ok(run([*SWEEP, "--seeds", "2", "--trajectories", "sample:1"])).files["run/trajectories.jsonl.gz"]
    assert (len(every.splitlines()), len(first.splitlines())) == (8, 4)


def test_sweep_logs(run: Runner) -> None:
    base = run.base(SWEEP)
    assert not any("logs" in f for f in base.files)
    logged = ok(run([*SWEEP, "--log", "tensorboard"]))
    assert any(f.startswith("run/logs/") and "tfevents" in f for f in logged.files)
    moved = ok(run([*SWEEP, "--log", "tensorboard", "--log-dir", "@W/tb"]))
    assert any(f.startswith("tb/") for f in moved.files) and not any("run/logs" in f for f in moved.files)
    refused(run([*SWEEP, "--log-dir", "@W/tb"]), "--log-dir", "would be ignored")


def test_train_log_dir_without_log_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import harness_gym.baselines.sb3 as sb3

    seam(monkeypatch, sb3, "train")  # a refusal that failed would train: it stops instead
    argv = ["train", "--env", ENV, "--log-dir", "@W/tb", "--out", "@W/m"]
    refused(invoke(argv, tmp_path), "--log-dir", "would be ignored")
    assert not (tmp_path / "m").exists() and not (tmp_path / "tb").exists()


@pytest.mark.parametrize("verb", ["sweep", "search"])
def test_sweep_and_search_llm_options(verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seam (no model server here): the agent and in-flight count the run is started with."""
    import harness_gym.analysis.search as searches
    import harness_gym.analysis.sweep as sweeps

    seen = seam(monkeypatch, *((sweeps, "run_sweep") if verb == "sweep" else (searches, "run_search")))
    base = SWEEP if verb == "sweep" else SEARCH
    argv = [base[0], "--agent", LLM, *base[3:]]  # the LLM agent instead of random
    stopped(argv, tmp_path)
    stopped([*argv, "--temperature", "0.5", "--max-tokens", "9", "--concurrency", "3", "--constrain",
             "--in-flight", "2"], tmp_path)  # fmt: skip
    (args0, kw0), (args1, kw1) = seen
    assert kw0["in_flight"] == 8 and kw1["in_flight"] == 2
    spec0, spec1 = args0[0], args1[0]
    [agent] = spec1.agents if verb == "sweep" else [spec1.agent]
    assert all(p in agent.target for p in ("temperature=0.5", "max_tokens=9", "concurrency=3", "constrain="))
    assert "temperature" in agent.name and spec0 != spec1  # rows record the sampling options
    refused(
        invoke([*(SWEEP if verb == "sweep" else SEARCH), "--in-flight", "2"], tmp_path / "r"), "--in-flight"
    )


# -- report, view --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def swept(run: Runner) -> Path:
    """A sweep folder of random and oracle (for report and view)."""
    return run.base([*SWEEP, "--agent", "oracle", "--tasks", "ClickButton", "EnterText"]).where / "run"


def test_report(run: Runner, swept: Path) -> None:
    base = ok(run(["report", str(swept), "--out", "@W/rep"]))
    markdown = base.files["rep/report.md"]
    titled = ok(run(["report", str(swept), "--out", "@W/rep", "--title", "Zebra title"]))
    assert "Zebra title" in titled.files["rep/report.md"] and "Zebra title" not in markdown
    ref = ok(run(["report", str(swept), "--out", "@W/rep", "--reference", "oracle"]))
    assert ref.files["rep/report.md"] != markdown and len(ref.out) > len(base.out)
    other = ok(run(["report", str(run.base(SWEEP).where / "run"), "--out", "@W/rep"]))
    assert other.files["rep/report.md"] != markdown  # another folder's rows
    default_place = ok(run(["report", str(swept)]))
    assert (swept / "report" / "report.md").is_file() and "rep/" not in default_place.out


def test_view(run: Runner, swept: Path) -> None:
    ok(run(["view", str(swept)]))
    assert (swept / "view" / "index.html").is_file()
    moved = ok(run(["view", str(swept), "--out", "@W/page"]))
    assert "page/index.html" in moved.files
    other = ok(run(["view", str(run.base(SWEEP).where / "run"), "--out", "@W/page"]))
    assert other.files != moved.files  # another run's episodes


def test_view_serve(run: Runner, swept: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seam for the server (it serves until Ctrl-C): the call ``--serve`` makes."""
    import harness_gym.cli.view as view

    calls: list[tuple] = []
    monkeypatch.setattr(view, "serve", lambda *a: calls.append(a[2:4]))
    ok(run(["view", str(swept)]))
    assert calls == []
    ok(run(["view", str(swept), "--serve"]))
    ok(run(["view", str(swept), "--serve", "--port", "8123", "--no-open"]))
    assert calls == [(0, True), (8123, False)]
    refused(run(["view", str(swept), "--port", "8123"]), "--port would be ignored", "--serve")
    refused(run(["view", str(swept), "--no-open"]), "--no-open would be ignored")


# -- search ------------------------------------------------------------------------------------


def _dev_episodes(result: Run) -> int:
    """The dev episodes a search spent, from its summary line."""
    [count] = re.findall(r"^([0-9,]+) dev episodes", result.out, re.MULTILINE)
    return int(count.replace(",", ""))


def test_search_what_runs(run: Runner) -> None:
    base = run.base(SEARCH)
    assert base.column("agent") == {'"random"'} and base.column("task_id") == {'"ClickButton"'}

    def search(*extra: str) -> Run:
        return ok(run([*SEARCH, *extra]))

    assert search("--agent", "oracle").column("agent") == {'"oracle"'}
    assert search("--tasks", "EnterText").column("task_id") == {'"EnterText"'}
    assert search("--space", "@W/space.yaml").column("harness_id") != base.column("harness_id")
    default = search("--default", "@W/yaml_harness.yaml")
    assert default.files["run/final.csv"] != base.files["run/final.csv"]
    assert _dev_episodes(search("--budget", "12")) < _dev_episodes(base)
    assert search("--dev-seeds", "1").column("seed") < base.column("seed")
    assert len(search("--test-seeds", "3").column("seed")) > len(base.column("seed"))
    assert base.column("ceiling") != {"null"} and search("--no-ceiling").column("ceiling") == {"null"}
    moved = search("--out", "@W/elsewhere")
    assert "elsewhere/search.json" in moved.files and "run/search.json" not in moved.files


def test_search_pool_options(run: Runner) -> None:
    base = run.base(SEARCH)
    candidates = base.files["run/candidates.csv"]

    def search(*extra: str) -> str:
        return ok(run([*SEARCH, *extra])).files["run/candidates.csv"]

    raced = [*SEARCH, "--agent", "oracle@Json", "--budget", "16", "--dev-seeds", "4"]  # the budget binds
    assert _dev_episodes(ok(run([*raced, "--eta", "3"]))) != _dev_episodes(ok(run(raced)))
    more = search("--random", "3")
    assert len(more.splitlines()) > len(candidates.splitlines())
    assert search("--random", "3", "--seed", "5") != more
    assert search("--start", "balanced") != candidates
    assert len(search("--budget", "200").splitlines()) < len(
        ok(run([*[a for a in SEARCH if a != "--no-local"], "--budget", "200"]))
        .files["run/candidates.csv"]
        .splitlines()
    )


def test_search_workers_play_in_other_processes(run: Runner) -> None:
    argv = [*SEARCH, "--agent", "@W/agent.py:make", "--no-ceiling"]
    here = ok(run(argv))
    assert _pids(here.where) == {os.getpid()}
    pool = ok(run([*argv, "--workers", "1"]))
    assert _pids(pool.where) and os.getpid() not in _pids(pool.where)


def test_search_resume_options(run: Runner) -> None:
    where = run.root / "search-resume"
    first = ok(run(SEARCH, where=where))
    again = ok(run(SEARCH, where=where))
    assert "0 run now" in again.out and "0 reused" in first.out
    fresh = ok(run([*SEARCH, "--overwrite"], where=where))
    assert "0 reused" in fresh.out
    where = run.root / "search-retry"
    argv = [*SEARCH[:2], "@W/broken_agent.py:make", *SEARCH[3:], "--no-ceiling"]
    where.mkdir()
    (where / "broken").touch()
    broken = run(argv, where=where)
    (where / "broken").unlink()
    assert "agent broke" in broken.files.get("run/episodes.jsonl", "") + broken.err
    plain = run(argv, where=where)
    retried = ok(run([*argv, "--retry-errors"], where=where))
    assert retried.out != plain.out and retried.column("error") == {"null"}


def test_search_outputs(run: Runner) -> None:
    base = run.base(SEARCH)
    assert not any(f.startswith("run/report/") for f in base.files)
    assert any(f.startswith("run/report/") for f in ok(run([*SEARCH, "--report"])).files)
    assert base.err.strip() and not ok(run([*SEARCH, "--quiet"])).err.strip()
    assert "run/trajectories.jsonl.gz" in base.files
    assert "run/trajectories.jsonl.gz" not in ok(run([*SEARCH, "--trajectories", "none"])).files
    logged = ok(run([*SEARCH, "--log", "tensorboard"]))
    assert any(f.startswith("run/logs/") and "tfevents" in f for f in logged.files)
    moved = ok(run([*SEARCH, "--log", "tensorboard", "--log-dir", "@W/tb"]))
    assert any(f.startswith("tb/") for f in moved.files)
    refused(run([*SEARCH, "--log-dir", "@W/tb"]), "--log-dir", "would be ignored")


# -- export ------------------------------------------------------------------------------------


def test_export_played(run: Runner) -> None:
    base = run.base(EXPORT)
    [row] = base.rows("chat.jsonl")

    def export(*extra: str) -> list[dict[str, Any]]:
        return ok(run([*EXPORT, *extra])).rows("chat.jsonl")

    rows = export("--env", "harness_gym/EnterText-Json-v0")
    assert len(rows) == 2 and rows[0] != rows[1]
    assert export("--agent", "random")[0] != row
    assert export("--harness", "@W/yaml_harness.yaml")[0]["harness_id"] != row["harness_id"]
    assert len(export("--episodes", "3")) == 3
    assert export("--seed", "4")[0]["seed"] == 4 != row["seed"]
    assert len(export("--unit", "step")) >= 1 and "messages" in row
    steps = export("--env", "harness_gym/EnterText-Json-v0", "--unit", "step")
    assert len(steps) > 2
    parquet = ok(run(["export", "--env", ENV, "--episodes", "1", "--out", "@W/chat.parquet"]))
    assert json.loads(parquet.files["chat.parquet"])[0]["seed"] == 0
    folder = ok(run(["export", "--env", ENV, "--episodes", "1", "--format", "hf", "--out", "@W/ds"]))
    assert any(f.startswith("ds/") for f in folder.files)


def test_export_run(run: Runner, swept: Path) -> None:
    chat = ok(run(["export", "--run", str(swept), "--out", "@W/t.jsonl"]))
    rows = chat.rows("t.jsonl")
    assert rows and "messages" in rows[0]
    atif = ok(run(["export", "--run", str(swept), "--format", "atif", "--out", "@W/t.jsonl"]))
    assert atif.files["t.jsonl"] != chat.files["t.jsonl"]
    steps = ok(run(["export", "--run", str(swept), "--unit", "step", "--out", "@W/t.jsonl"]))
    assert len(steps.rows("t.jsonl")) > len(rows)
    for extra in (["--episodes", "3"], ["--seed", "2"], ["--agent", "oracle"], ["--harness", "Json"]):
        refused(run(["export", "--run", str(swept), "--out", "@W/t.jsonl", *extra]), "would be ignored")
    refused(run(["export", "--run", str(swept), "--format", "atif", "--unit", "step", "--out", "@W/t.jsonl"]),
            "--unit would be ignored")  # fmt: skip


def test_export_llm_options_reach_the_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seam (no model server here): the agent spec ``export`` builds its agent from."""
    import harness_gym.analysis.agent_spec as agent_spec

    seen = seam(monkeypatch, agent_spec, "parse_agent")
    argv = [*EXPORT, "--agent", LLM]
    stopped(argv, tmp_path)
    stopped(
        [*argv, "--temperature", "0.5", "--max-tokens", "9", "--concurrency", "3", "--constrain"], tmp_path
    )
    assert seen[0][0] == (LLM,)
    assert all(p in seen[1][0][0] for p in ("temperature=0.5", "max_tokens=9", "concurrency=3", "constrain"))
    with pytest.raises(CLIExit):  # export plays one episode at a time: there is no --in-flight
        main([*EXPORT, "--in-flight", "2"], out=io.StringIO())


# -- serve, rootfs -------------------------------------------------------------------------------


def test_serve_options_reach_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seam: openenv is not in this venv (it has its own); the ``serve(...)`` call the verb makes
    after checking every task and harness, with each option's parsed value."""
    import types

    calls: list[dict[str, Any]] = []
    fake = types.ModuleType("harness_gym.integrations.openenv_server")
    fake.serve = lambda **kw: calls.append(kw)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "harness_gym.integrations.openenv_server", fake)
    ok(invoke(["serve"], tmp_path))
    ok(invoke(["serve", "--task", "EnterText", "--task", "ClickButton", "--harness", "@W/yaml_harness.yaml",
               "--host", "0.0.0.0", "--port", "8123", "--max-sessions", "3", "--session-timeout", "0"],
              tmp_path))  # fmt: skip
    base, changed = calls
    assert (base["task"], base["tasks"], base["host"], base["port"]) == (
        "ClickButton",
        ["ClickButton"],
        "127.0.0.1",
        8000,
    )
    assert (changed["task"], changed["tasks"]) == ("EnterText", ["EnterText", "ClickButton"])
    assert base["harness"] == {} and changed["harness"] == {"obs_format": "yaml"}
    assert (changed["host"], changed["port"], changed["max_sessions"]) == ("0.0.0.0", 8123, 3)
    assert (base["max_sessions"], base["session_timeout"], changed["session_timeout"]) == (8, 300.0, None)


def _cache(folder: Path) -> Path:
    """A rootfs cache holding a file system last used 10 days ago, a base and a failed build's log
    (the files a build leaves; building one takes minutes)."""
    import time

    built = folder / "k1deadbeef"
    (built / "root").mkdir(parents=True)
    created = time.time() - 10 * 86400
    (built / "meta.json").write_text(
        json.dumps({"key": "k1deadbeef", "image": "debian:zebra", "created": created})
    )
    (folder / "bases" / "b1").mkdir(parents=True)
    (folder / "bases" / "b1" / "recipe.json").write_text(json.dumps({"suite": "bookworm", "packages": []}))
    (folder / "failed.log").write_text("a failed build\n")
    return folder


def test_rootfs_list_and_prune(run: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_GYM_ROOTFS_CACHE", str(tmp_path / "default"))
    cache = _cache(tmp_path / "cache")
    assert "debian:zebra" not in ok(run(["rootfs", "list"])).out
    listed = ok(run(["rootfs", "--cache", str(cache), "list"]))
    assert "debian:zebra" in listed.out and "bookworm" in listed.out
    lines = [
        json.loads(line)
        for line in ok(run(["rootfs", "--cache", str(cache), "list", "--json"])).out.splitlines()
    ]
    assert [(x["kind"], x.get("image", x.get("key"))) for x in lines] == [
        ("rootfs", "debian:zebra"),
        ("base", "b1"),
    ]

    def prune(*flags: str) -> set[str]:
        ok(run(["rootfs", "--cache", str(cache), "prune", *flags]))
        return {p.name for p in cache.iterdir()} | {f"bases/{p.name}" for p in (cache / "bases").glob("*")}

    assert prune() == {"k1deadbeef", "bases", "bases/b1"}  # only the failed build's log went
    assert prune("--unused-days", "30") == {"k1deadbeef", "bases", "bases/b1"}  # used 10 days ago
    assert prune("--unused-days", "5") == {"bases", "bases/b1"}
    _cache(tmp_path / "cache2")
    cache = tmp_path / "cache2"
    assert prune("--all") == {"bases", "bases/b1"}
    assert prune("--bases") == {"bases"}


def test_rootfs_build_options_reach_the_builder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seam: a build takes minutes (mmdebstrap); the ``build_rootfs`` call each option shapes."""
    from harness_gym.envs.terminal import rootfs

    seen = seam(monkeypatch, rootfs, "build_rootfs")
    stopped(["rootfs", "--cache", "@W/c", "build", "--from", "python:3.12-slim"], tmp_path)
    stopped(["rootfs", "build", "--from", "debian:bookworm", "--run", "echo hi", "--no-progress"], tmp_path)
    folder = ROOT / "tests" / "fixtures" / "harbor" / "multi-step"
    stopped(["rootfs", "build", str(folder)], tmp_path)
    (a0, k0), (a1, k1), (a2, k2) = seen
    assert a0[0] == "python:3.12-slim" and a0[1] == [] and k0["cache"] == tmp_path / "c"
    assert a1[0] == "debian:bookworm" and [s.args for s in a1[1]] == [("echo hi",)]
    assert k0["progress"] is True and k1["progress"] is False and k1["cache"] != k0["cache"]
    assert a2[2] is not None  # the task folder's build context


# -- validate ----------------------------------------------------------------------------------


def test_validate(run: Runner) -> None:
    argv = ["validate", "--task", "ClickButton", "--harness", "Json", "--seeds", "1"]
    base = run.base(argv)
    assert "validated 1 task(s) under 1 (task, harness) pair(s) on 1 seed(s)" in base.out
    more = ok(run([*argv, "--task", "EnterText", "--harness", "@W/yaml_harness.yaml", "--seeds", "2"]))
    assert "validated 2 task(s) under 4 (task, harness) pair(s) on 2 seed(s)" in more.out
    verbose = ok(run([*argv, "--verbose"]))
    assert len(verbose.out.splitlines()) > len(base.out.splitlines())
    report = json.loads(ok(run([*argv, "--json"])).out)
    assert report["ok"] is True and report["checks"]
    refused(run([*argv, "--json", "--verbose"]), "--verbose would be ignored")


def test_validate_task_folders() -> None:
    """Seam (a Harbor task runs in a sandbox): the task ids ``validate`` plans from ``--tasks``."""
    from harness_gym.cli import validate

    folder = str(ROOT / "tests" / "fixtures" / "harbor")
    parse = build_parser().parse_args
    plain, _ = validate._task_ids(parse(["validate"]))
    folders, _ = validate._task_ids(parse(["validate", "--tasks", folder]))
    assert "ClickButton" in plain and "ClickButton" not in folders and folders
    assert set(folders).isdisjoint(plain)
