"""``--log tensorboard|wandb``: SB3 training, the text policy, sweeps and searches write their
scalars, and the files read back (TensorBoard event files, offline W&B run files) hold exactly
the values the run computed."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

from harness_gym.logging_backends import (
    LOG_BACKENDS,
    TAG_PREFIXES,
    LogError,
    active,
    log_progress,
    open_log,
    read_scalars,
)

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo-space.yaml"
needs = {
    b: pytest.mark.skipif(importlib.util.find_spec(b) is None, reason=f"needs {b}") for b in LOG_BACKENDS
}
BACKENDS = [pytest.param(b, marks=needs[b]) for b in LOG_BACKENDS]


@pytest.fixture(autouse=True)
def offline_wandb(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))


def same(points: list[tuple[int, float]], want: list[tuple[int, float]]) -> bool:
    """Steps equal and values equal to float32 precision (TensorBoard stores float32)."""
    steps_ok = [s for s, _ in points] == [s for s, _ in want]
    return steps_ok and [v for _, v in points] == pytest.approx([v for _, v in want], rel=1e-6, abs=1e-6)


def accumulated(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every tag under ``folder`` as TensorBoard itself reads it (``EventAccumulator.Scalars``);
    an event file with anything but scalars (tensor summaries among them) fails."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted(folder.rglob("events.out.tfevents.*"))
    assert files, f"no event file under {folder}"
    out: dict[str, list[tuple[int, float]]] = {}
    for path in files:
        acc = EventAccumulator(str(path))
        acc.Reload()
        kinds = {kind: tags for kind, tags in acc.Tags().items() if tags and kind != "scalars"}
        assert not kinds, f"{path.name} holds summaries that are not scalars: {kinds}"
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return out


def cli(*argv: str) -> str:
    import io

    from harness_gym.cli import main

    out = io.StringIO()
    main(list(argv), out=out)
    return out.getvalue()


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_log_round_trip(tmp_path: Path, backend: str) -> None:
    values = [(s, 0.25 * s - 1.0) for s in range(5)]
    with open_log(backend, tmp_path, "sb3", "unit", {"lr": 1e-3}) as run_log:
        for step, v in values:
            run_log.log({"a/value": v, "a/flag": step % 2 == 0, "note": "text is no scalar"}, step)
    scalars = read_scalars(tmp_path)
    assert set(scalars) == {"a/value", "a/flag"}
    assert same(scalars["a/value"], values)
    assert [v for _, v in scalars["a/flag"]] == [1.0, 0.0, 1.0, 0.0, 1.0]
    if backend == "wandb":
        assert list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))  # offline: nothing was sent


@pytest.mark.parametrize("backend", BACKENDS)
def test_sb3_logs_what_sb3_computed(tmp_path: Path, backend: str) -> None:
    from harness_gym.baselines import sb3

    trained = sb3.train(
        "ppo",
        "harness_gym/ClickButton-Json-v0",
        256,
        seed=0,
        n_envs=2,
        hyperparams={"n_steps": 64, "batch_size": 64},
        log=backend,
        log_dir=tmp_path,
    )
    scalars = read_scalars(tmp_path)
    assert {"rollout/ep_rew_mean", "rollout/ep_len_mean", "train/loss", "train/entropy_loss"} <= set(scalars)
    rewards = scalars["rollout/ep_rew_mean"]
    assert [step for step, _ in rewards] == [128, 256]  # one dump per rollout of 2 x 64 steps
    buffer = [ep["r"] for ep in trained.model.ep_info_buffer]
    assert rewards[-1][1] == pytest.approx(float(np.mean(buffer)), rel=1e-6)
    lengths = [ep["l"] for ep in trained.model.ep_info_buffer]
    assert scalars["rollout/ep_len_mean"][-1][1] == pytest.approx(float(np.mean(lengths)), rel=1e-6)


@needs["tensorboard"]
def test_cli_train_sb3_writes_under_out_logs(tmp_path: Path) -> None:
    out = tmp_path / "model dir"
    cli(
        "train", "--algo", "ppo", "--env", "harness_gym/ClickButton-Json-v0", "--steps", "128",
        "--n-envs", "2", "--hyperparams", '{"n_steps": 64, "batch_size": 64}', "--eval-episodes", "0",
        "--out", str(out), "--log", "tensorboard",
    )  # fmt: skip
    assert list((out / "logs").rglob("events.out.tfevents.*"))
    assert [s for s, _ in read_scalars(out / "logs")["rollout/ep_rew_mean"]] == [128]
    seen = accumulated(out / "logs")  # SB3's own writer: plain scalars, tags <section>/<key>
    assert seen == read_scalars(out / "logs")
    assert {tag.split("/")[0] for tag in seen} <= {"rollout", "train", "time"}


@needs["tensorboard"]
def test_text_policy_and_sweep_write_scalars_tensorboard_reads(tmp_path: Path) -> None:
    """Like SB3's, their event files hold plain scalars (``EventAccumulator.Scalars`` reads
    them; tensor summaries it files apart), each tag ``<kind prefix>/<key>``."""
    out = tmp_path / "tp"
    cli(
        "train", "--algo", "text_policy", "--env", "harness_gym/ClickButton-Json-v0", "--iterations", "2",
        "--hyperparams", '{"instances": 2, "group_size": 2}', "--eval-episodes", "0",
        "--out", str(out), "--log", "tensorboard",
    )  # fmt: skip
    history = json.loads((out / "run.json").read_text())["history"]
    seen = accumulated(out / "logs")
    assert set(seen) == {f"text_policy/{key}" for key in history[0]}
    for key in history[0]:
        assert same(seen[f"text_policy/{key}"], [(i, row[key]) for i, row in enumerate(history)])
    assert seen == read_scalars(out / "logs")

    out = tmp_path / "sweep"
    cli(
        "sweep", "--agent", "random", "--agent", "oracle", "--tasks", "ClickButton", "--space", "default",
        "--subset", "sample:2", "--seeds", "3", "--workers", "0", "--quiet", "--out", str(out),
        "--log", "tensorboard",
    )  # fmt: skip
    seen = accumulated(out / "logs")
    keys = ("cells_done", "fraction_done", "errors", "success_rate", "mean_return")
    assert set(seen) == {f"sweep/{key}" for key in keys}
    _check_progress(seen, _sweep_rows(out), "sweep")
    assert seen == read_scalars(out / "logs")


def test_tag_prefixes_are_distinct_and_sb3s_sections_are_not_taken() -> None:
    prefixes = [p for p in TAG_PREFIXES.values() if p]
    assert len(prefixes) == len(set(prefixes)) == len(TAG_PREFIXES) - 1
    assert not set(prefixes) & {"rollout", "train", "time", "eval"}  # SB3's sections


@needs["tensorboard"]
def test_read_scalars_still_reads_tensor_summaries(tmp_path: Path) -> None:
    """Event files of earlier versions (``tensorboard.summary.Writer``: tensor summaries) still
    read back."""
    from tensorboard.summary import Writer

    writer = Writer(str(tmp_path))
    for step in range(3):
        writer.add_scalar("progress/cells_done", step + 1, step=step)
    writer.close()
    assert read_scalars(tmp_path) == {"progress/cells_done": [(0, 1.0), (1, 2.0), (2, 3.0)]}


@needs["wandb"]
def test_cli_text_policy_logs_every_iteration(tmp_path: Path) -> None:
    out = tmp_path / "tp"
    cli(
        "train", "--algo", "text_policy", "--env", "harness_gym/ClickButton-Json-v0", "--iterations", "2",
        "--hyperparams", '{"instances": 2, "group_size": 2}', "--eval-episodes", "0",
        "--out", str(out), "--log", "wandb", "--log-dir", str(tmp_path / "wb"),
    )  # fmt: skip
    history = json.loads((out / "run.json").read_text())["history"]
    scalars = read_scalars(tmp_path / "wb")
    assert len(history) == 2
    for key in ("train_success", "train_return", "kl", "pg_loss"):
        assert same(scalars[f"text_policy/{key}"], [(i, row[key]) for i, row in enumerate(history)])


def _sweep_rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def _check_progress(scalars: dict, rows: list[dict], prefix: str) -> None:
    done = scalars[f"{prefix}/cells_done"]
    assert [v for _, v in done] == [float(s) for s, _ in done]  # the step is the cells done
    assert done[-1][1] == len(rows)
    ok = [r for r in rows if r["error"] is None]
    assert scalars[f"{prefix}/success_rate"][-1][1] == pytest.approx(np.mean([r["success"] for r in ok]))
    mean_return = np.mean([r["episode_return"] for r in ok])
    assert scalars[f"{prefix}/mean_return"][-1][1] == pytest.approx(mean_return)
    assert scalars[f"{prefix}/errors"][-1][1] == len(rows) - len(ok)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cli_sweep_logs_progress(tmp_path: Path, backend: str) -> None:
    out = tmp_path / "sweep"
    cli(
        "sweep", "--agent", "random", "--agent", "oracle", "--tasks", "ClickButton", "--space", "default",
        "--subset", "sample:3", "--seeds", "4", "--workers", "0", "--quiet", "--out", str(out),
        "--log", backend,
    )  # fmt: skip
    rows = _sweep_rows(out)
    assert len(rows) == 2 * 3 * 4
    scalars = read_scalars(out / "logs")
    _check_progress(scalars, rows, "sweep")
    # the oracle succeeds everywhere, the random agent not: the rate is strictly between
    assert 0.5 <= scalars["sweep/success_rate"][-1][1] < 1.0


@needs["tensorboard"]
def test_cli_search_logs_progress_across_rungs(tmp_path: Path) -> None:
    out = tmp_path / "search"
    cli(
        "search", "--agent", "random", "--tasks", "ClickButton", "--space", str(DEMO), "--budget", "60",
        "--dev-seeds", "2", "--test-seeds", "2", "--no-local", "--quiet", "--out", str(out),
        "--log", "tensorboard",
    )  # fmt: skip
    rows = _sweep_rows(out)
    scalars = read_scalars(out / "logs")
    _check_progress(scalars, rows, "search")  # several rungs, one writer each: the counts run on


def test_log_progress_without_an_active_log_does_nothing(tmp_path: Path) -> None:
    log_progress([{"error": None, "success": True, "episode_return": 1.0}], 1, 1)  # no error, no file
    with active(None):
        log_progress([{"error": None, "success": True, "episode_return": 1.0}], 1, 1)
    assert not list(tmp_path.iterdir())


def test_bad_log_inputs_get_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_gym.cli import CLIExit

    with pytest.raises(LogError, match="--log must be one of tensorboard, wandb, got 'mlflow'"):
        open_log("mlflow", tmp_path, "sweep", "x")
    with pytest.raises(LogError, match="unknown kind of run 'rollout'"):
        open_log("tensorboard", tmp_path / "tb", "rollout", "x")
    assert not (tmp_path / "tb").exists()
    train = [
        "train",
        "--algo",
        "ppo",
        "--env",
        "harness_gym/ClickButton-Json-v0",
        "--out",
        str(tmp_path / "m"),
    ]
    with pytest.raises(CLIExit, match="invalid choice: 'mlflow'"):
        cli(*train, "--log", "mlflow")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "wandb" else real(n, *a))
    with pytest.raises(CLIExit, match=r"--log wandb needs wandb: pip install 'harness-gym\[logs\]'"):
        cli(*train, "--log", "wandb")
    assert not (tmp_path / "m").exists()  # found before anything was written
    bogus = tmp_path / "bogus" / "run-x.wandb"
    bogus.parent.mkdir()
    bogus.write_bytes(b"not a run")
    with pytest.raises(LogError, match="is not a W&B run file"):
        read_scalars(bogus.parent)


@needs["wandb"]
def test_wandb_is_offline_unless_wandb_mode_says_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WANDB_MODE")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    with open_log("wandb", tmp_path, "sweep", "default-mode") as run_log:
        run_log.log({"x": 1.0}, 0)
    assert run_log.folder.name.startswith("offline-run-")
    assert read_scalars(tmp_path) == {"sweep/x": [(0, 1.0)]}
    assert "WANDB_MODE" not in os.environ


@pytest.mark.llm
@needs["tensorboard"]
def test_cli_grpo_lm_logs_every_step(tmp_path: Path) -> None:
    out = tmp_path / "lm"
    cli(
        "train", "--algo", "grpo-lm", "--model", "llm", "--env", "harness_gym/ClickButton-JsonFewShot-v0",
        "--steps", "2", "--group-size", "2", "--train-seeds", "2", "--max-tokens", "16",
        "--eval-episodes", "0", "--threads", "1", "--out", str(out), "--log", "tensorboard",
    )  # fmt: skip
    history = json.loads((out / "harness_gym_training.json").read_text())["history"]
    scalars = read_scalars(out / "logs")
    assert len(history) == 2
    for key in ("loss", "reward", "learning_rate"):
        assert same(scalars[f"grpo_lm/{key}"], [(row["step"], row[key]) for row in history])
