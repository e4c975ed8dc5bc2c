"""Real MiniWoB++ against Farama's ``miniwob`` env, and episodes that reuse their document.

``info["miniwob_seed"]`` must replay the same instance in Farama's Selenium env (both call
``Math.seedrandom`` with it); ``reuse_page=True`` must start each episode in the same document
(as Farama's env does) and still play every task its oracle solves.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import gymnasium as gym
import pytest

from harness_gym.envs.browser.browser import BrowserSession
from harness_gym.envs.browser.env import BrowserEnv, make_browser_env
from harness_gym.envs.browser.launch import check_requirements, find_chromium

CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def play_oracle(env: BrowserEnv, seed: int) -> dict:
    _, info = env.reset(seed=seed)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(env.oracle_action())
        done = terminated or truncated
    return info


@pytest.fixture(scope="module")
def session() -> Iterator[BrowserSession]:
    check_requirements()
    shared = BrowserSession()
    yield shared
    shared.close()


def test_miniwob_seed_is_in_info_on_reset_and_step(session: BrowserSession) -> None:
    env = make_browser_env("BrowserClickTest", session=session)
    _, info = env.reset(seed=3)
    assert info["miniwob_seed"] == env.task.seed
    _, _, _, _, info = env.step(env.oracle_action())
    assert info["miniwob_seed"] == env.task.seed  # on every step too
    env.close()


@pytest.mark.slow
def test_miniwob_seed_replays_the_instance_in_faramas_env(session: BrowserSession) -> None:
    assert os.path.exists(CHROMEDRIVER), "Farama's env needs chromedriver: apt-get install -y chromium-driver"
    os.environ.setdefault("MINIWOB_CHROME_BINARY", find_chromium())
    os.environ.setdefault("MINIWOB_CHROMEDRIVER", CHROMEDRIVER)
    import miniwob

    gym.register_envs(miniwob)
    ours = make_browser_env("BrowserLoginUser", session=session)
    theirs = gym.make("miniwob/login-user-v1")
    try:
        seeds = set()
        for seed in (0, 1, 2):
            _, info = ours.reset(seed=seed)
            seeds.add(info["miniwob_seed"])
            assert info["miniwob_seed"] == ours.task.seed and isinstance(info["miniwob_seed"], int)
            obs, _ = theirs.reset(seed=info["miniwob_seed"], options={"record_screenshots": False})
            assert obs["utterance"] == ours.task.fields()["instruction"]
        assert len(seeds) == 3
    finally:
        theirs.close()
        ours.close()


def test_reuse_page_starts_every_episode_in_the_same_document(session: BrowserSession) -> None:
    env = make_browser_env("BrowserClickCheckboxes", reuse_page=True)  # a browser of its own
    fresh = make_browser_env("BrowserClickCheckboxes", session=session, reuse_page=False)
    try:
        origins = set()
        for seed in range(4):
            info = play_oracle(env, seed)
            assert info["success"] and info["miniwob_seed"] == env.task.seed
            origins.add(env.task.session.call(env.task._page, "(() => performance.timeOrigin)"))
            # refs start again at 1 and the instance is the one a fresh document shows
            assert min(n["ref"] for n in env.task.fields()["page"]) >= 1
        assert len(origins) == 1  # one document for all four episodes
        assert env.task.session.launches == 1
        for seed in (5, 6):
            assert fresh.reset(seed=seed)[0] == env.reset(seed=seed)[0]
    finally:
        env.close()
        fresh.close()


@pytest.mark.parametrize(
    "task_id, reused",
    [("BrowserLoginUser", True), ("BrowserEmailInboxReply", True), ("BrowserUseSlider", False)],
)
def test_reuse_page_oracles_succeed(task_id: str, reused: bool, session: BrowserSession) -> None:
    """Reused where exact; a task whose widget keeps state (the slider) gets fresh documents."""
    env = make_browser_env(task_id, reuse_page=True, session=session)
    try:
        origins = set()
        for seed in range(3):
            info = play_oracle(env, seed)
            assert info["success"], (task_id, seed)
            assert info["page_reused"] is (reused and seed > 0)
            origins.add(session.call(env.task._page, "(() => performance.timeOrigin)"))
        assert len(origins) == (1 if reused else 3)
    finally:
        env.close()


def test_reuse_page_after_a_crash_starts_a_fresh_document(session: BrowserSession) -> None:
    env = make_browser_env("BrowserClickTest", reuse_page=True, session=session)
    try:
        env.reset(seed=0)
        launches = session.launches
        session.mark_broken()  # as a failed step leaves it
        _, info = env.reset(seed=1)
        assert info["browser_error"] is None and session.launches == launches + 1
        assert play_oracle(env, 2)["success"]
    finally:
        env.close()
