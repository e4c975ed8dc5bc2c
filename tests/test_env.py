"""HarnessEnv: the Gymnasium contract, bad agent output, pairing, determinism, vectorization."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from harness_gym import PRESETS, Harness, HarnessEnv, UnicodeText, make_env, registered_env_ids
from tests.conftest import TASK_IDS, play_oracle


@pytest.mark.parametrize("env_id", registered_env_ids())
def test_check_env_on_every_registered_id(env_id: str) -> None:
    env = gym.make(env_id)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_every_task_preset_pair_is_registered() -> None:
    # Other tests may have added families' tasks (browser.register() joins them to TASKS), so
    # the built-in web tasks' ids are counted on their own.
    ids = set(registered_env_ids())
    web = {i for i in ids if i.split("/", 1)[1].rsplit("-", 2)[0] in TASK_IDS}
    assert len(web) == len(TASK_IDS) * len(PRESETS)
    for task in TASK_IDS:
        assert f"harness_gym/{task}-v0" in gym.registry
        for preset in PRESETS:
            assert f"harness_gym/{task}-{preset}-v0" in ids


def test_unicode_text_space() -> None:
    space = UnicodeText(100)
    for text in ['{"a": [1, 2]}', "ünïcødé → 中文", "\x00\ud800", ""]:
        assert space.contains(text)
    assert not space.contains("x" * 101)
    assert not space.contains(b"bytes")
    space.seed(0)
    assert all(space.contains(space.sample()) for _ in range(50))


BAD_OUTPUTS = {
    "malformed_json": '{"name": "click", "arguments": {"ref": 1',
    "unknown_tool": '{"name": "scroll", "arguments": {"ref": 1}}',
    "missing_argument": '{"name": "type", "arguments": {"ref": 1}}',
    "extra_argument": '{"name": "click", "arguments": {"ref": 1, "force": true}}',
    "wrong_type": '{"name": "click", "arguments": {"ref": "first"}}',
    "no_such_ref": '{"name": "click", "arguments": {"ref": 9999}}',
    "empty": "",
    "huge": "x" * 200_000,
    "control_chars": "\x00\x01\x1b[31m\x7f",
    "invalid_surrogates": "\ud800\udfff\ud83d",
}
EXPECTED_KIND = {
    "malformed_json": "malformed",
    "unknown_tool": "unknown_tool",
    "missing_argument": "missing_argument",
    "extra_argument": "extra_argument",
    "wrong_type": "wrong_type",
    "no_such_ref": "illegal_action",
    "empty": "empty",
    "huge": "too_long",
    "control_chars": "malformed",
    "invalid_surrogates": "malformed",
}


@pytest.mark.parametrize("case", list(BAD_OUTPUTS))
@pytest.mark.parametrize("policy", ["feedback", "end", "ignore"])
def test_bad_output_follows_the_invalid_action_policy(case: str, policy: str) -> None:
    env = make_env("EnterText", Harness(invalid_action=policy, extra_fields=("step",)))
    obs0, info0 = env.reset(seed=7)
    before = env.task.digest()
    obs, reward, terminated, truncated, info = env.step(BAD_OUTPUTS[case])
    assert info["error_kind"] == EXPECTED_KIND[case], info["last_error"]
    assert info["last_error"]
    assert info["invalid_actions"] == 1
    assert reward == 0.0
    assert env.task.digest() == before, "an invalid action changed the world"
    assert info["state_digest"] == info0["state_digest"]
    data = json.loads(obs)
    assert data["step"] == 1, "an invalid action costs a step"
    if policy == "feedback":
        assert data["error"] == info["last_error"] and not terminated
    elif policy == "end":
        assert terminated and data["error"] == info["last_error"]
    else:
        assert "error" not in data and not terminated
    assert env.observation_space.contains(obs)
    if not terminated:
        # Nothing is lost: the oracle still finishes the episode.
        while not (terminated or truncated):
            obs, reward, terminated, truncated, info = env.step(env.oracle_action())
        assert info["success"] and reward == 1.0


def test_last_error_field_shows_and_clears() -> None:
    env = make_env("EnterText", Harness(extra_fields=("last_error",)))
    obs, _ = env.reset(seed=1)
    assert json.loads(obs)["last_error"] == ""
    obs, *_, info = env.step("nonsense")
    assert json.loads(obs)["last_error"] == info["last_error"] != ""
    obs, *_ = env.step(env.oracle_action())
    assert json.loads(obs)["last_error"] == ""


def test_caller_errors_raise_with_the_fix() -> None:
    env = make_env("ClickButton")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="agent's output text.*DiscreteActions"):
        env.step(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Task instance or class"):
        HarnessEnv("ClickButton")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="reset"):
        make_env("ClickButton").step("{}")


def test_info_records_everything_needed_to_replay() -> None:
    env = gym.make("harness_gym/ClickButton-BundleMarkdown-v0")
    obs, info = env.reset(seed=11)
    for key in (
        "task_id",
        "harness_id",
        "harness",
        "seed",
        "state_digest",
        "success",
        "invalid_actions",
        "last_error",
        "legal_actions",
        "system_prompt",
        "tools",
    ):
        assert key in info, key
    assert info["task_id"] == "ClickButton"
    assert Harness.from_dict(info["harness"]).id == info["harness_id"] == PRESETS["BundleMarkdown"].id
    assert info["tools"][0]["type"] == "function"
    replay = make_env(info["task_id"], Harness.from_dict(info["harness"]))
    assert replay.reset(seed=info["seed"])[0] == obs


def test_unseeded_resets_record_a_seed_that_replays() -> None:
    env = make_env("ChooseList", "BundleYaml")
    env.reset(seed=5)
    obs, info = env.reset()
    assert isinstance(info["seed"], int)
    assert make_env("ChooseList", "BundleYaml").reset(seed=info["seed"])[0] == obs


@pytest.mark.parametrize("task", TASK_IDS)
def test_same_seed_same_world_under_every_preset(task: str) -> None:
    for seed in range(5):
        digests = {make_env(task, p).reset(seed=seed)[1]["state_digest"] for p in PRESETS}
        assert len(digests) == 1, "paired episodes must share the task instance"
    assert len({make_env(task).reset(seed=s)[1]["state_digest"] for s in range(20)}) > 10


@pytest.mark.parametrize("task", TASK_IDS)
@pytest.mark.parametrize("preset", list(PRESETS))
def test_same_seed_same_episode(task: str, preset: str) -> None:
    first, _ = play_oracle(make_env(task, preset), seed=3)
    second, _ = play_oracle(make_env(task, preset), seed=3)
    assert first == second


def test_history_window_shows_previous_pairs() -> None:
    for window, expect in ((0, None), (1, 1), (2, 2), ("all", 3)):
        env = make_env("ClickCheckboxes", Harness(history_window=window, step_budget=8))
        env.reset(seed=2)
        for _ in range(3):
            obs, *_ = env.step('{"name": "press", "arguments": {"key": "Tab"}}')
        data = json.loads(obs)
        if expect is None:
            assert "history" not in data
        else:
            assert len(data["history"]) == expect
            assert data["history"][-1]["action"] == '{"name": "press", "arguments": {"key": "Tab"}}'
            assert set(data["history"][-1]["observation"]) == {"instruction", "title", "page"}


def test_step_budget_truncates() -> None:
    env = make_env("EnterText", Harness(step_budget=2))
    env.reset(seed=0)
    _, _, terminated, truncated, _ = env.step('{"name": "press", "arguments": {"key": "Tab"}}')
    assert not (terminated or truncated)
    _, _, terminated, truncated, info = env.step('{"name": "press", "arguments": {"key": "Tab"}}')
    assert truncated and not terminated and info["budget"] == 2


def test_dropped_tool_hides_its_legal_actions() -> None:
    env = make_env("EnterText", Harness(drop_tools=("type",)))
    _, info = env.reset(seed=0)
    assert all('"type"' not in a for a in info["legal_actions"])
    assert [t["function"]["name"] for t in info["tools"]] == ["click", "press", "select"]
    _, info = play_oracle(env, seed=0)[0], play_oracle(env, seed=0)[1]
    assert not info["success"], "without the type tool the oracle cannot enter text"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_runs(mode: str) -> None:
    envs = gym.make_vec("harness_gym/EnterText-BundleMarkdown-v0", num_envs=2, vectorization_mode=mode)
    obs, infos = envs.reset(seed=[1, 2])
    assert len(obs) == 2 and all(isinstance(o, str) for o in obs)
    for _ in range(3):
        actions = tuple(legal[0] for legal in infos["legal_actions"])
        obs, rewards, terminated, truncated, infos = envs.step(actions)
        assert np.asarray(rewards).shape == (2,)
    single = make_env("EnterText", "BundleMarkdown")
    assert single.reset(seed=2)[0] == envs.reset(seed=[1, 2])[0][1]
    envs.close()


def test_async_shared_memory_carries_any_unicode() -> None:
    envs = gym.vector.AsyncVectorEnv([lambda: make_env("ClickButton", "BundleXml")] * 2, shared_memory=True)
    obs, infos = envs.reset(seed=0)
    obs, *_ = envs.step(("\ud800 ünïcødé \x00",) * 2)
    assert "\\u0000" in obs[0] or "\\x00" in obs[0] or "malformed" in obs[0]
    envs.close()


def test_render_modes() -> None:
    env = make_env("ClickButton", render_mode="ansi")
    obs, _ = env.reset(seed=0)
    assert env.render() == obs
    with pytest.raises(ValueError, match="render_mode"):
        make_env("ClickButton", render_mode="rgb_array")
