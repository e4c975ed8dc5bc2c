"""The harness-gym command: list, play (a person at the terminal), eval."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from harness_gym import PRESETS, TASKS
from harness_gym.cli import main
from harness_gym.core.presets import preset_applies


def run(*argv: str, stdin: str = "") -> str:
    out = io.StringIO()
    assert main(list(argv), out=out, inp=io.StringIO(stdin)) == 0
    return out.getvalue()


def test_list_shows_tasks_presets_and_factors() -> None:
    text = run("list")
    for name in [*TASKS, *PRESETS, "obs_format", "tool_naming", "invalid_action"]:
        assert name in text
    envs = run("list", "envs", "--family", "web").split()
    # Every preset that applies to a task (web conventions bind only to tasks with their tools).
    applies = [(t, p) for t in TASKS for p in PRESETS if preset_applies(p, TASKS[t])]
    assert len(envs) == len(applies) and ("ClickButton", "WebArenaStyle") in applies


def test_list_envs_shows_every_family_and_filters() -> None:
    """Every registered ``<Task>-<Preset>-v0`` id of every family (it showed the web family's
    384 of 4,256), and ``--family`` / ``--match`` narrow it."""
    import gymnasium as gym

    from harness_gym.core.registry import DEPRECATED_PRESETS

    envs = run("list", "envs").split()
    registered = {
        i
        for i in gym.registry
        if i.startswith("harness_gym/") and i.count("-") == 2 and i.split("-")[1] not in DEPRECATED_PRESETS
    }
    assert set(envs) == registered and len(envs) == len(set(envs))
    assert {"harness_gym/TermFixBug-MiniSweAgentStyle-v0", "harness_gym/BrowserClickButton-Json-v0"} <= set(
        envs
    )
    terminal = run("list", "envs", "--family", "terminal").split()
    assert terminal and all(i.startswith("harness_gym/Term") for i in terminal)
    assert run("list", "envs", "--match", "ClickButton-Json-").split() == [
        "harness_gym/ClickButton-Json-v0",
        "harness_gym/BrowserClickButton-Json-v0",
    ]
    tasks = run("list", "tasks", "--family", "terminal")
    assert "TermFixBug" in tasks and "ClickButton" not in tasks and "terminal" in tasks


def test_play_by_hand_reaches_the_end() -> None:
    # '#N' picks a legal action; '?' asks for the oracle; free text is parsed like agent output.
    text = run(
        "play",
        "harness_gym/ClickButton-BundlePython-v0",
        "--seed",
        "0",
        stdin="?\nclick(ref=999)\nnot an action\n" + "#0\n" * 3,
    )
    assert "=== system prompt ===" in text
    assert "oracle: click(ref=" in text
    assert "illegal_action: no visible element with ref 999" in text
    assert "malformed" in text
    assert "episode over" in text


def test_play_quits_on_q() -> None:
    assert "episode over" not in run("play", "harness_gym/EnterText-BundleYaml-v0", stdin="q\n")


def test_eval_prints_a_task_by_preset_table_and_writes_rows(tmp_path) -> None:
    out = tmp_path / "rows.jsonl"
    text = run(
        "eval",
        "--agent",
        "oracle",
        "--agent",
        "random",
        "--env",
        "harness_gym/ClickButton-*",
        "--env",
        "harness_gym/EnterText-Json-v0",
        "--episodes",
        "4",
        "--seed",
        "10",
        "--out",
        str(out),
    )
    assert "agent=oracle" in text and "agent=random" in text
    oracle_table = text.split("agent=oracle")[1].split("agent=random")[0]
    assert "ClickButton" in oracle_table and "100%" in oracle_table
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == (len(PRESETS) + 1) * 2 * 4
    assert {r["seed"] for r in rows} == {10, 11, 12, 13}
    row = rows[0]
    from harness_gym import Harness, make_env

    env = make_env(row["task_id"], Harness.from_dict(row["harness"]))
    assert env.reset(seed=row["seed"])[1]["harness_id"] == row["harness_id"]


def test_eval_harness_replaces_every_envs_harness_for_agents(tmp_path) -> None:
    """``--harness`` with ``--agent`` (a trained folder's ``harness.yaml``, as ``hf:FOLDER`` is
    evaluated): every episode runs under that harness, preset name or YAML file."""
    from harness_gym import Harness
    from harness_gym.core.presets import resolve_harness

    spec = tmp_path / "harness.yaml"
    spec.write_text("obs_format: markdown\nfield_order: reversed\n")
    for given, expected in (("Json", resolve_harness("Json")), (str(spec), Harness.from_yaml(spec))):
        out = tmp_path / "rows.jsonl"
        envs = ["--env", "harness_gym/ClickButton-v0", "--env", "harness_gym/EnterText-v0"]
        run("eval", "--agent", "oracle", *envs, "--harness", given, "--episodes", "2", "--out", str(out))
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(rows) == 4 and {r["harness_id"] for r in rows} == {expected.id}
        assert all(r["success"] for r in rows)


def test_eval_writes_csv(tmp_path) -> None:
    out = tmp_path / "rows.csv"
    run(
        "eval",
        "--agent",
        "oracle",
        "--env",
        "harness_gym/ChooseList-Json-v0",
        "--episodes",
        "2",
        "--out",
        str(out),
    )
    lines = out.read_text().splitlines()
    assert lines[0].startswith("task_id,harness_id,harness,seed") and len(lines) == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "--env", "harness_gym/NoSuchTask-Json-v0"], "unknown env id"),
        (["eval", "--env", "harness_gym/Nothing*"], "no registered env matches"),
        (["eval", "--env", "all", "--agent", "genius"], "unknown agent 'genius'"),
    ],
)
def test_eval_bad_input_is_a_clear_error(argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        main(argv, out=io.StringIO())


def test_console_script_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "harness_gym.cli", "list", "presets"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "JsonReversed" in proc.stdout
