"""Every option of ``harness-gym train`` is read by the algo it is given with, or refused.

The rule lives in one table (:data:`harness_gym.cli.train.READ_BY`: which algos read each
option that not every algo reads); this test walks argparse's own definitions, so a new option
fails here until it is either read by every algo (:data:`EVERY_ALGO`) or in the table, and
every (option, algo that does not read it) pair is refused with one line before any work.
The effect of the options an algo reads is tested where the algo is (``tests/test_sb3.py``,
``tests/test_text_policy.py``, ``tests/test_sft_lm.py``, ``tests/test_grpo_lm.py``,
``tests/test_cli_options_applied.py``).
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from harness_gym.cli import CLIExit, build_parser, main
from harness_gym.cli.train import READ_BY, TRAIN_ALGOS

#: Options every algo reads.
EVERY_ALGO = {
    "algo",
    "env",
    "harness",
    "seed",
    "out",
    "hyperparams",
    "threads",
    "eval_episodes",
    "log",
    "log_dir",
}
#: A valid value other than the default, per option (flags: no value).
VALUES: dict[str, list[str]] = {
    "steps": ["7"], "max_actions": ["8"], "features_dim": ["64"], "menu_dim": ["0"], "n_envs": ["2"],
    "iterations": ["3"], "grouping": ["cross"], "lm_model": ["/nonexistent"], "space": ["s.yaml"],
    "subset": ["all"], "micro_batch": ["2"], "train_seeds": ["8"], "train_seed_start": ["5"],
    "learning_rate": ["0.1"], "precision": ["auto"], "gradient_checkpointing": [],
    "max_context_tokens": ["512"], "lora_r": ["4"], "epochs": ["2"], "batch_size": ["4"],
    "unit": ["episode"], "group_size": ["2"], "groups_per_step": ["2"], "beta": ["0.1"],
    "max_tokens": ["16"], "temperature": ["0.5"], "vllm_mode": ["server"], "lr_scheduler": ["constant"],
    "warmup_steps": ["0"], "eval_every": ["5"], "curve_seeds": ["4"], "stop_at": ["0.5"],
    "trajectories": ["all"],
}  # fmt: skip


def _train_actions() -> list[argparse.Action]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    skip = {"help", "debug", "imports"}
    return [a for a in sub.choices["train"]._actions if a.option_strings and a.dest not in skip]


def test_every_train_option_is_in_the_table() -> None:
    dests = {a.dest for a in _train_actions()}
    missing = dests - EVERY_ALGO - set(READ_BY)
    assert not missing, f"options no algo is said to read (add them to READ_BY or EVERY_ALGO): {missing}"
    assert not (EVERY_ALGO & set(READ_BY))
    assert set(VALUES) == set(READ_BY)
    assert all(set(algos) <= set(TRAIN_ALGOS) for algos in READ_BY.values())


def _flag(dest: str) -> str:
    [action] = [a for a in _train_actions() if a.dest == dest]
    return action.option_strings[-1]


CASES = [(dest, algo) for dest, algos in READ_BY.items() for algo in TRAIN_ALGOS if algo not in algos]


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Training that starts is a failure of the refusal: it fails at once instead of training
    (a refusal that broke once ran five real trainings here, GRPO among them, for 20 minutes)."""
    import harness_gym.baselines.sb3 as sb3
    import harness_gym.cli.train as train
    import harness_gym.cli.train_lm as train_lm

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("training started: the option was not refused before any work")

    monkeypatch.setattr(train_lm, "run", started)
    monkeypatch.setattr(train, "_train_text_policy", started)
    monkeypatch.setattr(sb3, "train", started)


@pytest.mark.parametrize(("dest", "algo"), CASES, ids=[f"{d}-{a}" for d, a in CASES])
@pytest.mark.usefixtures("no_training")
def test_an_option_the_algo_does_not_read_is_refused(dest: str, algo: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["train", "--algo", algo, "--env", "harness_gym/ClickButton-Json-v0", "--out", str(out)]
    with pytest.raises(CLIExit) as err:
        main([*argv, _flag(dest), *VALUES[dest]], out=io.StringIO())
    line = str(err.value)
    assert (
        err.value.code == 2 and f"{_flag(dest)} is for " in line and f"--algo {algo} would ignore it" in line
    )
    assert not out.exists()  # refused before anything was written


def _all_actions() -> list[tuple[str, argparse.Action]]:
    found: list[tuple[str, argparse.Action]] = []

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}".strip())
            else:
                found.append((prefix, action))

    walk(build_parser(), "")
    return found


def test_no_option_of_any_verb_takes_a_bare_float_or_int() -> None:
    """``type=float`` takes nan and inf (``serve --session-timeout nan`` passed); ``type=int``
    takes any bound. Every number goes through the checked types of ``cli/common.py``."""
    bare = [f"{verb} {a.option_strings or a.dest}" for verb, a in _all_actions() if a.type in (float, int)]
    assert not bare, bare


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--session-timeout", "nan"],
        ["rootfs", "prune", "--unused-days", "nan"],
        ["search", "--agent", "random", "--tasks", "ClickButton", "--eta", "1", "--out", "x"],
        ["serve", "--port", "65536"],
        ["view", "runs/x", "--port", "-1"],
        ["view", "runs/x", "--port", "70000"],
    ],
)
def test_numbers_that_passed_are_refused(argv: list[str]) -> None:
    with pytest.raises(CLIExit) as err:
        main(argv, out=io.StringIO())
    assert err.value.code == 2 and "must be" in str(err.value), str(err.value)
