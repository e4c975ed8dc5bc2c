"""``eval`` and ``train``'s evaluation episodes record trajectories (issue 41, section 1).

``eval --out FILE`` stores them in the run folder named like FILE without its suffix,
``train`` in ``--out/eval``; both folders have a sweep's layout, so ``view`` and
``export --run`` read them (:mod:`harness_gym.analysis.eval_run`). The CLI option walk
(``tests/test_cli_every_option.py``) covers ``eval --trajectories``; this file covers ``train``
(SB3 and the text policy) and the folder's rules.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from harness_gym.analysis.eval_run import run_folder
from harness_gym.cli import CLIExit, main
from harness_gym.rows.trajectories import read_trajectories

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ENV = "harness_gym/ClickButton-Json-v0"
REVERSED = "harness_gym/ClickButton-JsonReversed-v0"
TINY = json.dumps({"n_steps": 64, "batch_size": 64, "n_epochs": 1})


def cli(*argv: str) -> str:
    out = io.StringIO()
    assert main(list(argv), out=out) == 0
    return out.getvalue()


def refusal(*argv: str) -> str:
    with pytest.raises(CLIExit) as err:
        main(list(argv), out=io.StringIO())
    assert err.value.code == 2
    return str(err.value)


def rows_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()]


def test_run_folder_is_the_rows_file_without_its_suffix() -> None:
    assert run_folder("runs/ev.jsonl") == Path("runs/ev")
    assert run_folder("runs/ev.csv") == Path("runs/ev")
    assert run_folder("runs/ev") == Path("runs/ev.run")  # never the rows file itself


def test_train_sb3_records_its_evaluation_episodes(tmp_path: Path) -> None:
    train = ["train", "--algo", "maskable_ppo", "--env", ENV, "--steps", "64", "--n-envs", "1",
             "--hyperparams", TINY, "--eval-episodes", "3"]  # fmt: skip
    text = cli(*train, "--trajectories", "all", "--out", str(tmp_path / "all"))
    folder = tmp_path / "all" / "eval"
    assert f"in {folder}" in text
    stored = read_trajectories(folder)
    rows = rows_of(folder)
    assert sorted(stored) == [0, 1, 2] and [r["seed"] for r in rows] == [0, 1, 2]
    for index, row in enumerate(rows):
        record = stored[index]
        assert (record["agent"], record["harness_name"], record["seed"]) == ("maskable_ppo", "Json", index)
        steps = record["trajectory"]["steps"]
        assert len(steps) == row["steps"] and all(s["observation"] and s["action"] for s in steps)
        assert record["success"] == row["success"]
    cli(*train, "--trajectories", "none", "--out", str(tmp_path / "none"))
    assert (tmp_path / "none" / "model.zip").exists() and not (tmp_path / "none" / "eval").exists()
    cli(*train, "--trajectories", "sample:2", "--out", str(tmp_path / "two"))
    assert sorted(read_trajectories(tmp_path / "two" / "eval")) == [0, 1]
    atif = tmp_path / "t.jsonl"
    cli("export", "--run", str(folder), "--format", "atif", "--out", str(atif))
    assert [json.loads(line)["extra"]["seed"] for line in atif.read_text().splitlines()] == [0, 1, 2]


def test_train_text_policy_records_the_same_greedy_episodes(tmp_path: Path) -> None:
    """Recorded (one episode at a time) or not (batched), the greedy evaluation plays the same
    episodes: the printed success rates are equal; ``pairs`` (the default) keeps the first seed
    under each harness and both sides of every seed whose outcomes differ."""
    train = ["train", "--algo", "text_policy", "--env", ENV, "--env", REVERSED, "--steps", "2",
             "--eval-episodes", "6"]  # fmt: skip
    recorded = cli(*train, "--out", str(tmp_path / "rec"))
    plain = cli(*train, "--trajectories", "none", "--out", str(tmp_path / "plain"))

    def rates(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("success on")]

    assert len(rates(recorded)) == 2 and rates(recorded) == rates(plain)
    assert not (tmp_path / "plain" / "eval").exists()
    folder = tmp_path / "rec" / "eval"
    rows = rows_of(folder)
    outcome = {(r["harness_name"], r["seed"]): r["success"] for r in rows}
    differ = {s for s in range(6) if outcome[("Json", s)] != outcome[("JsonReversed", s)]}
    expected = sorted((h, s) for h, s in outcome if s == 0 or s in differ)
    stored = read_trajectories(folder)
    assert sorted((t["harness_name"], t["seed"]) for t in stored.values()) == expected
    assert json.loads((folder / "sweep.json").read_text())["factors"] == ["field_order"]
    cli("view", str(folder))
    assert (folder / "view" / "index.html").exists()


def test_recording_without_episodes_or_a_place_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "m"
    line = refusal("train", "--algo", "text_policy", "--env", ENV, "--eval-episodes", "0",
                   "--trajectories", "all", "--out", str(out))  # fmt: skip
    assert "--eval-episodes 0 plays none" in line and not out.exists()
    (tmp_path / "ev").write_text("not a folder\n")
    rows = tmp_path / "ev.jsonl"
    line = refusal("eval", "--env", ENV, "--agent", "random", "--episodes", "1", "--out", str(rows))
    assert "is a file" in line and not rows.exists()  # refused before any episode ran
    assert (tmp_path / "ev").read_text() == "not a folder\n"
    # An earlier eval's folder is rewritten, not appended to.
    other = tmp_path / "again.jsonl"
    for episodes in ("3", "1"):
        cli("eval", "--env", ENV, "--agent", "random", "--episodes", episodes, "--trajectories", "all",
            "--out", str(other))  # fmt: skip
    assert sorted(read_trajectories(tmp_path / "again")) == [0] and len(rows_of(tmp_path / "again")) == 1
