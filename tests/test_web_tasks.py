"""The web task suite: oracles, legal actions, round trips, variety, snapshot/restore."""

from __future__ import annotations

import numpy as np
import pytest

from harness_gym import PRESETS, TASKS, Harness, make_env
from harness_gym.baselines.agents import RandomAgent
from harness_gym.core.presets import PRESET_INFO
from harness_gym.rollout import run_episode
from tests.conftest import TASK_IDS, play_oracle

N_SEEDS = 50


def seeds(preset: str, n: int) -> range:
    """A one-change preset moves one factor whose levels the bundles and conventions already
    run on every seed: a fifth of the seeds each keeps the default suite fast."""
    return range(n // 5 if PRESET_INFO[preset].kind == "one-change" else n)


def test_suite_has_the_miniwob_tasks() -> None:
    required = {
        "ClickButton",
        "ClickLink",
        "ClickOption",
        "ClickCheckboxes",
        "EnterText",
        "LoginUser",
        "ChooseList",
        "ClickTab",
        "NavigateTree",
        "UseAutocomplete",
        "EmailInbox",
        "BookFlight",
    }
    assert required <= set(TASKS)


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("task", TASK_IDS)
def test_oracle_always_succeeds(task: str, preset: str) -> None:
    env = make_env(task, preset)
    for seed in seeds(preset, N_SEEDS):
        _, info = play_oracle(env, seed)
        assert info["success"], (task, preset, seed)
        assert info["invalid_actions"] == 0


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("task", TASK_IDS)
def test_every_legal_action_round_trips(task: str, preset: str) -> None:
    """parse(format_action(a)) == a for every legal action along oracle and random paths."""
    env = make_env(task, preset)
    rng = np.random.default_rng(0)
    checked = 0
    for seed in seeds(preset, 20):
        env.reset(seed=seed)
        done = False
        while not done:
            legal = env.legal_actions()
            for action in legal:
                assert env.bound.parse(env.format_action(action)) == action
                assert env.task.check(action) is None, action
            checked += len(legal)
            assert env.task.oracle() in legal
            text = (
                env.oracle_action()
                if rng.random() < 0.5
                else env.format_action(legal[int(rng.integers(len(legal)))])
            )
            *_, terminated, truncated, info = env.step(text)
            assert info["invalid_actions"] == 0
            done = terminated or truncated
    assert checked > len(seeds(preset, 20))


@pytest.mark.parametrize("task", TASK_IDS)
def test_random_agent_is_clearly_worse_than_the_oracle(task: str) -> None:
    env = make_env(task)
    agent = RandomAgent(seed=0)
    wins = sum(run_episode(env, agent, seed).success for seed in range(100))
    assert wins < 80, f"{task}: a random agent solved {wins}/100; the task is too easy"


@pytest.mark.parametrize("task", TASK_IDS)
def test_generator_has_real_variety(task: str) -> None:
    env = make_env(task)
    observations = {env.reset(seed=s)[0] for s in range(30)}
    assert len(observations) >= 25
    instructions = {env.task.fields()["instruction"] for s in range(30) if env.reset(seed=s)}
    assert len(instructions) >= 10


@pytest.mark.parametrize("task", TASK_IDS)
def test_snapshot_restore_replays_the_same_future(task: str) -> None:
    env = make_env(task)
    env.reset(seed=4)
    snap = env.task.snapshot()
    digest = env.task.digest()
    first = [env.step(env.oracle_action())[1] for _ in range(1)]
    after = env.task.digest()
    env.task.restore(snap)
    assert env.task.digest() == digest
    assert [env.step(env.oracle_action())[1] for _ in range(1)] == first
    assert env.task.digest() == after


@pytest.mark.parametrize("task", TASK_IDS)
def test_tight_budget_can_cut_the_oracle(task: str) -> None:
    """A budget of one step is enough only for single-step tasks."""
    env = make_env(task, Harness(step_budget=1))
    wins = sum(play_oracle(env, seed)[1]["success"] for seed in range(20))
    full = make_env(task)
    steps = max(play_oracle(full, seed)[1]["step"] for seed in range(20))
    if steps > 1:
        assert wins < 20
    else:
        assert wins == 20
