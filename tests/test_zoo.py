"""experiments/zoo.py (issue 48): the table it renders from its runs, its bad inputs, a reduced run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.script_loader import load_script

zoo = load_script("experiments/zoo.py")


def results_with(runs: dict[str, tuple[int, float]], tasks: list[str]) -> dict[str, Any]:
    """A zoo.json whose canonical runs won ``wins`` of 100 episodes in ``minutes`` CPU minutes."""
    out: dict[str, Any] = {"runs": {}, "tasks": tasks, "eval_episodes": 100, "ceilings": {}}
    for task in tasks:
        out["ceilings"][task] = {"Json": {"mean": 1.0 if task != "Capped" else 0.5, "exact": True}}
    for key, (wins, minutes) in runs.items():
        trainer, task = key.split("|")
        cell = zoo.Cell(trainer, task, ("Json",), 0)
        out["runs"][cell.key] = {
            "cell": {"trainer": trainer, "task": task, "train": ["Json"], "seed": 0},
            "key": cell.key,
            "cpu_seconds": minutes * 60,
            "steps": 10,
            "eval": {"Json": {"wins": wins, "episodes": 100}},
        }
    return out


def test_the_share_of_the_ceiling_and_the_targets_count_what_the_runs_reached() -> None:
    results = results_with(
        {
            "text_policy|A": (95, 2.0),  # 95% of a ceiling of 1: met
            "text_policy|B": (89, 2.0),  # 89%: missed
            "maskable_ppo|B": (92, 40.0),  # 92%, but over the 30-minute budget: missed
            "text_policy|Capped": (46, 1.0),  # 0.46 of a 0.5 ceiling = 92%: met
        },
        ["A", "B", "Capped"],
    )
    rows = {(r["trainer"], r["task"]): r for r in zoo.summarize(results)}
    assert rows[("text_policy", "Capped")]["share"] == pytest.approx(0.92)
    assert rows[("text_policy", "A")]["low"] < 0.95 < rows[("text_policy", "A")]["high"]
    by = {k: v for k, v in rows.items()}
    lines = zoo.targets(by, ["maskable_ppo", "text_policy"], ["A", "B", "Capped"])
    assert "2 of 3 tasks (missed: B)" in lines[0]
    assert any(line.startswith("- text_policy: 2 of 3") for line in lines)
    assert any(line.startswith("- maskable_ppo: 0 of 3") for line in lines)
    page = zoo.render(results, Path("docs"), "python experiments/zoo.py")
    assert "**0.950**" in page and "**0.890**" not in page and "not run" in page  # maskable_ppo on A


def test_from_results_refuses_a_file_that_is_no_zoo_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "zoo.json"
    bad.write_text(json.dumps({"rows": []}))
    with pytest.raises(SystemExit) as err:
        zoo.main(["--from-results", str(bad)])
    assert err.value.code == 2
    assert "not a zoo.json written by this script" in capsys.readouterr().err
    assert not (tmp_path / "zoo.md").exists()


@pytest.mark.parametrize(
    ("argv", "words"),
    [(["--seeds", "0"], "--seeds must be at least 1"), (["--eval-episodes", "0"], "--eval-episodes must"),
     (["--tasks", "Nope"], "unknown task(s) Nope")],
)  # fmt: skip
def test_bad_counts_and_tasks_are_one_line(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as err:
        zoo.main([*argv, "--out", "/nonexistent/never-written"])
    assert err.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "error:" in last and words in last, last
    assert not Path("/nonexistent/never-written").exists()


@pytest.mark.slow
def test_a_reduced_zoo_run_trains_through_harness_gym_train_and_learns_enter_text(tmp_path: Path) -> None:
    """The text policy's tuned entry on EnterText, 60 held-out episodes: its interval clears 0.5."""
    assert zoo.main(["--trainers", "text_policy", "--tasks", "EnterText", "--eval-episodes", "60",
                     "--no-multi", "--workers", "1", "--out", str(tmp_path)]) == 0  # fmt: skip
    results = json.loads((tmp_path / "zoo.json").read_text())
    (run,) = results["runs"].values()
    assert run["tuned_source"].endswith("text_policy.yaml#EnterText") and run["cpu_seconds"] > 0
    (row,) = zoo.summarize(results)
    assert row["low"] > 0.5, row
    assert (tmp_path / "zoo.md").read_text().count("EnterText") >= 2 and (tmp_path / "zoo.png").exists()
