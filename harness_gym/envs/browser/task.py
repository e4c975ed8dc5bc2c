"""BrowserTask: one real MiniWoB++ task, played in headless Chromium, as a harness_gym Task.

The task keeps the web suite's interface, so every harness presents both alike:

* fields ``instruction`` (MiniWoB's utterance), ``title`` (the document title) and ``page``
  (the visible element tree, read from the live DOM by the page-side functions of
  :data:`~harness_gym.envs.browser.dom.PAGE_SCRIPT`);
* canonical actions ``click(ref)``, ``type(ref, text)``, ``press(key)`` and
  ``select(ref, option)`` (the web suite's :data:`~harness_gym.envs.web.base.WEB_ACTIONS`),
  sent as real mouse and keyboard input (a drop-down choice is set the way a user's pick
  is: option selected, ``input`` and ``change`` fired).

An episode: the task's document (the previous episode's, put back as a fresh load has it,
where that is shown exact: ``reuse_page``, the default; else a freshly loaded page, see
:mod:`~harness_gym.envs.browser.browser`),
``Math.seedrandom(seed)`` with a seed drawn from the reset generator, MiniWoB's
``core.startEpisodeReal()``, and the task timer cancelled (the :mod:`virtual clock
<harness_gym.envs.browser.clock>` only moves when an action is taken, so nothing depends on
wall-clock time). The task's own JavaScript decides the reward: the episode ends when it calls
``core.endEpisode``, and succeeds when its raw reward is full (1.0). Reward is binary: 1 on
success, else 0.

A tab in ``type``'s text is a real Tab key press: the focus moves to the next focusable
element (no literal tab is left in the field) and the rest of the text is typed there, key
by key, as a user's keys would go (lost on a button).

``type`` inserts its text the way a paste does (one ``input`` event for all but the last
character), then types the last character as a key press (``keydown``, ``keypress``,
``input``, ``keyup``), so a task that reacts to the end of typing still sees it; a 1,000
character ``type`` costs about what a 10 character one does. By default (``type_mode="dom"``)
both happen inside the page in one round trip, the key press dispatched there with a real
press's key codes; ``type_mode="cdp"`` sends trusted browser input (see :data:`TYPE_MODES`).
Tasks that read every key press (``typing = "keys"``: the terminal, the spinner that blocks
typed keys) get one key press per character, as before.

Every reset and every step runs under the session's deadline (``call_timeout``); a reset that
starts a browser (the first, or one after a failure) does so under the launch deadline
(``launch_timeout``) and records the seconds it took in :attr:`BrowserTask.launch_s`. If Chromium
dies, a page of it crashes, or it does not answer in time, the step that meets the failure
ends the episode (``terminated``, no success) and :attr:`BrowserTask.browser_error` and
:attr:`BrowserTask.browser_error_kind` (``browser_crashed`` or ``browser_timeout``) say what
happened; the next reset starts a new browser. A reset that meets a browser already dead
replaces it at once; one that meets a crash or a stall raises the error, within the deadline.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from harness_gym.core.task import Action, ActionSpec, StepResult, Task
from harness_gym.envs.browser import dom
from harness_gym.envs.browser.assets import image_urls, task_path, task_url
from harness_gym.envs.browser.browser import (
    CALL_TIMEOUT_S,
    LAUNCH_TIMEOUT_S,
    BrowserSession,
)
from harness_gym.envs.browser.catalog import EXACT_REUSE
from harness_gym.envs.browser.clock import SETTLE_MS
from harness_gym.envs.browser.devtools import devtools_mode
from harness_gym.envs.browser.errors import BrowserCrashedError, BrowserTimeoutError
from harness_gym.envs.browser.launch import check_requirements
from harness_gym.envs.web.base import KEYS, WEB_ACTIONS

#: Keys ``press`` accepts (the web suite's, plus the ones real widgets react to).
BROWSER_KEYS = (*KEYS, "ArrowLeft", "ArrowRight", "Space", "Delete", "Home", "End", "PageUp", "PageDown")
#: Tags whose elements legal_actions offers to click (besides any element with its own text).
CLICK_TAGS = frozenset(
    {"button", "a", "input", "textarea", "label", "li", "span", "td", "th", "img", "summary"}
    | {"svg", "circle", "rect", "ellipse", "polygon", "path", "line", "text"}
)
#: How ``click`` reaches the page: ``"dom"`` dispatches the mouse events of a click at the
#: element's hit point from inside the page (one round trip, like MiniWoB's own
#: ``core.elementClick``, but with the full pointer/mouse sequence and focus); ``"cdp"`` sends a
#: real (trusted) press and release through the DevTools protocol (three round trips).
CLICK_MODES = ("dom", "cdp")
#: A raw MiniWoB reward at least this high is a success (full credit).
SUCCESS_REWARD = 1.0 - 1e-6
_QUOTED = re.compile(r'"([^"]+)"')
#: How ``type`` enters text: ``"paste"`` (one input event, then the last character as a key
#: press) or ``"keys"`` (a key press per character, for tasks that read every key).
TYPING_MODES = ("paste", "keys")
#: How a ``"paste"`` ``type`` reaches the page: ``"dom"`` enters it from inside the page
#: (focus, one ``insertText`` edit, the last character as a key press dispatched in the page,
#: and the observation: one round trip, like ``click_mode="dom"``); ``"cdp"`` sends trusted
#: browser input through the DevTools protocol (``Input.insertText``, then a real key press:
#: four round trips with the focus and the observation). Text with a tab or a newline, date and
#: time fields, and ``"keys"`` tasks always get real keys.
TYPE_MODES = ("dom", "cdp")
#: Characters ``type`` always sends as key presses (Playwright's keyboard presses Enter for
#: them), so a newline still submits a form as a typed one does. A tab is a Tab key press,
#: which moves the focus (see ``BrowserTask._type``).
_KEY_CHARS = re.compile(r"([\r\n])")
#: The element a screenshot shows: MiniWoB's task area (``#wrap``: the instruction and the
#: task, 160 x 210 CSS pixels at the top left of every task page), what Farama's env crops its
#: screenshots to (``miniwob/screenshot.py``, ``TASK_WIDTH`` x ``TASK_HEIGHT``).
TASK_AREA = "#wrap"
#: The task area's size in CSS pixels (width, height), one image pixel per CSS pixel.
TASK_AREA_SIZE = (160, 210)


def png_to_rgb(png: bytes) -> np.ndarray:
    """PNG bytes as an RGB array (``uint8``, height x width x 3), decoded by Pillow."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.uint8).copy()


#: A scripted policy: the current fields in, the next canonical action out.
Oracle = Callable[[dict[str, Any]], Action]


class BrowserTask(Task):
    """A real MiniWoB++ task (``subdomain``, e.g. ``"click-button"``) in headless Chromium.

    Args:
        session: a :class:`BrowserSession` to run in (default: a new one, owned and closed by
            this task).
        click_mode: ``"dom"`` (default) or ``"cdp"``, see :data:`CLICK_MODES`.
        type_mode: ``"dom"`` (default) or ``"cdp"``, see :data:`TYPE_MODES`.
        call_timeout: the deadline of a reset or a step, in seconds, of the browser this task
            starts (default :data:`~harness_gym.envs.browser.browser.CALL_TIMEOUT_S`).
        reuse_page: start each episode in the previous episode's document where that is
            exact (the default), as Farama's env does: ``core.startEpisodeReal()`` again, in
            one round trip and without a page load, with what MiniWoB and the harness keep in
            the document put back as a fresh load has it. Only the tasks of
            :data:`~harness_gym.envs.browser.catalog.EXACT_REUSE` are reused, those whose
            reused document was shown to give a fresh page's fields and state digest for
            every seed tried; the others get a fresh document per episode, as does every task
            with ``reuse_page=False``. :attr:`page_reused` says which happened.
        screenshots: capture the task area (:data:`TASK_AREA`) as PNG bytes after every reset
            and every step, in :attr:`screenshot` (the env puts it in ``info["screenshot"]``),
            for agents that read pixels. Off by default (nothing is captured).

    Construction checks that Playwright and Chromium are installed and raises
    :class:`~harness_gym.envs.browser.errors.BrowserUnavailableError` with the install
    command if not; the browser itself starts at the first reset.
    """

    field_names: ClassVar[tuple[str, ...]] = ("instruction", "title", "page")
    action_specs: ClassVar[tuple[ActionSpec, ...]] = WEB_ACTIONS
    max_steps: ClassVar[int] = 10
    family: ClassVar[str | None] = "browser"
    #: The MiniWoB++ task name (the HTML file name without ``.html``).
    subdomain: ClassVar[str]
    #: Keys that legal_actions offers for ``press``.
    legal_keys: ClassVar[tuple[str, ...]] = ()
    #: Virtual milliseconds the page clock runs after each action.
    settle_ms: ClassVar[int] = SETTLE_MS
    #: MiniWoB's data mode (``core.setDataMode``), as Farama's environment sets it.
    data_mode: ClassVar[str] = "train"
    #: The scripted oracle reading the live fields, or None (the oracle then falls back to
    #: the first legal action).
    scripted_oracle: ClassVar[Oracle | None] = None
    #: The pure-Python web task this one is the real counterpart of, if any.
    twin: ClassVar[str | None] = None
    #: How ``type`` enters text (see :data:`TYPING_MODES`).
    typing: ClassVar[str] = "paste"

    def __init__(
        self,
        session: BrowserSession | None = None,
        click_mode: str = "dom",
        call_timeout: float | None = None,
        reuse_page: bool = True,
        screenshots: bool = False,
        type_mode: str = "dom",
    ) -> None:
        if not isinstance(screenshots, bool):
            raise TypeError(f"screenshots must be True or False, got {screenshots!r}")
        if not isinstance(reuse_page, bool):
            raise TypeError(f"reuse_page must be True or False, got {reuse_page!r}")
        if click_mode not in CLICK_MODES:
            raise ValueError(f"click_mode must be one of {CLICK_MODES}, got {click_mode!r}")
        if type_mode not in TYPE_MODES:
            raise ValueError(f"type_mode must be one of {TYPE_MODES}, got {type_mode!r}")
        if session is not None and call_timeout is not None:
            raise ValueError("call_timeout is the session's: pass it to BrowserSession, not with session=")
        if call_timeout is not None and not call_timeout > 0:
            raise ValueError(f"call_timeout must be a positive number of seconds, got {call_timeout!r}")
        self.click_mode = click_mode
        self.type_mode = type_mode
        self.call_timeout = call_timeout
        self.reuse_page = bool(reuse_page)
        self.screenshots = screenshots
        #: PNG bytes of the task area after the latest reset or step (None unless
        #: ``screenshots``, or when the browser failed before the capture).
        self.screenshot: bytes | None = None
        #: Whether observations carry each element's click point (only ``"cdp"`` clicks use them).
        self._points_wanted = click_mode == "cdp"
        self.chromium = check_requirements()
        task_path(self.subdomain)  # fails now, with the install hint, if the HTML is missing
        self._own_session = session is None
        self._session = session
        self._page: Any = None
        self._obs: dict[str, Any] = {"instruction": "", "title": "", "page": [], "done": True}
        self._refs: dict[int, dict[str, Any]] = {}
        self._points: dict[int, tuple[float, float]] = {}
        self._html_digest = ""
        self.seed: int | None = None
        self.trace: list[Action] = []
        self.done = True
        self.succeeded = False
        self.raw_reward = 0.0
        self.reason: str | None = None
        #: What went wrong with the browser in this episode (None when nothing did).
        self.browser_error: str | None = None
        #: ``"browser_crashed"`` or ``"browser_timeout"`` when :attr:`browser_error` is set.
        self.browser_error_kind: str | None = None
        #: Whether the latest reset ran in the previous episode's document (``reuse_page``).
        self.page_reused = False
        #: Seconds the latest reset spent starting a browser, under the launch deadline (not
        #: ``call_timeout``); None when it found one running.
        self.launch_s: float | None = None

    @property
    def has_oracle(self) -> bool:
        return type(self).scripted_oracle is not None

    @property
    def session(self) -> BrowserSession:
        if self._session is None:
            if self.call_timeout is None:
                self._session = BrowserSession(self.chromium)
            else:
                self._session = BrowserSession(self.chromium, call_timeout=self.call_timeout)
        return self._session

    # -- Task API -----------------------------------------------------------------------------

    def reset(self, rng: np.random.Generator) -> None:
        self.begin(int(rng.integers(0, 2**31 - 1)))

    def begin(self, seed: int) -> None:
        """Start the episode of MiniWoB seed ``seed``: in the previous episode's document where
        ``reuse_page`` applies, else in a fresh page (a new browser if needed).

        A browser found dead is replaced at once; a crash or a stall during the reset (past
        the session's deadline) raises :class:`BrowserCrashedError` /
        :class:`BrowserTimeoutError` (the next reset starts a new browser).
        """
        self.seed = seed
        self.trace = []
        self.done = False
        self.succeeded = False
        self.raw_reward = 0.0
        self.reason = None
        self.browser_error = None
        self.browser_error_kind = None
        self.screenshot = None
        self.launch_s = None
        url, images = task_url(self.subdomain), image_urls(self.subdomain)
        args = {"seed": seed, "mode": self.data_mode, "settle": self.settle_ms, "points": self._points_wanted}
        session = self.session
        self.page_reused = False
        reusable = self.reuse_page and self.subdomain in EXACT_REUSE
        if reusable and self._page is not None and session.is_active(self._page):
            try:  # Farama's way: the next episode in the same document, one round trip
                text = session.call(self._page, "__hgPage.restart", args)
            except BrowserCrashedError as err:
                self._page = None
                session.mark_broken()
                # A browser that was already dead (killed between episodes) is replaced within
                # this reset, by the fresh load below; a crash or a stall during it ends the reset.
                if isinstance(err, BrowserTimeoutError) or "crashed during" in str(err):
                    self.done = True
                    raise type(err)(f"{self.task_id}: could not start an episode: {err}") from err
            else:
                self.page_reused = True
                self._started(text)
                return
        for attempt in range(2):
            launches = session.launches
            try:
                self._page, text = session.load(url, images, "__hgPage.start", args)
                if session.launches != launches:
                    self.launch_s = session.last_launch_s
                break
            except BrowserCrashedError as err:
                self._page = None
                session.mark_broken()
                # Only a browser that was already dead (killed between episodes) is replaced
                # within this reset; a crash or a stall during it ends the reset now.
                stale = session.launches == launches and not isinstance(err, BrowserTimeoutError)
                if attempt or not stale or "crashed during" in str(err):
                    self.done = True
                    raise type(err)(f"{self.task_id}: could not start an episode: {err}") from err
        self._started(text)

    def _started(self, text: str) -> None:
        """Take in the episode start's observation (JSON text, with the markup to digest)."""
        obs = json.loads(text)
        self._html_digest = hashlib.sha256(obs.pop("html").encode("utf-8", "replace")).hexdigest()[:16]
        self._observe(obs)
        self._capture_after_reset()

    def _capture_after_reset(self) -> None:
        """The reset's screenshot (when asked for), under a deadline of its own; a failure ends
        the reset as a failed load does."""
        if not self.screenshots:
            return
        try:
            self.screenshot = self.session.screenshot(self._page, TASK_AREA)
        except BrowserCrashedError as err:
            self._page = None
            self.done = True
            raise type(err)(f"{self.task_id}: could not start an episode: {err}") from err

    def frame(self) -> np.ndarray:
        """The task area as an RGB image (``uint8``, height x width x 3): the latest
        screenshot with ``screenshots=True``, else one captured now (under the session's
        deadline). Black, of the task area's size, when there is no page to capture (before
        the first reset, after a browser failure)."""
        png = self.screenshot
        if png is None and self._page is not None and not self._closed_page():
            try:
                png = self.session.screenshot(self._page, TASK_AREA)
            except BrowserCrashedError:
                self.session.mark_broken()  # the next step meets the failure; the next reset recovers
                png = None
        if png is None:
            return np.zeros((TASK_AREA_SIZE[1], TASK_AREA_SIZE[0], 3), dtype=np.uint8)
        return png_to_rgb(png)

    def _closed_page(self) -> bool:
        session = self._session
        return session is None or not session.is_active(self._page)

    @property
    def options(self) -> dict[str, Any]:
        """The browser options this task runs with (the env records them in ``info``)."""
        session = self._session
        timeout = session.call_timeout if session is not None else self.call_timeout or CALL_TIMEOUT_S
        launch = session.launch_timeout if session is not None else LAUNCH_TIMEOUT_S
        return {
            "click_mode": self.click_mode,
            "type_mode": self.type_mode,
            "call_timeout": timeout,
            "launch_timeout": launch,
            "reuse_page": self.reuse_page,
            "screenshots": self.screenshots,
            "devtools": session.devtools if session is not None else devtools_mode(),
        }

    def fields(self) -> dict[str, Any]:
        obs = self._obs
        return {"instruction": obs["instruction"], "title": obs["title"], "page": obs["page"]}

    def legal_actions(self) -> list[Action]:
        if self.done:
            return []
        candidates = self.type_candidates()
        actions: list[Action] = []
        for node in self._refs.values():
            tag = node["tag"]
            if tag == "select":
                options = node.get("options", ())
                actions.extend(Action.of("select", ref=node["ref"], option=o) for o in options)
                continue
            if tag in CLICK_TAGS or node.get("text"):
                actions.append(Action.of("click", ref=node["ref"]))
            if dom.is_text_input(node):
                actions.extend(Action.of("type", ref=node["ref"], text=t) for t in candidates)
        actions.extend(Action.of("press", key=k) for k in self.legal_keys)
        return actions

    def type_candidates(self) -> list[str]:
        """Strings legal_actions offers to type: the quoted values of the instruction."""
        return list(dict.fromkeys(_QUOTED.findall(self._obs["instruction"])))

    def check(self, action: Action) -> str | None:
        if self.done:
            return "the episode is over"
        if action.name == "press":
            key = action["key"]
            return None if key in BROWSER_KEYS else f"unknown key {key!r}; keys: {list(BROWSER_KEYS)}"
        ref = action["ref"]
        node = self._refs.get(ref)
        if node is None:
            refs = list(self._refs)
            shown = refs if len(refs) <= 60 else [*refs[:60], "..."]
            return f"no visible element with ref {ref}; visible refs: {shown}"
        if action.name == "type" and not dom.is_text_input(node):
            return f"element {ref} is a {node['tag']}, not a text input"
        if action.name == "select":
            if node["tag"] != "select":
                return f"element {ref} is a {node['tag']}, not a drop-down list"
            if action["option"] not in node.get("options", ()):
                return f"element {ref} has no option {action['option']!r}; options: {node.get('options')}"
        return None

    def step(self, action: Action) -> StepResult:
        self.trace.append(action)
        try:
            with self.session.guard(f"the step {action.name}"):
                text = self._act(action)
                # under the step's deadline: the action and its screenshot together
                shot = self.session.screenshot(self._page, TASK_AREA) if self.screenshots else None
            self._observe(json.loads(text))
            self.screenshot = shot
        except BrowserCrashedError as err:
            return self._crash(err)
        reward = 1.0 if self.done and self.succeeded else 0.0
        return StepResult(reward, self.done, self.succeeded, self.reason or "")

    def _act(self, action: Action) -> str:
        """Send one action to the page; the observation after it (JSON text)."""
        page, session = self._page, self.session
        call = functools.partial(session.call, page)
        ref = action.kwargs.get("ref")
        text = None
        if action.name == "click" and self.click_mode == "dom":
            text = call("__hgPage.click", ref, self.settle_ms)
        elif action.name == "click":
            point = self._points.get(ref) or call("__hgPage.point", ref)
            if point is not None:
                self._click(point[0], point[1])
        elif action.name == "type":
            typed = action["text"]
            segmented = self._refs.get(ref, {}).get("type", "").lower() in dom.SEGMENTED_INPUT_TYPES
            if self._types_in_page(typed, segmented):
                text = call("__hgPage.type", ref, typed, self.settle_ms, self._points_wanted)
            elif call("__hgPage.focus", ref):
                self._type(typed, segmented)
        elif action.name == "press":
            session.keyboard(page, "press", " " if action["key"] == "Space" else action["key"])
        elif action.name == "select":
            text = call("__hgPage.select", ref, action["option"], self.settle_ms, self._points_wanted)
        if text is None:
            text = call("__hgPage.observe", self.settle_ms, self._points_wanted)
        return text

    def oracle(self) -> Action:
        oracle = type(self).scripted_oracle
        if oracle is not None:
            return oracle(self.fields())
        legal = self.legal_actions()
        return legal[0] if legal else Action.of("press", key="Escape")

    def state(self) -> dict[str, Any]:
        return {
            "task": self.subdomain,
            "seed": self.seed,
            "instruction": self._obs["instruction"],
            "title": self._obs["title"],
            "page": self._obs["page"],
            "html": self._html_digest,
            "done": self.done,
            "succeeded": self.succeeded,
            "raw_reward": self.raw_reward,
        }

    def snapshot(self) -> Any:
        """The seed and the actions taken: :meth:`restore` replays them from the episode's
        start (the same instance, in a reused or a fresh document alike)."""
        return {"seed": self.seed, "trace": list(self.trace)}

    def restore(self, snapshot: Any) -> None:
        self.begin(snapshot["seed"])
        for action in snapshot["trace"]:
            if self.done:
                break
            self.step(action)

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the browser this task owns (a shared session is left to its owner)."""
        if self._own_session and self._session is not None:
            self._session.close()
            self._session = None
        self._page = None

    # -- internals ----------------------------------------------------------------------------

    def _types_in_page(self, text: str, segmented: bool) -> bool:
        """Whether ``type`` of ``text`` goes in from inside the page (see :data:`TYPE_MODES`)."""
        if self.type_mode != "dom" or self.typing != "paste" or segmented or not text:
            return False
        return "\t" not in text and _KEY_CHARS.search(text) is None

    def _type(self, text: str, by_keys: bool = False) -> None:
        """Enter ``text`` into the focused field (its content selected, so it is replaced);
        key by key for tasks that read every key and for date and time fields. A tab is a
        real Tab key: the focus moves on (as a user's Tab does), and the text after it is typed
        key by key where the focus went (a paste would land in the last text field: Chromium
        sends inserted text there even when a button has the focus)."""
        session, page = self.session, self._page
        if not text:
            session.keyboard(page, "press", "Backspace")
            return
        for index, part in enumerate(text.split("\t")):
            if index:
                session.keyboard(page, "press", "Tab")
            if not part:
                continue
            if by_keys or self.typing == "keys" or index:
                session.keyboard(page, "type", part)
                continue
            for piece in _KEY_CHARS.split(part):
                if len(piece) > 1:
                    session.keyboard(page, "insert_text", piece[:-1])
                if piece:
                    session.keyboard(page, "type", piece[-1])

    def _click(self, x: float, y: float) -> None:
        """A left click at a viewport point: raw press and release, as a user's mouse sends."""
        for kind in ("mousePressed", "mouseReleased"):
            self.session.cdp(
                self._page,
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "buttons": 1, "clickCount": 1},
            )

    def _observe(self, obs: dict[str, Any]) -> None:
        self._points = {ref: (x, y) for ref, x, y in obs.pop("points", ())}
        self._obs = obs
        self._refs = dom.index(obs["page"])
        if obs["done"] and not self.done:
            self.done = True
            self.raw_reward = float(obs["raw_reward"])
            self.succeeded = self.raw_reward >= SUCCESS_REWARD
            self.reason = obs.get("reason")

    def _crash(self, err: BrowserCrashedError) -> StepResult:
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        self.browser_error_kind = err.error_kind
        label = "browser timeout" if isinstance(err, BrowserTimeoutError) else "browser crashed"
        self.browser_error = f"{label}: {first_line}"
        self.done = True
        self.succeeded = False
        self._refs = {}
        self.screenshot = None
        if self._session is not None:
            self._session.mark_broken()
        return StepResult(0.0, True, False, self.browser_error)
