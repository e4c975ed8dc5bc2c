"""Worked examples never show the instance being played: examples are compared with the
episode by state digest (many seeds build the same instance of a small task), over many
seeds on every task, at one example and at the most."""

from __future__ import annotations

import numpy as np
import pytest

from harness_gym import Harness, make_env
from harness_gym.core.env import EXAMPLE_SEED, EXAMPLE_SKIPS
from harness_gym.core.harness import MAX_FEW_SHOT
from harness_gym.envs.web.tasks import WEB_TASKS

TASKS = [t.__name__ for t in WEB_TASKS]


def _digest(task, seed: int) -> str:  # type: ignore[no-untyped-def]
    task.reset(np.random.default_rng(seed))
    return task.digest()


def _own_observations(env, seed: int) -> set[str]:  # type: ignore[no-untyped-def]
    """Every observation of the seed's oracle episode, rendered as examples are."""
    env.reset(seed=seed)
    bound, task, seen = env.bound, env.task, set()
    for step in range(env.budget):
        seen.add(bound.render(task.fields(), step=step))
        if task.step(task.oracle()).terminated:
            seen.add(bound.render(task.fields(), step=step + 1))
            break
    return seen


def _check(task_name: str, seeds: range, few_shot: int) -> int:
    """Play ``seeds`` and fail if an example shows the episode's instance; returns how many
    seeds built an instance that an example seed also builds (the risky ones)."""
    env = make_env(task_name, Harness(few_shot=few_shot))
    probe = make_env(task_name)
    example_digests = {_digest(probe.task, EXAMPLE_SEED - k) for k in range(few_shot + EXAMPLE_SKIPS)}
    risky = 0
    for seed in seeds:
        digest = _digest(probe.task, seed)
        if digest not in example_digests:
            continue  # no example seed builds this instance
        risky += 1
        _, info = env.reset(seed=seed)
        assert info["state_digest"] == digest
        examples = [e["observation"] for e in info["examples"]]
        assert len(examples) == few_shot
        own = _own_observations(probe, seed)
        assert not own & set(examples), f"{task_name} seed {seed}: an example shows the episode"
        # and the episode itself is untouched by building the examples
        assert env.step(env.oracle_action())[4]["invalid_actions"] == 0
    return risky


@pytest.mark.parametrize("few_shot", [1, MAX_FEW_SHOT])
def test_entertext_examples_never_show_the_episode_instance_over_2000_seeds(few_shot: int) -> None:
    """EnterText builds about 1,100 instances over 2,000 seeds: some seeds share an example
    seed's instance, and none of them may see it (the issue counted 9 at one example and 32
    at eight when seeds were compared instead)."""
    assert _check("EnterText", range(2000), few_shot) > 0


@pytest.mark.parametrize("task", TASKS)
def test_no_task_shows_the_episode_instance_in_its_examples(task: str) -> None:
    _check(task, range(300), MAX_FEW_SHOT)


@pytest.mark.slow
@pytest.mark.parametrize("few_shot", [1, MAX_FEW_SHOT])
@pytest.mark.parametrize("task", TASKS)
def test_no_task_shows_the_episode_instance_over_2000_seeds(task: str, few_shot: int) -> None:
    _check(task, range(2000), few_shot)


def test_examples_are_the_same_whatever_the_episode_when_no_instance_is_shared() -> None:
    env = make_env("LoginUser", Harness(few_shot=2))
    first = env.reset(seed=1)[1]["examples"]
    assert env.reset(seed=2)[1]["examples"] == first and len(first) == 2
