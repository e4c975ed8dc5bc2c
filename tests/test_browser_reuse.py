"""``reuse_page`` (the default) is exact: every seed gives the fresh page's instance (issue 31 item 1).

For each task, a reused document (after a whole oracle episode in it) must give the same
fields and state digest as a freshly loaded one (``reuse_page=False``), for the same seeds; a
task outside ``EXACT_REUSE`` must fall back to a fresh document. Real Chromium, two shared
browsers.
"""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import pytest

import harness_gym.envs.browser as browser
from harness_gym.envs.browser.browser import BrowserSession, check_requirements
from harness_gym.envs.browser.catalog import EXACT_REUSE, INCLUDED, task_id_for
from harness_gym.envs.browser.env import BrowserEnv, make_browser_env

#: A few tasks for the default suite: reused (a click task, a typing task, the autocomplete,
#: whose menu, hidden accessibility text and jQuery UI ids the restart puts back, the date
#: picker, whose calendar it puts back) and left out (the slider keeps its position).
FAST_TASKS = ("click-test", "enter-text", "click-checkboxes", "use-autocomplete", "choose-date", "use-slider")


@pytest.fixture(scope="module")
def sessions() -> Iterator[tuple[BrowserSession, BrowserSession]]:
    check_requirements()
    browser.register()
    fresh, reused = BrowserSession(), BrowserSession()
    yield fresh, reused
    fresh.close()
    reused.close()


def _finish(env: BrowserEnv) -> None:
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(env.oracle_action())
        done = terminated or truncated


def check_reuse_is_exact(subdomain: str, sessions: tuple[BrowserSession, BrowserSession]) -> None:
    fresh = make_browser_env(task_id_for(subdomain), session=sessions[0], reuse_page=False)
    reused = make_browser_env(task_id_for(subdomain), session=sessions[1])  # the default
    reused.reset(seed=1000)
    _finish(reused)  # whatever an episode leaves in the document is there now
    for seed in (1, 2):
        _, want = fresh.reset(seed=seed)
        _, got = reused.reset(seed=seed)
        assert got["page_reused"] is (subdomain in EXACT_REUSE) and not want["page_reused"]
        assert reused.task.fields() == fresh.task.fields(), (subdomain, seed)
        assert got["state_digest"] == want["state_digest"], (subdomain, seed)
        # and every step of the episode sees what the fresh page shows (same actions in both)
        for step in range(reused.task.max_steps):
            action = fresh.oracle_action()
            _, _, done, cut, want = fresh.step(action)
            _, _, *ends, got = reused.step(action)
            assert reused.task.fields() == fresh.task.fields(), (subdomain, seed, step)
            assert [got["success"], *ends] == [want["success"], done, cut], (subdomain, seed, step)
            if done or cut:
                break


def test_exact_reuse_names_included_tasks_only() -> None:
    assert EXACT_REUSE <= set(INCLUDED)
    assert "use-slider" not in EXACT_REUSE and "click-test" in EXACT_REUSE
    assert {"use-autocomplete", "choose-date"} <= EXACT_REUSE  # widget state put back (issue 31 item 3)


def test_reuse_is_the_default_and_false_forces_a_fresh_document(
    sessions: tuple[BrowserSession, BrowserSession],
) -> None:
    for reuse, want in ((None, True), (True, True), (False, False)):
        kwargs = {} if reuse is None else {"reuse_page": reuse}
        env = gym.make("harness_gym/BrowserClickTest-Json-v0", session=sessions[1], **kwargs)
        origins, reused = set(), []
        for seed in range(3):
            _, info = env.reset(seed=seed)
            assert info["browser_options"]["reuse_page"] is want
            reused.append(info["page_reused"])
            origins.add(sessions[1].call(env.unwrapped.task._page, "(() => performance.timeOrigin)"))
            _finish(env.unwrapped)
        assert reused == [False, want, want] and len(origins) == (1 if want else 3)
        env.close()


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_reuse_page_must_be_a_bool(bad: object) -> None:
    with pytest.raises(TypeError, match="reuse_page must be True or False"):
        make_browser_env("BrowserClickTest", reuse_page=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("subdomain", FAST_TASKS)
def test_a_reused_page_gives_the_fresh_pages_instance(
    subdomain: str, sessions: tuple[BrowserSession, BrowserSession]
) -> None:
    check_reuse_is_exact(subdomain, sessions)


@pytest.mark.slow
@pytest.mark.parametrize("subdomain", [s for s in INCLUDED if s not in FAST_TASKS])
def test_a_reused_page_gives_the_fresh_pages_instance_for_every_included_task(
    subdomain: str, sessions: tuple[BrowserSession, BrowserSession]
) -> None:
    check_reuse_is_exact(subdomain, sessions)
