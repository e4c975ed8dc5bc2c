"""Progress on stderr: a tqdm bar on a terminal; in a log (a file, a pipe) plain lines, one at
most per update and per ``HARNESS_GYM_PROGRESS_INTERVAL`` seconds, never carriage-return
redraws (a run once wrote 353 of them into its log). Line counts, not times, are asserted."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness_gym.progress import (
    PROGRESS_INTERVAL,
    PROGRESS_INTERVAL_ENV,
    LineProgress,
    progress,
    progress_bar,
    progress_interval,
    trainer_progress,
)

ROOT = Path(__file__).resolve().parents[1]


def run_cli(tmp_path: Path, *argv: str, interval: str | None = None) -> tuple[int, str]:
    """Run ``harness-gym ARGV`` in a fresh process with stderr to a file (not a terminal)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(PROGRESS_INTERVAL_ENV, None)
    if interval is not None:
        env[PROGRESS_INTERVAL_ENV] = interval
    err = tmp_path / "stderr.log"
    with err.open("w") as fh:
        proc = subprocess.run(
            [sys.executable, "-m", "harness_gym.cli", *argv],
            stdout=subprocess.DEVNULL,
            stderr=fh,
            cwd=tmp_path,
            env=env,
            timeout=600,
        )
    return proc.returncode, err.read_text()


def progress_lines(text: str, desc: str) -> list[str]:
    """The lines of ``text`` that show the progress of ``desc`` (a regular expression)."""
    return [line for line in text.splitlines() if re.match(f"{desc}: ", line)]


SWEEP = ["sweep", "--agent", "random", "--agent", "oracle", "--tasks", "ClickButton", "--space", "default",
         "--subset", "sample:2", "--seeds", "3", "--workers", "0"]  # fmt: skip
CELLS = 2 * 2 * 3  # one row-writer update per cell (--workers 0)


@pytest.mark.parametrize("interval", [None, "0"], ids=["default-interval", "every-update"])
def test_a_sweep_into_a_log_writes_lines_not_redraws(tmp_path: Path, interval: str | None) -> None:
    code, err = run_cli(tmp_path, *SWEEP, "--out", "sw", interval=interval)
    assert code == 0, err
    assert "\r" not in err
    lines = progress_lines(err, "sweep sw-[0-9a-f]+")
    # at most one line per update, and the final count always
    assert 1 <= len(lines) <= CELLS, err
    assert f": 100% {CELLS}/{CELLS} [" in lines[-1]
    if interval == "0":
        assert [line.split()[3] for line in lines] == [f"{n}/{CELLS}" for n in range(1, CELLS + 1)]


def test_text_policy_training_into_a_log_writes_at_most_a_line_per_iteration(tmp_path: Path) -> None:
    code, err = run_cli(
        tmp_path, "train", "--algo", "text_policy", "--env", "harness_gym/ClickButton-Json-v0",
        "--iterations", "3", "--hyperparams", '{"instances": 2, "group_size": 2}', "--eval-episodes", "0",
        "--out", "tp", interval="0",
    )  # fmt: skip
    assert code == 0, err
    assert "\r" not in err
    lines = progress_lines(err, "grpo")
    assert [line.split()[2] for line in lines] == ["1/3", "2/3", "3/3"]  # interval 0: one per iteration
    assert all("success=" in line and "kl=" in line for line in lines)  # the postfix is kept


@pytest.mark.parametrize("bad", ["abc", "-1", "nan", "inf", "10s"])
def test_a_bad_interval_is_refused_before_any_work(tmp_path: Path, bad: str) -> None:
    code, err = run_cli(tmp_path, *SWEEP, "--out", "sw", interval=bad)
    assert code == 2
    assert err.strip() == (
        f"harness-gym: error: {PROGRESS_INTERVAL_ENV} must be a number of seconds >= 0, got {bad!r}"
    )
    assert not (tmp_path / "sw").exists()


def test_the_interval_is_defined_once_and_overridden_by_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(PROGRESS_INTERVAL_ENV, raising=False)
    assert progress_interval() == PROGRESS_INTERVAL
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, " 2.5 ")
    assert progress_interval() == 2.5
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, "")
    assert progress_interval() == PROGRESS_INTERVAL


@pytest.mark.parametrize("updates", [0, 1, 2, 50])
def test_line_progress_bounds(updates: int) -> None:
    """An interval never reached: no line during the work, one line (the final count) at close;
    interval 0: one line per update; no update: no line."""
    for interval, want in ((float("inf"), min(updates, 1)), (0.0, updates)):
        out = io.StringIO()
        bar = LineProgress(updates, "work", "it", interval, out)
        for _ in range(updates):
            bar.update(1)
        bar.update(0)  # nothing new: no line
        bar.close()
        bar.close()  # closing twice writes nothing more
        lines = out.getvalue().splitlines()
        assert len(lines) == want
        if updates:
            assert lines[-1].startswith(f"work: 100% {updates}/{updates} ")


def test_line_progress_without_a_total_and_with_postfixes() -> None:
    out = io.StringIO()
    bar = LineProgress(0, "rootfs", "step", 0.0, out)
    bar.set_postfix_str("cache 0.10 GB", refresh=False)
    bar.update(2)
    bar.set_postfix(success="0.50", kl="0.010")
    bar.update(1)
    bar.write("a note", file=out)
    bar.close()
    first, second, note = out.getvalue().splitlines()
    assert first.startswith("rootfs: 2 [") and first.endswith(", cache 0.10 GB]")
    assert second.startswith("rootfs: 3 [") and second.endswith(", success=0.50, kl=0.010]")
    assert note == "a note"


def test_a_terminal_gets_a_tqdm_bar_and_a_file_gets_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    from tqdm import tqdm

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    bar = progress_bar(3, "file")
    assert isinstance(bar, LineProgress)
    bar.close()
    assert progress_bar(3, "off", enabled=False) is None
    assert list(progress(range(3), 3, "it")) == [0, 1, 2]
    assert sys.stderr.getvalue().splitlines()[-1].startswith("it: 100% 3/3 ")
    leader, follower = os.openpty()  # a real terminal
    with os.fdopen(follower, "w") as tty:
        monkeypatch.setattr(sys, "stderr", tty)
        bar = progress_bar(3, "tty")
        assert isinstance(bar, tqdm)
        bar.close()
    os.close(leader)


def test_transformers_trainers_show_lines_in_a_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a log the trainer's own tqdm bars are off and a callback writes the steps as lines;
    on a terminal the trainer keeps its bars."""
    pytest.importorskip("transformers")
    from transformers import TrainerState

    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, "0")
    assert trainer_progress("sft-lm", enabled=False) == (True, [])
    from transformers.utils import logging as transformers_logging

    disable_tqdm, [callback] = trainer_progress("sft-lm")
    assert disable_tqdm
    assert not transformers_logging.is_progress_bar_enabled()  # loading and writing weights too
    transformers_logging.enable_progress_bar()
    state = TrainerState(max_steps=4)
    callback.on_train_begin(None, state, None)
    for step in (1, 2, 3, 4):
        state.global_step = step
        callback.on_step_end(None, state, None)
    callback.on_train_end(None, state, None)
    lines = progress_lines(log.getvalue(), "sft-lm")
    assert [line.split()[2] for line in lines] == ["1/4", "2/4", "3/4", "4/4"]
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as tty:
        monkeypatch.setattr(sys, "stderr", tty)
        assert trainer_progress("sft-lm") == (False, [])
    os.close(leader)
