"""Tuned hyperparameters per (trainer, task) (issue 48): the files, what ``train`` does with them.

Every entry of every file must be one its trainer takes (a typo would otherwise surface only when
a user trains that task); ``harness-gym train`` trains with the task's entry unless an option
says otherwise, records where the values came from, and ``--hyperparams`` overrides key by key.
"""

from __future__ import annotations

import io
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from harness_gym.baselines import tuned as hp
from harness_gym.cli import CLIExit, main

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def refusal(*argv: str) -> str:
    with pytest.raises(CLIExit) as err:
        main(list(argv), out=io.StringIO())
    assert err.value.code == 2
    return str(err.value)


def taken_keys(trainer: str) -> set[str]:
    """The keyword arguments ``trainer`` takes through ``hyperparams``."""
    if trainer in ("maskable_ppo", "ppo", "dqn"):
        import inspect

        from harness_gym.baselines.sb3 import ALGOS

        return set(inspect.signature(ALGOS[trainer].__init__).parameters) - {"self", "policy", "env"}
    if trainer == "text_policy":
        from harness_gym.baselines.text_policy import TextPolicyConfig, TextPolicyGRPOConfig

        return {f.name for f in fields(TextPolicyConfig)} | {f.name for f in fields(TextPolicyGRPOConfig)}
    from harness_gym.cli.train_lm import SET_BY_COMMAND
    from harness_gym.train.grpo_lm import GRPOLMConfig
    from harness_gym.train.sft_lm import SFTLMConfig

    config = SFTLMConfig if trainer == "sft-lm" else GRPOLMConfig
    return {f.name for f in fields(config)} - set(SET_BY_COMMAND)


@pytest.mark.parametrize("trainer", hp.TRAINERS)
def test_every_entry_is_one_its_trainer_takes_and_names_a_registered_task(trainer: str) -> None:
    from harness_gym.core.registry import get_task

    for task in [None, *hp.tasks_with_entries(trainer)]:
        if task is not None:
            assert get_task(task).task_id == task
        entry = hp.tuned(trainer, task)
        assert set(entry.hyperparams) <= taken_keys(trainer), (entry.source, entry.hyperparams)


def test_a_task_entry_is_read_over_the_default_and_a_task_without_one_gets_the_default() -> None:
    default = hp.tuned("maskable_ppo")
    own = hp.tuned("maskable_ppo", "ClickTab")
    assert own.entry == "ClickTab" and own.source.endswith("maskable_ppo.yaml#ClickTab")
    assert own.steps != default.steps  # the web tasks' budget, not the default's
    assert own.hyperparams == default.hyperparams and own.n_envs == default.n_envs  # inherited
    other = hp.tuned("maskable_ppo", "BrowserClickButton")
    assert other.entry == "default" and other.steps == default.steps


def test_the_sb3_module_defaults_are_the_files_defaults() -> None:
    from harness_gym.baselines.sb3 import DEFAULT_HYPERPARAMS

    assert DEFAULT_HYPERPARAMS["maskable_ppo"] == hp.tuned("maskable_ppo").hyperparams
    assert DEFAULT_HYPERPARAMS["dqn"]["buffer_size"] == 50_000


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"step": 10}, ["unknown key", "step"]),
        ({"steps": 0}, ["steps must be a positive integer"]),
        ({"steps": "100"}, ["steps must be a positive integer"]),
        ({"steps": True}, ["steps must be a positive integer"]),
        ({"n_envs": -1}, ["n_envs must be a positive integer"]),
        ({"hyperparams": [1, 2]}, ["hyperparams must be a mapping"]),
        ([1, 2], ["an entry is a mapping"]),
    ],
)
def test_a_bad_entry_is_refused_naming_where(entry: Any, words: list[str]) -> None:
    with pytest.raises(hp.HyperparamsError) as err:
        hp.check_entry("x.yaml#Task", entry)
    assert "x.yaml#Task" in str(err.value) and all(w in str(err.value) for w in words)


def test_an_unknown_trainer_is_one_line() -> None:
    with pytest.raises(hp.HyperparamsError, match="no hyperparameter file for trainer 'a2c'"):
        hp.tuned("a2c")


def test_train_uses_the_tasks_entry_and_records_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SB3: the budget and env count of the task's entry reach sb3.train when no flag is given."""
    import harness_gym.baselines.sb3 as sb3

    seen: list[dict[str, Any]] = []

    class Stop(Exception):
        pass

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append({"args": args, **kwargs})
        raise Stop

    monkeypatch.setattr(sb3, "train", spy)
    with pytest.raises(Stop):
        main(["--debug", "train", "--env", "harness_gym/ClickTab-Json-v0", "--out", str(tmp_path / "m")])
    entry = hp.tuned("maskable_ppo", "ClickTab")
    assert seen[0]["args"][2] == entry.steps and seen[0]["n_envs"] == entry.n_envs


def test_hyperparams_override_the_entry_key_by_key_and_the_run_records_the_source(tmp_path: Path) -> None:
    out = tmp_path / "m"
    main(
        [
            "train", "--env", "harness_gym/ClickButton-Json-v0", "--steps", "128", "--n-envs", "2",
            "--hyperparams", json.dumps({"n_steps": 64, "batch_size": 64, "learning_rate": 1e-3}),
            "--eval-episodes", "0", "--out", str(out),
        ],
        out=io.StringIO(),
    )  # fmt: skip
    run = json.loads((out / "run.json").read_text())
    assert run["tuned_source"] == "harness_gym/baselines/hyperparams/maskable_ppo.yaml#ClickButton"
    entry = hp.tuned("maskable_ppo", "ClickButton").hyperparams
    assert run["hyperparams"] == {**entry, "n_steps": 64, "batch_size": 64, "learning_rate": 1e-3}
    assert run["hyperparams"]["n_epochs"] == entry["n_epochs"]  # kept from the entry
    assert run["steps"] == 128


def test_the_text_policy_trains_the_entrys_iterations(tmp_path: Path) -> None:
    out = tmp_path / "tp"
    main(
        [
            "train", "--algo", "text_policy", "--env", "harness_gym/ClickButton-Json-v0",
            "--hyperparams", json.dumps({"instances": 1, "group_size": 2, "dim": 8, "hidden": 8}),
            "--eval-episodes", "0", "--out", str(out),
        ],
        out=io.StringIO(),
    )  # fmt: skip
    run = json.loads((out / "run.json").read_text())
    entry = hp.tuned("text_policy", "ClickButton")
    assert run["grpo"]["iterations"] == entry.steps == len(run["history"])
    assert run["grpo"]["instances"] == 1 and run["policy"]["dim"] == 8
    assert run["tuned_source"] == entry.source


# -- SB3 under several harnesses -----------------------------------------------------------------


def test_sb3_under_several_harnesses_gives_each_parallel_env_one_of_them() -> None:
    from harness_gym.baselines import sb3
    from harness_gym.core.presets import resolve_harness

    trained = sb3.train(
        "maskable_ppo", "harness_gym/ClickButton-Json-v0", 128, also=["JsonReversed"], n_envs=4,
        hyperparams={"n_steps": 32, "batch_size": 64, "n_epochs": 1},
    )  # fmt: skip
    ids = [env.unwrapped.harness.id for env in trained.model.get_env().envs]
    json_id, reversed_id = resolve_harness("Json").id, resolve_harness("JsonReversed").id
    assert ids.count(json_id) == 2 and ids.count(reversed_id) == 2
    assert [h.id for h in trained.also] == [reversed_id]


def test_sb3_saves_and_loads_its_other_training_harnesses(tmp_path: Path) -> None:
    main(
        [
            "train", "--env", "harness_gym/ClickButton-Json-v0",
            "--env", "harness_gym/ClickButton-ObsYaml-v0", "--steps", "64", "--n-envs", "2",
            "--hyperparams", json.dumps({"n_steps": 32, "batch_size": 64}),
            "--eval-episodes", "0", "--out", str(tmp_path / "m"),
        ],
        out=io.StringIO(),
    )  # fmt: skip
    from harness_gym.baselines import sb3
    from harness_gym.core.presets import resolve_harness

    loaded = sb3.load(tmp_path / "m")
    assert [h.id for h in loaded.also] == [resolve_harness("ObsYaml").id]
    assert loaded.harness.id == resolve_harness("Json").id


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--env", "harness_gym/ClickLink-Json-v0"], ["same task"]),
        (["--env", "harness_gym/ClickButton-ObsYaml-v0", "--n-envs", "3"], ["--n-envs 3", "multiple"]),
        (["--env", "harness_gym/ClickButton-ObsYaml-v0", "--harness", "ObsXml"], ["--harness"]),
    ],
)
def test_several_sb3_envs_that_cannot_train_together_are_one_line(
    extra: list[str], words: list[str], tmp_path: Path
) -> None:
    message = refusal(
        "train", "--env", "harness_gym/ClickButton-Json-v0", *extra, "--out", str(tmp_path / "m")
    )
    assert all(w in message for w in words), message
    assert not (tmp_path / "m").exists()


# -- the text policy's attention layers ----------------------------------------------------------


def test_the_text_policy_with_attention_starts_uniform_saves_and_has_finite_gradients(tmp_path: Path) -> None:
    import numpy as np
    import torch

    from harness_gym.baselines.text_policy import TextPolicy, TextPolicyConfig, collate, masked_log_softmax

    torch.manual_seed(0)
    policy = TextPolicy(TextPolicyConfig(dim=16, hidden=16, attention_layers=1, attention_heads=2))
    legal = ["click(ref=1)", "click(ref=2)", "click(ref=3)"]
    assert np.allclose(policy.log_probs('{"page": [1, 2, 3]}', legal), -np.log(3))
    torch.nn.init.normal_(policy.head[-1].weight)  # a trained head: the scores now depend on the input
    for observation in ["x", '{"instruction": "Click 2", "page": [1, 2, 3]}']:  # one token: one key
        batch = collate([policy.encode(observation, legal)])
        loss = masked_log_softmax(policy(batch))[0, 0]
        policy.zero_grad()
        loss.backward()
        grads = [p.grad for p in policy.attention.parameters() if p.grad is not None]
        assert grads and all(torch.isfinite(g).all() for g in grads)
    a = policy.log_probs('{"instruction": "Click 2", "page": [1, 2, 3]}', legal)
    b = policy.log_probs('{"page": [1, 2, 3], "instruction": "Click 2"}', legal)
    assert not np.allclose(a, b)  # the layout still reaches the scores
    policy.save(tmp_path / "p.pt")
    again = TextPolicy.load(tmp_path / "p.pt")
    assert again.config.attention_layers == 1
    assert np.allclose(
        again.log_probs('{"page": [1, 2, 3]}', legal), policy.log_probs('{"page": [1, 2, 3]}', legal)
    )
