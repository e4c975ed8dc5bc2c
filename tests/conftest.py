"""Shared fixtures: every task, every preset, and a helper that plays the oracle."""

from __future__ import annotations

import os
from collections.abc import Iterator

import gymnasium as gym
import pytest
from hypothesis import settings as hypothesis_settings
from llm_fixtures import vllm_server  # noqa: F401  (tests/llm_fixtures.py: a real vLLM server)

import harness_gym
from harness_gym import PRESETS, TASKS, HarnessEnv

# Property tests draw the same examples on every run (CI and submissions alike), so a failure
# found once is not rediscovered, or missed, by chance; HYPOTHESIS_PROFILE=explore draws anew.
hypothesis_settings.register_profile("pinned", derandomize=True, database=None, print_blob=True)
hypothesis_settings.register_profile("explore", derandomize=False, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "pinned"))

TASK_IDS = sorted(TASKS)
PRESET_NAMES = list(PRESETS)


@pytest.fixture(params=TASK_IDS)
def task_id(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=PRESET_NAMES)
def preset(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(autouse=True, scope="module")
def task_registry_restored() -> Iterator[None]:
    """Each test module leaves ``TASKS`` as it found it: ``browser.register()`` (its default joins
    ~130 real-browser tasks to the registry) in one module made listings and ``validate web`` of
    later modules depend on which worker ran what. The variables through which a process hands
    its registrations to its children (Harbor folders, plugin modules) are put back too: a Harbor
    registration in one module made a later module's clean ``import harness_gym`` load the
    terminal family's tasks."""
    from harness_gym.core.plugins import IMPORT_VAR
    from harness_gym.envs.terminal.catalog import HARBOR_DIRS_VARIABLE

    before = dict(TASKS)
    handed_on = {name: os.environ.get(name) for name in (IMPORT_VAR, HARBOR_DIRS_VARIABLE)}
    yield
    TASKS.clear()
    TASKS.update(before)
    for name, value in handed_on.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """Small models train fastest on one thread, and two test workers share two cores."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def play_oracle(env: gym.Env, seed: int) -> tuple[list[str], dict]:
    """Play the oracle for one episode; return the observations seen and the final info."""
    base = env.unwrapped
    assert isinstance(base, HarnessEnv)
    obs, info = env.reset(seed=seed)
    seen = [obs]
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(base.oracle_action())
        seen.append(obs)
        done = terminated or truncated
    return seen, info


__all__ = ["PRESET_NAMES", "TASK_IDS", "harness_gym", "play_oracle"]

# Fixture task folders carry their own tests (a Harbor task's tests/), which are data here.
collect_ignore_glob = ["fixtures/*"]
