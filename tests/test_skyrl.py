"""The skyrl-gym route through skyrl-gym's own interface: ``skyrl_gym.make`` on the registered
``harness_gym`` env class, its ``init`` / ``step`` API, and dataset rows read back from JSON Lines
and Parquet. Oracle episodes through skyrl-gym equal in-process ones under several harnesses."""

from __future__ import annotations

import json

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym")

from harness_gym.core.registry import make_env  # noqa: E402
from harness_gym.integrations.export import write_rows  # noqa: E402
from harness_gym.integrations.skyrl import (  # noqa: E402
    ENV_CLASS,
    HarnessTextEnv,
    SkyRLRowError,
    dataset_row,
    dataset_rows,
    register_skyrl_env,
)
from harness_gym.llm.chat import chat_messages  # noqa: E402

PERTURBED = {
    "obs_format": "yaml",
    "field_order": "reversed",
    "rename_tools": {"type": "fill"},
    "tool_style": "xml",
}
HARNESSES = [
    "Json",
    "BundleXml",
    "ToolsPython",
    "JsonFewShot",
    "OpenAIFunctions",
    "JsonTranscript",
    PERTURBED,
]
TASKS = ["ClickButton", "EnterText"]


def in_process(task: str, harness, seed: int) -> dict:
    """The oracle episode played on the env directly: what skyrl must reproduce."""
    env = make_env(task, harness)
    observation, info = env.reset(seed=seed)
    first = chat_messages(env.harness, info["system_prompt"], observation, (), info["examples"])
    observations, rewards, actions = [], [], []
    done = False
    while not done:
        action = env.oracle_action()
        observation, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        observations.append(observation)
        rewards.append(float(reward))
        done = terminated or truncated
    return {
        "first": first,
        "observations": observations,
        "rewards": rewards,
        "actions": actions,
        "info": info,
    }


def through_skyrl(row: dict, actions: list[str]) -> dict:
    env = skyrl_gym.make(ENV_CLASS, env_config={}, extras=row)
    assert isinstance(env, HarnessTextEnv)
    first, metadata = env.init(row["prompt"])
    assert metadata["prompt_matches_row"]
    observations, rewards, outputs = [], [], []
    for action in actions:
        out = env.step(action)
        outputs.append(out)
        rewards.append(out["reward"])
        observations.append(out["metadata"]["observation"])
        if not out["done"]:
            assert out["observations"] == [{"role": "user", "content": out["metadata"]["observation"]}]
    assert outputs[-1]["done"] and outputs[-1]["observations"] == []
    assert all(not o["done"] for o in outputs[:-1])
    return {"first": first, "observations": observations, "rewards": rewards, "last": outputs[-1], "env": env}


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("harness", HARNESSES, ids=lambda h: h if isinstance(h, str) else "perturbed")
def test_oracle_through_skyrl_equals_in_process(task: str, harness) -> None:
    for seed in (0, 7):
        want = in_process(task, harness, seed)
        row = dataset_row(make_env(task, harness), seed)
        assert row["prompt"] == want["first"]
        got = through_skyrl(row, want["actions"])
        assert got["first"] == want["first"]  # system prompt, worked examples, first observation
        assert got["observations"] == want["observations"]
        assert got["rewards"] == want["rewards"]
        meta = got["last"]["metadata"]
        assert meta["success"] is True and meta["success"] == want["info"]["success"]
        assert meta["state_digest"] == want["info"]["state_digest"]
        assert meta["harness_id"] == want["info"]["harness_id"] == row["extra_info"]["harness_id"]
        metrics = got["env"].get_metrics()
        assert metrics["success"] == 1.0 and metrics["return"] == sum(want["rewards"])


def test_system_prompt_and_tools_are_the_harness_own() -> None:
    env = make_env("EnterText", PERTURBED)
    _, info = env.reset(seed=1)
    row = dataset_row(env, 1)
    assert row["prompt"][0] == {"role": "system", "content": info["system_prompt"]}
    assert "fill" in info["system_prompt"]  # the renamed tool, as the harness writes it
    assert json.loads(row["extra_info"]["tools"]) == info["tools"]
    assert json.loads(row["extra_info"]["harness"]) == json.loads(json.dumps(info["harness"], default=list))
    assert row["env_class"] == ENV_CLASS and row["reward_spec"]["method"] == "env"


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_rows_read_back_build_the_same_episode(tmp_path, fmt: str) -> None:
    envs = [make_env("ClickButton", "Json"), make_env("EnterText", PERTURBED)]
    rows = dataset_rows(envs, [2, 5])
    assert [(r["extra_info"]["task_id"], r["extra_info"]["seed"]) for r in rows] == [
        ("ClickButton", 2),
        ("ClickButton", 5),
        ("EnterText", 2),
        ("EnterText", 5),
    ]
    path = tmp_path / f"rows.{fmt}"
    write_rows(rows, path, fmt)
    if fmt == "jsonl":
        back = [json.loads(line) for line in path.read_text().splitlines()]
    else:
        import pandas as pd

        back = json.loads(pd.read_parquet(path).to_json(orient="records"))
    for row, original in zip(back, rows):
        assert row["prompt"] == original["prompt"]
        task = row["extra_info"]["task_id"]
        harness = json.loads(row["extra_info"]["harness"])
        want = in_process(task, harness, row["extra_info"]["seed"])
        got = through_skyrl(row, want["actions"])
        assert got["observations"] == want["observations"] and got["rewards"] == want["rewards"]


def test_bad_reply_is_a_normal_step_and_step_after_done_raises() -> None:
    row = dataset_row(make_env("ClickButton", "Json"), 0)
    env = skyrl_gym.make(ENV_CLASS, extras=row)
    env.init(row["prompt"])
    out = env.step("{not json" + "\x00" * 10)
    assert out["reward"] == 0.0 and not out["done"]
    assert out["metadata"]["invalid_actions"] == 1 and out["metadata"]["last_error"]
    assert "malformed JSON" in out["observations"][0]["content"]  # the harness's own error message
    env.step(env.env.oracle_action())
    while not env.done:
        env.step(env.env.oracle_action())
    with pytest.raises(RuntimeError, match="episode has ended"):
        env.step("anything")


def test_a_prompt_that_differs_is_flagged_and_the_harness_chat_used() -> None:
    row = dataset_row(make_env("ClickButton", "Json"), 0)
    env = skyrl_gym.make(ENV_CLASS, extras=row)
    messages, metadata = env.init([{"role": "user", "content": "re-wrapped"}])
    assert not metadata["prompt_matches_row"] and messages == row["prompt"]


@pytest.mark.parametrize(
    "extras, match",
    [
        ({}, "needs extra_info"),
        ({"extra_info": "x"}, "needs extra_info"),
        ({"extra_info": {"task_id": "ClickButton", "seed": 0}}, "lacks harness"),
        ({"extra_info": {"harness": "Json"}}, "lacks task_id, seed"),
    ],
)
def test_rows_without_the_env_get_a_clear_error(extras, match: str) -> None:
    with pytest.raises(SkyRLRowError, match=match):
        skyrl_gym.make(ENV_CLASS, extras=extras)


def test_registered_once_in_skyrl_registry() -> None:
    assert ENV_CLASS in skyrl_gym.registry
    assert register_skyrl_env() == ENV_CLASS  # a second registration is a no-op, not an error
    assert skyrl_gym.spec(ENV_CLASS).entry_point == "harness_gym.integrations.skyrl:HarnessTextEnv"


@pytest.mark.parametrize("name", ["Json", "OpenHandsStyle"])
def test_terminal_oracle_through_skyrl_equals_in_process(name: str) -> None:
    import shutil

    if shutil.which("bwrap") is None:
        pytest.skip("terminal tasks need bubblewrap")
    from harness_gym.envs.terminal.presets import TERMINAL_PRESETS

    harness = name if name == "Json" else TERMINAL_PRESETS[name]
    want = in_process("TermSortUnique", harness, 2)
    row = dataset_row(make_env("TermSortUnique", harness), 2)
    got = through_skyrl(row, want["actions"])
    assert got["first"] == want["first"] and got["observations"] == want["observations"]
    assert got["rewards"] == want["rewards"] and got["last"]["metadata"]["success"] is True
    got["env"].close()


def test_aggregated_success_through_skyrl_is_the_known_fraction() -> None:
    """skyrl's own aggregate_metrics over oracle episodes (success 1) and episodes that only
    send garbage (success 0, ended by the step budget): the mean is the oracle's share."""
    metrics = []
    for seed in range(10):
        row = dataset_row(make_env("ClickButton", "Json"), seed)
        env = skyrl_gym.make(ENV_CLASS, extras=row)
        env.init(row["prompt"])
        while not env.done:
            env.step(env.env.oracle_action() if seed % 5 < 2 else "no tool call here")
        metrics.append(env.get_metrics())
    summary = HarnessTextEnv.aggregate_metrics(metrics)
    assert summary["success"] == pytest.approx(0.4)
    assert summary["invalid_actions"] > 0 and summary["return"] == pytest.approx(0.4)
