"""stable-baselines3 baselines on harness envs: learning, saving with the harness, evaluation."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from harness_gym import PRESETS, Harness, make_env
from harness_gym.baselines import sb3
from harness_gym.baselines.agents import RandomAgent
from harness_gym.cli import build_parser, train
from harness_gym.cli import evaluate as evaluate_verb
from harness_gym.rollout import evaluate as evaluate_agent

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = {"n_steps": 64, "batch_size": 64, "n_epochs": 2}


@pytest.fixture(scope="module")
def tiny_model() -> sb3.TrainedModel:
    return sb3.train(
        "maskable_ppo", "harness_gym/EnterText-BundleMarkdown-v0", 256, seed=1, n_envs=2, hyperparams=TINY
    )


def test_maskable_ppo_beats_random_on_a_single_step_task() -> None:
    """ClickButton under Json: trained success >= random + 0.3 on 200 paired seeds."""
    trained = sb3.train("maskable_ppo", "harness_gym/ClickButton-Json-v0", 8192, seed=0)
    rows = sb3.evaluate(trained, episodes=200, seed=0)
    random_rows = list(evaluate_agent(make_env("ClickButton", "Json"), RandomAgent(0), range(200)))
    assert [r.seed for r in rows] == [r.seed for r in random_rows] == list(range(200))
    trained_rate = np.mean([r.success for r in rows])
    random_rate = np.mean([r.success for r in random_rows])
    assert trained_rate >= random_rate + 0.3, (trained_rate, random_rate)
    assert sum(r.invalid_actions for r in rows) == 0  # masks keep the model on the menu


@pytest.mark.slow
def test_maskable_ppo_learns_a_multi_step_task_with_the_menu_features() -> None:
    """EnterText (type the quoted word, then submit): >= 85% greedy success after 60k steps."""
    trained = sb3.train("maskable_ppo", "harness_gym/EnterText-Json-v0", 60_000, seed=0)
    assert trained.features == sb3.default_features() and trained.features.menu_slots > 0
    rows = sb3.evaluate(trained, episodes=200, seed=100_000)
    assert np.mean([r.success for r in rows]) >= 0.85


def test_saved_model_reloads_with_its_harness_and_acts_the_same(
    tiny_model: sb3.TrainedModel, tmp_path: Path
) -> None:
    path = tiny_model.save(tmp_path / "model")
    assert {p.name for p in path.iterdir()} >= {"model.zip", "run.json", "harness.json", "harness.yaml"}
    assert Harness.from_json((path / "harness.json").read_text()) == PRESETS["BundleMarkdown"]
    assert Harness.from_yaml(path / "harness.yaml") == PRESETS["BundleMarkdown"]
    run = json.loads((path / "run.json").read_text())
    assert run["harness_id"] == PRESETS["BundleMarkdown"].id
    assert run["algo"] == "maskable_ppo" and run["seed"] == 1

    loaded = sb3.load(path)
    assert loaded.harness == tiny_model.harness == PRESETS["BundleMarkdown"]
    assert (loaded.env_id, loaded.task_id, loaded.max_actions) == (
        tiny_model.env_id, tiny_model.task_id, tiny_model.max_actions,
    )  # fmt: skip
    assert loaded.features == tiny_model.features
    env = make_env("EnterText", "BundleMarkdown")
    rng = np.random.default_rng(0)
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        done = False
        while not done:
            legal = info["legal_actions"]
            a = tiny_model.predict_index(obs, legal)
            assert a == loaded.predict_index(obs, legal)
            obs, _, terminated, truncated, info = env.step(legal[int(rng.integers(len(legal)))])
            done = terminated or truncated
    before = [(r.success, r.steps) for r in sb3.evaluate(tiny_model, episodes=10)]
    after = [(r.success, r.steps) for r in sb3.evaluate(loaded, episodes=10)]
    assert before == after


def test_tampered_harness_spec_is_refused(tiny_model: sb3.TrainedModel, tmp_path: Path) -> None:
    path = tiny_model.save(tmp_path / "model")
    run = json.loads((path / "run.json").read_text())
    run["harness"]["obs_format"] = "yaml"
    (path / "run.json").write_text(json.dumps(run))
    with pytest.raises(ValueError, match="hashes to"):
        sb3.load(path)
    with pytest.raises(FileNotFoundError, match="run.json"):
        sb3.load(tmp_path / "nothing")


def test_evaluate_under_another_harness_records_both(tiny_model: sb3.TrainedModel) -> None:
    rows = sb3.evaluate(tiny_model, "harness_gym/EnterText-Json-v0", episodes=4, seed=7)
    assert [r.seed for r in rows] == [7, 8, 9, 10]
    assert {r.harness_id for r in rows} == {PRESETS["Json"].id}
    assert {r.extra["trained_harness_id"] for r in rows} == {PRESETS["BundleMarkdown"].id}
    rows = sb3.evaluate(tiny_model, "harness_gym/EnterText-v0", harness="BundleYaml", episodes=2)
    assert {r.harness_id for r in rows} == {PRESETS["BundleYaml"].id}
    with pytest.raises(ValueError, match="trained on task 'EnterText'"):
        sb3.evaluate(tiny_model, "harness_gym/ClickButton-Json-v0", episodes=1)


@pytest.mark.parametrize(
    ("algo", "params"),
    [("ppo", TINY), ("dqn", {"learning_starts": 64, "buffer_size": 1000, "train_freq": 4})],
)
def test_ppo_and_dqn_train_and_play_through_the_harness(algo: str, params: dict) -> None:
    env_id = "harness_gym/ClickButton-BundleYaml-v0"
    trained = sb3.train(algo, env_id, 256, seed=0, n_envs=2, hyperparams=params)
    assert trained.algo == algo and trained.harness == PRESETS["BundleYaml"]
    rows = sb3.evaluate(trained, episodes=5)
    assert len(rows) == 5 and all(r.agent == algo for r in rows)


def test_unknown_algo_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown algo"):
        sb3.train("a2c", "harness_gym/ClickButton-Json-v0", 10)


def test_cli_train_then_eval_under_another_harness(tmp_path: Path) -> None:
    out_dir = tmp_path / "cb"
    args = build_parser().parse_args(
        ["train", "--algo", "maskable_ppo", "--env", "harness_gym/ClickButton-Json-v0", "--steps", "128",
         "--seed", "3", "--n-envs", "2", "--hyperparams", json.dumps(TINY), "--eval-episodes", "5",
         "--out", str(out_dir)]
    )  # fmt: skip
    out = io.StringIO()
    assert run_verb(train.run, args, out) == 0
    assert f"trained under harness {PRESETS['Json'].id}" in out.getvalue()
    assert (out_dir / "model.zip").exists()
    features = json.loads((out_dir / "run.json").read_text())["features"]
    assert features["menu_slots"] == 32 and features["menu_dim"] == 1024  # the menu, by default

    eval_args = build_parser().parse_args(
        ["eval", "--model", str(out_dir), "--env", "harness_gym/ClickButton-Json*", "--episodes", "4"]
    )
    out = io.StringIO()
    assert run_verb(evaluate_verb.run_model_eval, eval_args, out) == 0
    text = out.getvalue()
    assert "harness_gym/ClickButton-Json-v0" in text and "harness_gym/ClickButton-JsonReversed-v0" in text
    assert PRESETS["JsonReversed"].id in text
    not_a_model = build_parser().parse_args(["eval", "--model", str(tmp_path), "--env", "all"])
    with pytest.raises(SystemExit, match="not a model directory"):
        run_verb(evaluate_verb.run_model_eval, not_a_model, out)


def test_cli_menu_dim_zero_trains_on_the_observation_alone(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["train", "--env", "harness_gym/ClickButton-Json-v0", "--steps", "64", "--n-envs", "1",
         "--menu-dim", "0", "--hyperparams", json.dumps(TINY), "--eval-episodes", "0", "--out", str(tmp_path)]
    )  # fmt: skip
    assert run_verb(train.run, args, io.StringIO()) == 0
    loaded = sb3.load(tmp_path)
    assert loaded.features.menu_slots == 0 and loaded.model.observation_space.shape == (2048,)


def run_verb(verb, args, out) -> int:  # noqa: ANN001
    """A CLI verb on parsed arguments, through the CLI's error layer (one line, exit code 2)."""
    from harness_gym.cli.common import run_guarded

    return run_guarded(lambda: verb(args, out), debug=False)
