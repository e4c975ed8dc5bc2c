"""Optional screenshots of the real MiniWoB++ tasks (``screenshots=True``, issue 15 item 5).

Real Chromium through Playwright, no mocks. The PNGs are checked with the standard library
only: the signature, the IHDR size, and the image data inflated to exactly the bytes that size
needs. Kept small: two tasks, a few seeds, one shared browser (about 15 s).
"""

from __future__ import annotations

import os
import signal
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import harness_gym.envs.browser as browser_pkg
from harness_gym.core.task import Action
from harness_gym.envs.browser.browser import BrowserSession
from harness_gym.envs.browser.env import BrowserEnv, make_browser_env
from harness_gym.envs.browser.launch import check_requirements
from harness_gym.envs.browser.processes import processes_matching
from harness_gym.envs.browser.task import TASK_AREA, TASK_AREA_SIZE, png_to_rgb

browser_pkg.register(add_to_task_registry=False)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Bytes per pixel of each PNG colour type (8-bit channels): grey, RGB, grey+alpha, RGBA.
BYTES_PER_PIXEL = {0: 1, 2: 3, 4: 2, 6: 4}


def decode_png(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the inflated (filtered) image data of an 8-bit PNG; raises on a
    malformed file."""
    assert data[:8] == PNG_SIGNATURE, "not a PNG"
    pos, width, height, kind, idat = 8, 0, 0, -1, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        chunk, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(chunk + body) == crc, f"bad CRC in {chunk!r}"
        if chunk == b"IHDR":
            width, height, depth, kind = struct.unpack(">IIBB", body[:10])
            assert depth == 8
        elif chunk == b"IDAT":
            idat += body
        elif chunk == b"IEND":
            break
        pos += 12 + length
    raw = zlib.decompress(idat)
    assert len(raw) == height * (1 + width * BYTES_PER_PIXEL[kind]), "image data does not fit the size"
    return width, height, raw


def task_area_size(env: BrowserEnv) -> tuple[int, int]:
    """The task area's size in CSS pixels, read from the live page."""
    task = env.browser_task
    area = f"document.querySelector('{TASK_AREA}').getBoundingClientRect()"
    box = task.session.call(task._page, f"(() => [{area}.width, {area}.height])")
    return round(box[0]), round(box[1])


def play_oracle(env: BrowserEnv, seed: int) -> list[dict]:
    """The infos of one oracle episode (reset first)."""
    _, info = env.reset(seed=seed)
    infos, done = [info], False
    while not done:
        _, _, terminated, truncated, info = env.step(env.oracle_action())
        infos.append(info)
        done = terminated or truncated
    return infos


@pytest.fixture(scope="module")
def session() -> Iterator[BrowserSession]:
    check_requirements()
    shared = BrowserSession()
    yield shared
    needles = list(shared._handles.needles)
    shared.close()
    time.sleep(0.2)
    assert [pid for needle in needles for pid in processes_matching(needle)] == []


def test_off_by_default_no_screenshot_key(session: BrowserSession) -> None:
    env = make_browser_env("BrowserClickButton", session=session)
    _, info = env.reset(seed=0)
    assert "screenshot" not in info and info["browser_options"]["screenshots"] is False
    _, _, _, _, info = env.step(env.oracle_action())
    assert "screenshot" not in info and env.browser_task.screenshot is None
    env.close()


@pytest.mark.parametrize("task_id", ["BrowserClickButton", "BrowserEnterText"])
def test_screenshot_is_a_png_of_the_task_area_after_reset_and_every_step(
    task_id: str, session: BrowserSession
) -> None:
    env = make_browser_env(task_id, session=session, screenshots=True)
    for seed in (0, 1):
        infos = play_oracle(env, seed)
        assert infos[-1]["success"] and len(infos) >= 2
        for info in infos:
            assert info["browser_options"]["screenshots"] is True
            width, height, _ = decode_png(info["screenshot"])
            assert (width, height) == task_area_size(env) == (160, 210)  # MiniWoB's #wrap
    env.close()


def test_screenshot_changes_with_the_page_and_only_then(session: BrowserSession) -> None:
    env = make_browser_env("BrowserEnterText", session=session, screenshots=True)
    _, info = env.reset(seed=2)
    before = decode_png(info["screenshot"])[2]
    box = next(n for n in env.browser_task._refs.values() if n["tag"] == "input")
    # A key that nothing on the page reacts to (no field has focus yet): same pixels.
    env.browser_task.step(Action.of("press", key="Escape"))
    assert decode_png(env.browser_task.screenshot)[2] == before
    _, _, terminated, _, info = env.step(env.format_action(Action.of("type", ref=box["ref"], text="wxyz")))
    assert not terminated and decode_png(info["screenshot"])[2] != before
    env.close()


def test_oracle_outcome_and_digests_unchanged_with_screenshots(session: BrowserSession) -> None:
    for task_id in ("BrowserClickButton", "BrowserEnterText"):
        plain = make_browser_env(task_id, session=session)
        shots = make_browser_env(task_id, session=session, screenshots=True)
        for seed in (3, 4):
            off, on = play_oracle(plain, seed), play_oracle(shots, seed)
            assert [i.get("success") for i in on] == [i.get("success") for i in off]
            assert [i["state_digest"] for i in on] == [i["state_digest"] for i in off]
            assert on[0]["harness_id"] == off[0]["harness_id"] and on[-1]["success"]
        plain.close()
        shots.close()


@pytest.mark.parametrize("bad", ["yes", 1, None, 0.0])
def test_a_non_bool_screenshots_value_is_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="screenshots must be True or False"):
        make_browser_env("BrowserClickButton", screenshots=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="screenshots must be True or False"):
        gym.make("harness_gym/BrowserClickButton-Json-v0", screenshots=bad)


def test_gym_make_kwarg_gives_screenshots_and_close_leaves_no_chromium() -> None:
    env = gym.make("harness_gym/BrowserClickButton-Json-v0", screenshots=True)
    try:
        _, info = env.reset(seed=5)
        assert decode_png(info["screenshot"])[:2] == (160, 210)
        needles = list(env.unwrapped.browser_task.session._handles.needles)
        _, _, _, _, info = env.step(env.unwrapped.oracle_action())
        assert decode_png(info["screenshot"])[:2] == (160, 210)
    finally:
        env.close()
    time.sleep(0.2)
    assert needles and [pid for needle in needles for pid in processes_matching(needle)] == []


def test_a_browser_frozen_during_the_capture_ends_the_step_within_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The capture runs under the step's deadline: a browser that stops answering during it
    (SIGSTOP just before the real capture) ends the step with ``browser_timeout`` and no
    screenshot, in time; the next reset starts a new browser and captures again."""
    deadline = 2.0
    env = make_browser_env("BrowserEnterText", screenshots=True, call_timeout=deadline)
    try:
        env.reset(seed=6)
        session = env.browser_task.session
        needles = list(session._handles.needles)
        main_pid = session._handles.main_pid
        capture = session.screenshot
        frozen: list[str] = []

        def freeze_then_capture(page: object, selector: str) -> bytes:
            frozen.append(selector)
            os.kill(main_pid, signal.SIGSTOP)
            return capture(page, selector)

        monkeypatch.setattr(session, "screenshot", freeze_then_capture)
        began = time.monotonic()
        try:
            _, reward, terminated, _, info = env.step(env.oracle_action())
        finally:
            if os.path.exists(f"/proc/{main_pid}"):
                os.kill(main_pid, signal.SIGCONT)
        assert time.monotonic() - began < deadline + 3.0
        assert terminated and reward == 0.0 and info["error_kind"] == "browser_timeout"
        assert frozen == [TASK_AREA] and info["screenshot"] is None
        assert "did not answer the step type within 2 s" in info["browser_error"]
        monkeypatch.undo()
        _, info = env.reset(seed=6)
        assert decode_png(info["screenshot"])[:2] == (160, 210) and session.launches == 2
    finally:
        env.close()
    time.sleep(0.2)
    assert [pid for needle in needles for pid in processes_matching(needle)] == []


#: MiniWoB's START cover colour (``#sync-task-cover``: ``background-color: #111``).
COVER_RGB = (17, 17, 17)


def _cover_share(frame: np.ndarray) -> float:
    return float(np.all(frame == COVER_RGB, axis=-1).mean())


def test_the_final_steps_screenshot_is_the_final_page_not_the_start_cover(session: BrowserSession) -> None:
    env = make_browser_env("BrowserClickButton", session=session, screenshots=True)
    for seed in (0, 1):
        infos = play_oracle(env, seed)
        assert infos[-1]["success"]
        final = png_to_rgb(infos[-1]["screenshot"])
        assert _cover_share(final) < 0.05  # the cover would fill the whole area
        assert _cover_share(png_to_rgb(infos[0]["screenshot"])) < 0.05
        # The final page: the yellow instruction bar on top, as on the reset's page.
        yellow = np.all(final[:40] == (255, 255, 0), axis=-1).mean()
        assert yellow > 0.5 and final.shape == (210, 160, 3)
        # The cover is there in the page (MiniWoB put it up), only not in the capture.
        task = env.browser_task
        shown = task.session.call(task._page, "(() => core.cover_div !== null)")
        assert shown is True
    env.close()


def test_rgb_array_render_mode_gives_task_area_frames(session: BrowserSession) -> None:
    env = make_browser_env("BrowserEnterText", session=session, render_mode="rgb_array")
    blank = env.render()  # before the first reset: black, of the task area's size
    assert blank.shape == (TASK_AREA_SIZE[1], TASK_AREA_SIZE[0], 3) and not blank.any()
    _, info = env.reset(seed=3)
    assert "screenshot" not in info  # frames are captured on render(), not with every step
    first = env.render()
    assert first.dtype == np.uint8 and first.shape == (210, 160, 3) and first.any()
    box = next(n for n in env.browser_task._refs.values() if n["tag"] == "input")
    env.step(env.format_action(Action.of("type", ref=box["ref"], text="wxyz")))
    assert not np.array_equal(env.render(), first)  # the typed text shows
    # With screenshots on, the frame is the step's own screenshot, decoded.
    shots = make_browser_env("BrowserEnterText", session=session, render_mode="rgb_array", screenshots=True)
    _, info = shots.reset(seed=3)
    assert np.array_equal(shots.render(), png_to_rgb(info["screenshot"]))
    assert np.array_equal(shots.render(), first)  # same seed, same page, same pixels
    env.close()
    shots.close()


def test_record_video_records_browser_episodes(tmp_path: Path) -> None:
    pytest.importorskip("moviepy", reason="gymnasium's RecordVideo needs moviepy")
    from gymnasium.wrappers import RecordVideo

    env = gym.make("harness_gym/BrowserClickButton-Json-v0", render_mode="rgb_array")
    recorded = RecordVideo(env, str(tmp_path), episode_trigger=lambda _: True, disable_logger=True)
    try:
        for seed in (0, 1):
            recorded.reset(seed=seed)
            done = False
            while not done:
                _, _, terminated, truncated, _ = recorded.step(env.unwrapped.oracle_action())
                done = terminated or truncated
        assert len(recorded.recorded_frames) >= 2
        assert all(f.shape == (210, 160, 3) for f in recorded.recorded_frames)
    finally:
        recorded.close()
    videos = sorted(tmp_path.glob("*.mp4"))
    assert len(videos) == 2 and all(v.stat().st_size > 1000 for v in videos)


#: CSS's named colours of click-color's palette (``COLORS`` in ``click-color.html``).
NAMED_RGB = {
    "red": (255, 0, 0), "blue": (0, 0, 255), "olive": (128, 128, 0), "lime": (0, 255, 0),
    "black": (0, 0, 0), "white": (255, 255, 255), "grey": (128, 128, 128), "purple": (128, 0, 128),
    "orange": (255, 165, 0), "yellow": (255, 255, 0), "cyan": (0, 255, 255), "pink": (255, 192, 203),
    "magenta": (255, 0, 255),
}  # fmt: skip


def test_pixel_only_tasks_are_solvable_from_screenshots_but_left_out_for_text_agents(
    session: BrowserSession,
) -> None:
    """click-color's answer is only in the pixels: read from the screenshot at each cell's
    click point, it is solved with the existing click; the exclusion reason says so."""
    from harness_gym.envs.browser.catalog import EXCLUDED
    from harness_gym.envs.browser.tasks import _make

    for name in ("click-color", "click-shades", "count-sides"):
        assert EXCLUDED[name].startswith("for text-only agents") and "screenshots=True" in EXCLUDED[name]
    task = _make("click-color", 3)(session=session, click_mode="cdp", screenshots=True)
    solved = 0
    for seed in range(12):
        task.begin(seed)
        words = [w for w in task.fields()["instruction"].split() if w in NAMED_RGB]
        if not words:  # the colour is shown as a swatch, not named: skipped here
            continue
        image = png_to_rgb(task.screenshot)
        cells = [ref for ref, node in task._refs.items() if not node.get("children")]  # not #area
        want = NAMED_RGB[words[0]]
        matching = [
            ref for ref in cells if tuple(image[int(task._points[ref][1]), int(task._points[ref][0])]) == want
        ]
        assert len(matching) == 1, (seed, matching)
        result = task.step(Action.of("click", ref=matching[0]))
        assert result.terminated and result.success, seed
        solved += 1
    assert solved >= 3
    task.close()


@pytest.mark.parametrize("task_id", ["BrowserEnterText", "BrowserLoginUser", "BrowserClickButton"])
def test_a_capture_leaves_the_page_as_it_was(task_id: str, session: BrowserSession) -> None:
    """Issue 42 item 2: a capture changes nothing an agent, a reward or a digest can see (no
    ``style=""`` left on text fields, the START cover's style put back): the page's whole audit
    (tests/browser_play.py) is the same before and after, at the reset, mid-episode and after
    the final step (when the cover is up)."""
    from browser_play import audit

    env = make_browser_env(task_id, session=session, render_mode="rgb_array")
    for seed in (0, 1):
        env.reset(seed=seed)
        task, done = env.browser_task, False
        while True:
            before = audit(task)
            assert env.render().shape == (210, 160, 3)
            assert audit(task) == before, (task_id, seed, len(task.trace))
            if done:
                break
            _, _, terminated, truncated, _ = env.step(env.oracle_action())
            done = terminated or truncated
    env.close()


@pytest.mark.parametrize("task_id", ["BrowserEnterText", "BrowserLoginUser"])
def test_digests_are_the_same_with_screenshots_or_render_on_reused_resets(
    task_id: str, session: BrowserSession
) -> None:
    """The digest of every reset and step is the same with screenshots off, with
    ``screenshots=True`` and with ``render()`` after every reset and step, on reused pages."""
    plain = make_browser_env(task_id, session=session)
    shots = make_browser_env(task_id, session=session, screenshots=True)
    rendered = make_browser_env(task_id, session=session, render_mode="rgb_array")
    digests: list[list[str]] = []
    for env in (plain, shots, rendered):
        seen = []
        for seed in (5, 6, 7):
            _, info = env.reset(seed=seed)
            assert info["page_reused"] is (seed != 5)
            seen.append(info["state_digest"])
            done = False
            while not done:
                if env is rendered:
                    env.render()
                _, _, terminated, truncated, info = env.step(env.oracle_action())
                seen.append(info["state_digest"])
                done = terminated or truncated
            if env is rendered:
                env.render()
        digests.append(seen)
    assert digests[0] == digests[1] == digests[2]
    for env in (plain, shots, rendered):
        env.close()
