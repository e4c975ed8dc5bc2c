"""Options that were accepted and then not applied (issue 43 section 2): each one now changes
what runs or is refused before any work. ``tests/test_cli_option_table.py`` holds the rule that
every option of ``train`` is read by the algo it is given with."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from harness_gym.cli import CLIExit, main

ENV = "harness_gym/ClickButton-Json-v0"


def test_text_policy_steps_sets_the_iterations(tmp_path: Path) -> None:
    out = tmp_path / "tp"
    argv = ["train", "--algo", "text_policy", "--env", ENV, "--steps", "2", "--eval-episodes", "0"]
    assert main([*argv, "--out", str(out)], out=io.StringIO()) == 0
    run = json.loads((out / "run.json").read_text())
    assert len(run["history"]) == 2  # not the default 30
    with pytest.raises(CLIExit, match="both set the text policy's iterations"):
        main([*argv, "--iterations", "3", "--out", str(tmp_path / "b")], out=io.StringIO())


@pytest.mark.parametrize("algo", ["sft-lm", "grpo-lm"])
def test_lm_hyperparams_reach_the_config_before_the_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, algo: str
) -> None:
    import harness_gym.train.grpo_lm as grpo_lm
    import harness_gym.train.sft_lm as sft_lm

    seen: list = []

    class Stop(Exception):
        pass

    def spy(config, out, log=None):  # noqa: ANN001, ANN202 - records what would train, loads nothing
        seen.append(config)
        raise Stop

    monkeypatch.setattr(sft_lm, "train_sft_lm", spy)
    monkeypatch.setattr(grpo_lm, "train_grpo_lm", spy)
    params = {"learning_rate": 1e-3, "lora_alpha": 8}
    if algo == "sft-lm":
        params["warmup_steps"] = 3
    argv = ["--debug", "train", "--algo", algo, "--env", ENV, "--hyperparams", json.dumps(params)]
    with pytest.raises(Stop):  # --debug: the spy's exception comes through
        main([*argv, "--out", str(tmp_path / "m")], out=io.StringIO())
    [config] = seen
    assert {k: getattr(config, k) for k in params} == params
    with pytest.raises(CLIExit, match="--hyperparams"):
        main(["train", "--algo", algo, "--env", ENV, "--hyperparams", "{bad", "--out", str(tmp_path / "x")])
    assert len(seen) == 1 and not (tmp_path / "x").exists()


@pytest.mark.parametrize("verb", ["train", "sweep", "search"])
def test_an_output_folder_the_os_refuses_is_found_before_any_work(verb: str, tmp_path: Path) -> None:
    argv = {
        "train": ["train", "--algo", "sft-lm", "--env", ENV],
        "sweep": ["sweep", "--agent", "random", "--tasks", "ClickButton", "--workers", "0"],
        "search": ["search", "--agent", "random", "--tasks", "ClickButton"],
    }[verb]
    (tmp_path / "file").write_text("x")
    for out in ("/proc/m", str(tmp_path / "file" / "below")):
        with pytest.raises(CLIExit) as err:
            main([*argv, "--out", out], out=io.StringIO())
        assert err.value.code == 2 and f"--out {out}" in str(err.value), str(err.value)


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_serve_session_timeout_must_be_a_finite_number(value: str) -> None:
    with pytest.raises(CLIExit) as err:
        main(["serve", "--session-timeout", value], out=io.StringIO())
    assert err.value.code == 2 and "--session-timeout" in str(err.value)


def test_unknown_sb3_hyperparams_are_refused_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "new" / "m"
    argv = ["train", "--algo", "dqn", "--env", ENV, "--steps", "8", "--out", str(out)]
    with pytest.raises(CLIExit, match="--hyperparams: dqn takes no exploration, not_a_param"):
        main([*argv, "--hyperparams", '{"learning_rate": 0.1, "not_a_param": 1, "exploration": 2}'])
    assert not (tmp_path / "new").exists()


def test_text_policy_hyperparams_are_refused_before_any_folder_is_made(tmp_path: Path) -> None:
    """A key neither of the text policy's configs takes, a flag's own key, or a value a config
    refuses: one line, before --out (or its eval/ run folder) is made."""
    argv = ["train", "--algo", "text_policy", "--env", ENV, "--out", str(tmp_path / "a" / "b")]
    for bad, says in [
        ('{"bogus": 1}', "bogus"),
        ('{"iterations": 3}', "iterations"),
        ('{"grouping": "sideways"}', "grouping"),
    ]:
        with pytest.raises(CLIExit, match=f"--hyperparams: .*{says}"):
            main([*argv, "--hyperparams", bad])
        assert not (tmp_path / "a").exists()


def test_a_refused_command_leaves_no_folder_it_made(tmp_path: Path) -> None:
    """Two --env of different tasks are refused only once the text policy builds them, after
    --out and its eval/ run folder (the evaluation's trajectories) were made: the refusal removes
    every folder it made, and keeps a folder that was already there."""
    other = "harness_gym/EnterText-Json-v0"
    argv = ["train", "--algo", "text_policy", "--env", ENV, "--env", other, "--trajectories", "all"]
    with pytest.raises(CLIExit, match="same task"):
        main([*argv, "--out", str(tmp_path / "a" / "b" / "c")])
    assert not (tmp_path / "a").exists()
    (tmp_path / "kept").mkdir()
    with pytest.raises(CLIExit, match="same task"):
        main([*argv, "--out", str(tmp_path / "kept" / "c")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"] and not any((tmp_path / "kept").iterdir())


def test_a_failed_command_keeps_a_folder_that_holds_its_work(tmp_path: Path) -> None:
    from harness_gym.cli.common import output_dir, run_guarded

    def fails_after_writing() -> int:
        folder = output_dir(tmp_path / "run" / "out")
        (folder / "rows.jsonl").write_text("{}\n")
        raise KeyboardInterrupt

    with pytest.raises(CLIExit):
        run_guarded(fails_after_writing)
    assert (tmp_path / "run" / "out" / "rows.jsonl").read_text() == "{}\n"
