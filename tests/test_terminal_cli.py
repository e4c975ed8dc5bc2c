"""The harness-gym command on terminal ids: play, eval (globs), check, sweep and report."""

from __future__ import annotations

import io
import json

import pytest

import harness_gym  # noqa: F401 - registers the ids
from harness_gym.cli import main
from harness_gym.core.registry import FAMILY_ENV_IDS, get_task, make_env
from harness_gym.envs.terminal.env import TerminalEnv
from harness_gym.envs.terminal.sandbox_view import bwrap_problem
from harness_gym.envs.terminal.tasks import TermSortUnique

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}")


def run(*argv: str, stdin: str = "") -> str:
    out = io.StringIO()
    assert main(list(argv), out=out, inp=io.StringIO(stdin)) == 0
    return out.getvalue()


def test_registry_knows_terminal_tasks_outside_tasks() -> None:
    assert get_task("TermSortUnique") is TermSortUnique
    env = make_env("TermSortUnique", {"family_options": {"terminal": {"shell": "persistent"}}})
    assert isinstance(env, TerminalEnv) and env.terminal.shell == "persistent"
    env.close()
    assert "harness_gym/TermSortUnique-TerminusStyle-v0" in FAMILY_ENV_IDS
    assert "harness_gym/TermSortUnique-v0" not in FAMILY_ENV_IDS  # the preset-less id takes harness=


def test_play_a_terminal_id_by_hand() -> None:
    text = run("play", "harness_gym/TermSortUnique-MiniSweAgentStyle-v0", "--seed", "1", stdin="?\n#0\n#0\n")
    assert "```bash" in text and "episode over" in text


def test_eval_with_a_glob_over_terminal_presets(tmp_path) -> None:
    rows = tmp_path / "rows.jsonl"
    text = run(
        "eval",
        "--agent",
        "oracle",
        "--env",
        "harness_gym/TermCsvToJson-*Style-v0",
        "--episodes",
        "1",
        "--out",
        str(rows),
    )
    assert "TermCsvToJson" in text and "100%" in text
    got = [json.loads(line) for line in rows.read_text().splitlines()]
    assert len(got) == 3 and all(r["success"] for r in got) and len({r["harness_id"] for r in got}) == 3


def test_check_a_terminal_task() -> None:
    text = run("check", "--task", "TermSortUnique", "--harness", "Json", "--seeds", "1", "--no-task-rules")
    assert "1 ok, 0 with failures" in text


@pytest.mark.slow
def test_sweep_and_report_over_terminal_options(tmp_path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(
        "factors:\n  family_options:\n    - {}\n    - {terminal: {shell: persistent, result_format: xml}}\n"
    )
    out = tmp_path / "sweep"
    run(
        "sweep",
        "--agent",
        "oracle",
        "--tasks",
        "TermSortUnique",
        "--space",
        str(space),
        "--subset",
        "all",
        "--seeds",
        "1",
        "--workers",
        "0",
        "--no-ceiling",
        "--out",
        str(out),
        "--quiet",
    )
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["success"] for r in rows) and len({r["harness_id"] for r in rows}) == 2
    run("report", str(out))
    assert (out / "report" / "report.md").exists()
