"""BrowserEnv: HarnessEnv for real-browser tasks, plus clean close and crash reporting.

It presents the task through the harness exactly as :class:`~harness_gym.core.env.HarnessEnv`
does (every harness factor applies unchanged) and adds what a real browser needs:

* ``close()`` closes the env's Chromium (no process left behind);
* a step that meets a dead, crashed or stalled browser (past the session's deadline) ends the
  episode (``terminated``, reward 0) and ``info`` carries ``browser_error`` (also as
  ``last_error``, with ``error_kind`` ``"browser_crashed"`` or ``"browser_timeout"``); the
  next ``reset`` starts a new browser;
* ``info`` also carries ``raw_reward``, the task JavaScript's own reward for the episode, and
  ``miniwob_seed``, the seed given to MiniWoB's ``Math.seedrandom`` (Farama's env replays the
  same instance with ``reset(seed=info["miniwob_seed"])``);
* ``info["browser_options"]``: the browser options the env runs with (``click_mode``,
  ``type_mode``, ``call_timeout``, ``launch_timeout``, ``reuse_page``, ``screenshots``,
  ``devtools``: ``pipe`` or ``port``); ``reuse_page``
  (True by default) asks for episodes in the previous episode's document where that is
  exact, ``False`` forces a freshly loaded document per episode;
* ``info["page_reused"]``: whether this reset ran in the previous episode's document (True
  only with ``reuse_page`` for a task of
  :data:`~harness_gym.envs.browser.catalog.EXACT_REUSE`, when the document is still there:
  never at the first reset, after a browser failure or after another task's page);
* ``info["browser_launch_s"]``: seconds the reset spent starting a browser (under
  ``launch_timeout``, apart from ``call_timeout``), None when it found one running;
* with ``screenshots=True``, ``info["screenshot"]``: PNG bytes of the task area after the
  reset or the step (None after a browser failure); without it, no such key.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, SupportsFloat

from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import Harness
from harness_gym.core.registry import get_task
from harness_gym.envs.browser.browser import BrowserSession
from harness_gym.envs.browser.task import BrowserTask


class BrowserEnv(HarnessEnv):
    """A real MiniWoB++ task in headless Chromium, presented through a harness.

    Besides the text render modes, ``render_mode="rgb_array"``: :meth:`render` returns the
    task area as a ``uint8`` array of height x width x 3 (see
    :meth:`~harness_gym.envs.browser.task.BrowserTask.frame`), so Gymnasium's
    ``RecordVideo`` records episodes.
    """

    metadata = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        task: BrowserTask | type[BrowserTask],
        harness: Harness | str | Mapping[str, Any] | Path | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(task, harness=harness, render_mode=render_mode)
        if not isinstance(self.task, BrowserTask):
            raise TypeError(f"BrowserEnv needs a BrowserTask, got {type(self.task).__name__}")

    @property
    def browser_task(self) -> BrowserTask:
        assert isinstance(self.task, BrowserTask)
        return self.task

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        return observation, self._browser_info(info)

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        error = self.browser_task.browser_error
        if error is not None:
            terminated, truncated = True, False
            info["last_error"] = error
            info["error_kind"] = self.browser_task.browser_error_kind
        return observation, reward, terminated, truncated, self._browser_info(info)

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            return self.browser_task.frame()
        return super().render()

    def _browser_info(self, info: dict[str, Any]) -> dict[str, Any]:
        info["browser_error"] = self.browser_task.browser_error
        info["raw_reward"] = self.browser_task.raw_reward
        info["miniwob_seed"] = self.browser_task.seed
        info["browser_options"] = self.browser_task.options
        info["browser_launch_s"] = self.browser_task.launch_s
        info["page_reused"] = self.browser_task.page_reused
        if self.browser_task.screenshots:
            info["screenshot"] = self.browser_task.screenshot
        return info


def make_browser_env(
    task: str | type[BrowserTask] | BrowserTask,
    harness: Harness | str | Mapping[str, Any] | Path | None = None,
    render_mode: str | None = None,
    session: BrowserSession | None = None,
    call_timeout: float | None = None,
    reuse_page: bool = True,
    screenshots: bool = False,
    type_mode: str = "dom",
) -> BrowserEnv:
    """Build a :class:`BrowserEnv` from a task id (or class/instance) and any harness form.

    ``session`` runs the task in an existing :class:`BrowserSession` (shared browsers, e.g.
    in tests); by default the env owns a browser of its own, whose deadline per reset or step
    is ``call_timeout`` seconds (default
    :data:`~harness_gym.envs.browser.browser.CALL_TIMEOUT_S`). ``reuse_page`` (the default)
    starts each episode in the previous one's document where that is shown exact, as Farama's
    env does, and in a fresh document elsewhere; ``reuse_page=False`` loads a fresh document
    for every episode (see :class:`~harness_gym.envs.browser.task.BrowserTask`).
    ``screenshots=True`` puts PNG bytes of the task area in ``info["screenshot"]`` after every
    reset and step (off by default). ``type_mode="cdp"`` types with trusted browser input
    instead of from inside the page (see :data:`~harness_gym.envs.browser.task.TYPE_MODES`).
    """
    if isinstance(task, str):
        from harness_gym.envs.browser.tasks import BROWSER_TASKS

        known = {t.task_id: t for t in BROWSER_TASKS}
        task = known[task] if task in known else get_task(task)  # type: ignore[assignment]
    if isinstance(task, type):
        task = task(
            session=session,
            call_timeout=call_timeout,
            reuse_page=reuse_page,
            screenshots=screenshots,
            type_mode=type_mode,
        )
    return BrowserEnv(task, harness=harness, render_mode=render_mode)
