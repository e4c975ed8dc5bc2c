"""Browser lifecycle: one headless Chromium per env, freshly loaded pages for the episodes.

* **Chromium** is the system one (Debian's ``chromium`` package, ``/usr/bin/chromium``),
  driven by Playwright through ``executable_path``; Playwright never downloads a browser.
  ``HARNESS_GYM_CHROMIUM`` points at another binary.
* **One browser per env.** :class:`BrowserSession` launches its browser on first use and keeps
  it for the env's life. The Playwright driver (a Node process) is shared by the sessions of
  one thread of one process and stopped with the last of them.
* **Fresh pages.** A load (:meth:`BrowserSession.load`: an episode of ``reuse_page=False``, of
  a task outside ``EXACT_REUSE``, or the first one) runs in a newly loaded document (a new DOM and a
  new JavaScript realm, the :mod:`virtual clock <harness_gym.envs.browser.clock>` installed
  before any page script), served over HTTP by :func:`~harness_gym.envs.browser.assets.server_url`
  so that Chromium's caches spare it the script parsing. The session keeps four tabs: while an
  episode runs in one, the others load the next episodes' documents, so a reset need not wait
  for a page load. The reset that starts an episode also tells the previous episode's tab (on a
  BroadcastChannel, in the same round trip) to load the next document.
* **Few round trips.** Page-side code is installed by init scripts and called by name through
  the DevTools protocol: a reset is one round trip, a click, a typing or a selection one more,
  each returning the observation. By default (``devtools="pipe"``) those calls go through
  Playwright's Node driver, over the pipe it shares with Chromium: no port is open, no other
  process can reach the browser. ``devtools="port"`` (or ``HARNESS_GYM_BROWSER_DEVTOOLS=port``)
  also opens Chromium's DevTools port on 127.0.0.1 and sends them over a connection of the
  session's own to each tab (:class:`_DirectPage`), one process hop fewer, but that port is
  open to every local user (:class:`DevToolsPortWarning`). Playwright launches the browser,
  navigates, and sends trusted input.
* **Deadlines.** Every call into the browser runs under a deadline (``call_timeout``, one per
  reset or step, however many DevTools calls it makes). A watchdog thread kills the browser
  when a call outlives it, and a page's Playwright ``crash`` event (a renderer died) kills it
  at once, so the blocked call fails instead of waiting forever for a page that will never
  answer. A call still blocked :data:`DRIVER_GRACE_S` after that waits on a Playwright driver
  (the Node process between Python and Chromium) that does not answer either, frozen say:
  the watchdog kills the driver too, and the next start runs a new one. Starting the browser
  has a deadline of its own (``launch_timeout``), recorded apart (``last_launch_s``).
  The call then raises :class:`BrowserTimeoutError` or :class:`BrowserCrashedError`;
  the session is broken and the next :meth:`BrowserSession.load` starts a new browser.
* **Clean close.** :meth:`BrowserSession.close` closes the browser and, as a last resort,
  kills any process of that browser that is still alive (found by a session tag in its
  environment and its private profile directory), so no Chromium process outlives its env.
  A finalizer does the same when a session is garbage-collected without being closed, by
  PID and with no Playwright call (it may run inside Playwright's own event loop).

This module keeps :class:`BrowserSession` and the page-side scripts it installs in every tab;
the parts it is built from have modules of their own: finding and launching Chromium
(:mod:`~harness_gym.envs.browser.launch`), the DevTools modes and the port-mode connection
(:mod:`~harness_gym.envs.browser.devtools`), the shared Playwright driver
(:mod:`~harness_gym.envs.browser.driver`), the watchdog and deadlines
(:mod:`~harness_gym.envs.browser.watchdog`), process discovery and killing
(:mod:`~harness_gym.envs.browser.processes`) and the errors
(:mod:`~harness_gym.envs.browser.errors`).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from harness_gym.envs.browser.clock import INIT_SCRIPT
from harness_gym.envs.browser.devtools import (
    _CONTEXT_GONE,
    DEVTOOLS_ENV,
    DEVTOOLS_MODES,
    DevToolsPortWarning,
    _ContextGoneError,
    _devtools_port,
    _DirectPage,
    devtools_mode,
)
from harness_gym.envs.browser.dom import PAGE_SCRIPT
from harness_gym.envs.browser.driver import _acquire_driver
from harness_gym.envs.browser.errors import BrowserCrashedError, BrowserTimeoutError, BrowserUnavailableError
from harness_gym.envs.browser.launch import (
    INSTALL_CHROMIUM,
    INSTALL_EXTRA,
    check_requirements,
    find_chromium,
    launch_args,
    require_playwright,
)
from harness_gym.envs.browser.processes import (
    _browser_pid,
    _driver_children,
    _profile_dirs,
    processes_matching,
)
from harness_gym.envs.browser.watchdog import DRIVER_GRACE_S, _Handles

log = logging.getLogger(__name__)

#: Environment variable set (to a unique tag) in every browser this module launches.
SESSION_ENV = "HARNESS_GYM_BROWSER_SESSION"
VIEWPORT = {"width": 500, "height": 600}
#: Default deadline of one reset or one step, all its browser calls together (seconds).
CALL_TIMEOUT_S = 15.0
#: Longest wait for Chromium to start (seconds).
LAUNCH_TIMEOUT_S = 30.0
#: Tabs per session: one for the episode, the rest load the next episodes in the background.
DEFAULT_TABS = 4


#: Name of the BroadcastChannel on which a reset tells the tab of the previous episode to
#: load the next document.
CHANNEL = "harness-gym-next-episode"
#: Runs before any page script of every top-level document (after the clock's): the
#: session's side of a tab, as ``window.__hgSession``:
#:
#: * ``ready(a, start)``: wait until this is a fresh, loaded document of ``a.url`` with
#:   MiniWoB's core and the virtual clock in place (after every load handler, the task's own
#:   among them), mark it used, tell the previous episode's tab to load ``a.next`` (on
#:   :data:`CHANNEL`), decode ``a.images`` and return ``start(a.arg)``. A stale document (its
#:   replacement is on the way) waits to be destroyed, so the caller retries in the new one;
#:   a used document, or one of another URL, answers ``{__status: 'other'}``.
#: * ``leave(url)``: load ``url`` in this tab, without waiting (the document is stale at once,
#:   so ``ready`` can never mistake it for the new one).
#:
#: A used document that hears a URL on the channel leaves for it: so the reset that starts an
#: episode in one tab starts the next load in another at no extra round trip.
SESSION_SCRIPT = """
(() => {
  if (window !== window.top || window.__hgSession) return;
  const later = window.__hgRealSetTimeout || window.setTimeout.bind(window);
  const within = (promise, ms) => Promise.race([promise, new Promise((_, reject) => later(
    () => reject(new Error('the page did not load in ' + ms + ' ms: ' + location.href)), ms))]);
  const images = [];  // kept alive, so their decoded data stays in the page's cache
  let used = false, stale = false;
  const channel = new BroadcastChannel('__CHANNEL__');
  function leave(url) {
    stale = true;
    later(() => location.replace(url), 0);
  }
  channel.onmessage = (event) => { if (used && !stale) leave(event.data); };
  function decode(urls) {
    return Promise.all(urls.map((url) => {
      const img = new Image();
      images.push(img);
      img.src = url;
      return img.decode().catch(() => null);
    }));
  }
  async function ready(a, start) {
    if (stale) await within(new Promise(() => {}), a.timeout);
    if (used || location.href !== a.url) return {__status: 'other'};
    if (document.readyState !== 'complete') {
      const loaded = new Promise((done) => addEventListener('load', () => later(done, 0), {once: true}));
      await within(loaded, a.timeout);
    }
    if (typeof core !== 'object' || typeof genProblem !== 'function' || !window.__hgClock) {
      throw new Error('not a MiniWoB++ task page: ' + location.href);
    }
    used = true;
    if (a.next) channel.postMessage(a.next);
    if (a.images.length) await within(decode(a.images), a.timeout);
    return start(a.arg);
  }
  window.__hgSession = {ready, leave};
})();
""".replace("__CHANNEL__", CHANNEL)


#: The bounding box of an element (``__SELECTOR__``: a JSON string) in document coordinates,
#: as ``Page.captureScreenshot``'s ``clip`` takes it; null when the page has no such element or
#: it has no size. MiniWoB's START cover, which its ``core.endEpisode`` lays over the task area
#: at once, is hidden for the capture, so a capture after the final step shows the final page;
#: ``cover`` is then its ``style`` attribute before (the empty string for none), which
#: :data:`UNHIDE_COVER` puts back once the capture is taken: a capture leaves the page as it was.
TASK_AREA_BOX = """
(() => {
  const el = document.querySelector(__SELECTOR__);
  if (!el) return null;
  const r = el.getBoundingClientRect();
  if (!r.width || !r.height) return null;
  const box = {x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height,
               cover: null};
  const cover = document.getElementById('sync-task-cover');
  if (cover && getComputedStyle(cover).display !== 'none') {
    box.cover = cover.getAttribute('style') === null ? '' : cover.getAttribute('style');
    cover.style.display = 'none';
  }
  return box;
})()
"""
#: Puts the START cover's ``style`` attribute (``__STYLE__``: a JSON string, empty for none)
#: back after a capture (see :data:`TASK_AREA_BOX`).
UNHIDE_COVER = """
(() => {
  const cover = document.getElementById('sync-task-cover');
  const style = __STYLE__;
  if (!cover) return;
  if (style === '') cover.removeAttribute('style'); else cover.setAttribute('style', style);
})()
"""


class BrowserSession:
    """One headless Chromium; :meth:`load` hands out a page with a freshly loaded document.

    Args:
        executable: the Chromium binary (default: :func:`find_chromium`).
        tabs: how many tabs to keep. One runs the episode; the others load the next episodes'
            documents in the background (``tabs=1``: every reset waits for a page load).
        call_timeout: the deadline, in seconds, of one :meth:`guard` block (a reset, a step):
            past it the browser is killed and the block raises :class:`BrowserTimeoutError`
            (and if the Playwright driver does not pass the failure on within
            :data:`DRIVER_GRACE_S`, the driver is killed too).
        launch_timeout: the deadline of a start of the browser (its own, apart from
            ``call_timeout``: a reset that finds the browser dead starts a new one under it).
        devtools: ``"pipe"`` or ``"port"`` (default: ``$HARNESS_GYM_BROWSER_DEVTOOLS``, else
            ``"pipe"``), see :data:`DEVTOOLS_ENV`.
    """

    def __init__(
        self,
        executable: str | None = None,
        tabs: int = DEFAULT_TABS,
        call_timeout: float = CALL_TIMEOUT_S,
        launch_timeout: float = LAUNCH_TIMEOUT_S,
        devtools: str | None = None,
    ) -> None:
        self.devtools = devtools_mode(devtools)
        if tabs < 1:
            raise ValueError(f"tabs must be at least 1, got {tabs}")
        if not call_timeout > 0:
            raise ValueError(f"call_timeout must be a positive number of seconds, got {call_timeout!r}")
        self.executable = executable or find_chromium()
        self.tabs = tabs
        if not launch_timeout > 0:
            raise ValueError(f"launch_timeout must be a positive number of seconds, got {launch_timeout!r}")
        self.call_timeout = float(call_timeout)
        self.launch_timeout = float(launch_timeout)
        self.launches = 0
        #: Seconds the latest start of the browser took (None before the first).
        self.last_launch_s: float | None = None
        self._handles = _Handles()
        self._finalizer = weakref.finalize(self, self._handles.finalize)
        self._guard_depth = 0
        self._context: Any = None
        self._pages: list[Any] = []
        self._cdp: list[Any] = []  # a DevTools session per tab (through Playwright's driver)
        self._direct: list[_DirectPage] = []  # a direct DevTools connection per tab, if any
        self._active: int | None = None
        self._loading: dict[int, str] = {}  # tab -> URL it is loading, oldest first
        self._broken = False
        self._shown: set[int] = set()  # tabs whose window a screenshot un-minimized
        self._front: int | None = None  # the tab last brought to the front for a screenshot

    # -- state --------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._handles.browser is not None

    @property
    def alive(self) -> bool:
        """Whether the browser is running and answering (no round trip)."""
        handles = self._handles
        browser = handles.browser
        if browser is None or self._broken or handles.failure is not None or not browser.is_connected():
            return False
        # A driver killed or stopped from outside (between episodes, say) is noticed here, at
        # the next reset, not at the first call that waits on it.
        return handles.driver is None or handles.driver.healthy()

    def pids(self) -> list[int]:
        """The browser's live processes (browser, zygotes, renderers, GPU and utility ones)."""
        return sorted({pid for needle in self._handles.needles for pid in processes_matching(needle)})

    # -- deadlines ----------------------------------------------------------------------------

    @contextmanager
    def guard(self, what: str, seconds: float | None = None) -> Iterator[None]:
        """Run a block of browser calls under one deadline (default: ``call_timeout``).

        Past the deadline the watchdog kills the browser, and a page's ``crash`` event kills it
        at once, so a call blocked on it fails; the block then raises
        :class:`BrowserTimeoutError` or :class:`BrowserCrashedError` (any other Playwright
        failure too) and the session is broken (the next :meth:`load` starts a new browser).
        Nested blocks run under the outermost one's deadline.
        """
        from playwright.sync_api import Error as PlaywrightError

        if self._guard_depth:
            self._guard_depth += 1
            try:
                yield
            finally:
                self._guard_depth -= 1
            return
        limit = self.call_timeout if seconds is None else seconds
        handles = self._handles
        self._guard_depth = 1
        handles.watchdog.arm(limit)
        try:
            yield
        except (PlaywrightError, BrowserCrashedError) as err:
            self._broken = True
            raise self._failure(what, limit, err) from err
        finally:
            handles.watchdog.disarm()
            self._guard_depth = 0
        if handles.failure is not None:  # killed just as the block finished
            self._broken = True
            raise self._failure(what, limit, None)

    def _failure(self, what: str, limit: float, err: Exception | None) -> BrowserCrashedError:
        why = self._handles.failure
        if why == "timeout" and self._handles.driver_killed:
            return BrowserTimeoutError(
                f"neither Chromium nor the Playwright driver answered {what} within "
                f"{limit:g} + {DRIVER_GRACE_S:g} s; both were killed (the next reset starts a new browser)"
            )
        if why == "timeout":
            return BrowserTimeoutError(
                f"Chromium did not answer {what} within {limit:g} s and was killed "
                "(the next reset starts a new browser)"
            )
        if why == "crash":
            return BrowserCrashedError(
                f"a Chromium page crashed during {what} (the next reset starts a new browser)"
            )
        if isinstance(err, BrowserCrashedError):
            return err
        detail = str(err).strip().splitlines()[0] if err is not None and str(err).strip() else "no answer"
        return BrowserCrashedError(
            f"Chromium failed during {what}: {detail} (the next reset starts a new browser)"
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, seconds: float | None = None) -> None:
        """Launch the browser (no-op when it already runs), within ``seconds`` (default
        :attr:`launch_timeout`); :attr:`last_launch_s` records how long it took."""
        if self.alive:
            return
        seconds = self.launch_timeout if seconds is None else seconds
        if self._handles.driver is not None and not self._handles.driver.healthy():
            self._handles.driver.kill()  # the shutdown then kills the browser, without asking it
        own = (os.getpid(), threading.get_ident())
        self.shutdown(keep_driver=self._handles.driver_key == own)  # a healthy driver is kept
        require_playwright()
        handles = self._handles
        tag = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        marker = f"{SESSION_ENV}={tag}"
        handles.needles = [marker]
        began = time.monotonic()
        try:
            with self.guard(f"the start of Chromium at {self.executable}", seconds):
                if handles.driver is None:  # started under the deadline: killed past it
                    handles.drivers_before = set(_driver_children())
                    try:
                        handles.driver = _acquire_driver()
                    except Exception as err:  # noqa: BLE001 - a driver killed while it started
                        if handles.failure is None:
                            raise
                        raise BrowserCrashedError(f"the Playwright driver did not start: {err}") from err
                    finally:
                        handles.drivers_before = None
                    handles.driver_key = own
                driver = handles.driver.playwright
                browser = driver.chromium.launch(
                    executable_path=self.executable,
                    args=launch_args(self.devtools),
                    env={**os.environ, SESSION_ENV: tag},
                    headless=True,
                    timeout=seconds * 1000,
                )
                handles.browser = browser
                handles.main_pid = _browser_pid(marker)
                handles.needles.extend(_profile_dirs(marker))
                self._context = browser.new_context(viewport=VIEWPORT)
                self._context.set_default_timeout(self.call_timeout * 1000)
                for script in (INIT_SCRIPT, SESSION_SCRIPT, PAGE_SCRIPT):  # the clock first
                    self._context.add_init_script(script)
                self._pages = [self._context.new_page() for _ in range(self.tabs)]
                for page in self._pages:
                    page.on("crash", handles.on_crash)
                self._cdp = [self._context.new_cdp_session(page) for page in self._pages]
                self._direct = self._connect_direct()
                self._minimize_windows()
                self._shown, self._front = set(), None
        except BrowserCrashedError:
            self.shutdown()
            raise
        self._active = None
        self._loading = {}
        self._broken = False
        self.launches += 1
        self.last_launch_s = time.monotonic() - began

    def _minimize_windows(self) -> None:
        """Minimize the (invisible) windows of the tabs: the browser then stops compositing
        their window frames, which it otherwise redraws on every navigation."""
        windows = set()
        for cdp in self._cdp:
            window = cdp.send("Browser.getWindowForTarget")["windowId"]
            if window not in windows:
                windows.add(window)
                bounds = {"windowState": "minimized"}
                cdp.send("Browser.setWindowBounds", {"windowId": window, "bounds": bounds})

    def _connect_direct(self) -> list[_DirectPage]:
        """A direct DevTools connection to every tab (see :class:`_DirectPage`), or none (then
        page scripts go through Playwright's DevTools sessions): when ``websocket-client`` is
        not installed or Chromium shows no DevTools port."""
        if self.devtools != "port":
            return []
        port = _devtools_port(self._handles.needles, 5.0)
        if port is not None:
            warnings.warn(
                f"Chromium's DevTools port 127.0.0.1:{port} is open (devtools='port'): any process "
                "of any user of this machine can connect to it, drive the browser, read what its "
                "pages show (the instructions, typed passwords) and read files this user can "
                "read through a file:// tab. On a shared machine use the default, devtools='pipe' "
                f"(unset {DEVTOOLS_ENV}).",
                DevToolsPortWarning,
                stacklevel=2,
            )
        if port is None or importlib.util.find_spec("websocket") is None:
            return []
        direct = []
        try:
            for cdp in self._cdp:
                target = cdp.send("Target.getTargetInfo")["targetInfo"]["targetId"]
                url = f"ws://127.0.0.1:{port}/devtools/page/{target}"
                timeout = self.call_timeout + 2 * DRIVER_GRACE_S + 5.0
                direct.append(_DirectPage(url, timeout, self._handles.on_crash))
        except (OSError, ValueError, KeyError, BrowserCrashedError) as err:
            for page in direct:
                page.close()
            log.debug("no direct DevTools connection (%s); page scripts go through Playwright", err)
            return []
        return direct

    def shutdown(self, keep_driver: bool = False) -> None:
        """Close the browser (if any) and make sure none of its processes survive (the driver
        is kept for the next start when ``keep_driver`` and it is healthy)."""
        for page in self._direct:
            page.close()
        self._direct = []
        self._context = None
        self._pages = []
        self._cdp = []
        self._active = None
        self._loading = {}
        self._handles.shutdown(keep_driver)
        self._broken = False

    def close(self) -> None:
        """Close for good: the browser, its processes, the watchdog and this session's share
        of the driver."""
        self.shutdown()
        self._handles.watchdog.stop()
        self._finalizer.detach()

    def mark_broken(self) -> None:
        """Make the next :meth:`load` start a new browser."""
        self._broken = True

    # -- pages --------------------------------------------------------------------------------

    def load(self, url: str, images: tuple[str, ...], script: str, arg: Any = None) -> tuple[Any, Any]:
        """A page showing a freshly loaded document of ``url`` (starting the browser if needed).

        ``images`` are decoded into the page's cache first (see
        :func:`~harness_gym.envs.browser.assets.image_paths`); then ``script`` (a JavaScript
        expression naming a function of the page, e.g. ``"__hgPage.start"``) runs with ``arg``,
        in the same round trip as the wait for the document. Returns the page and what
        ``script`` returned (:meth:`call` and :meth:`cdp` reach the page). The page is this
        session's active page until the next :meth:`load`, which loads another document in it;
        meanwhile the other tabs load ``url`` again, for the next episodes. The load runs under
        the ``call_timeout`` deadline; a start of the browser before it, under its own
        (:attr:`launch_timeout`).
        """
        if not self.alive:
            self.start()
        with self.guard(f"the load of {url}"):
            previous = self._active
            tab = next((t for t, u in self._loading.items() if u == url), None)
            if tab is None:
                idle = [t for t in range(self.tabs) if t not in self._loading and t != previous]
                # else the tab that has loaded longest (its document is of another task)
                tab = (idle or list(self._loading) or [previous or 0])[0]
            self._loading.pop(tab, None)
            # The previous episode's document hears ``url`` on the channel and loads it.
            handover = previous is not None and previous != tab
            payload = {"url": url, "images": list(images), "arg": arg, "timeout": self.call_timeout * 1000}
            payload["next"] = url if handover else None
            result = self._run_when_ready(tab, url, f"__hgSession.ready({json.dumps(payload)}, {script})")
            self._active = tab
            for other in range(self.tabs):
                if other != tab and other not in self._loading:
                    if other != previous:  # not told on the channel: a blank tab, say
                        target = json.dumps(url)
                        self._evaluate(other, f"window.__hgSession ? __hgSession.leave({target}) : void 0")
                    self._loading[other] = url
            return self._pages[tab], result

    def is_active(self, page: Any) -> bool:
        """Whether ``page`` is the page of the latest :meth:`load` of a live browser."""
        return self.alive and self._active is not None and self._pages[self._active] is page

    def call(self, page: Any, function: str, *args: Any) -> Any:
        """Call a function of a page of this session (a JavaScript expression, e.g.
        ``"__hgPage.click"``) with JSON arguments, in one round trip; its (JSON-like) value,
        awaited if it is a promise."""
        with self.guard(f"a call of {function}"):
            return self._evaluate(self._tab(page), f"{function}({', '.join(json.dumps(a) for a in args)})")

    def cdp(self, page: Any, method: str, params: dict[str, Any]) -> Any:
        """Send a Chrome DevTools Protocol command to a page of this session (raw input)."""
        with self.guard(method):
            return self._cdp[self._tab(page)].send(method, params)

    def keyboard(self, page: Any, method: str, *args: Any) -> None:
        """``page.keyboard.<method>(*args)`` (``type``, ``press``, ``insert_text``) under a deadline."""
        with self.guard(f"keyboard.{method}"):
            getattr(page.keyboard, method)(*args)

    def screenshot(self, page: Any, selector: str) -> bytes:
        """PNG bytes of the element ``selector`` of a page of this session (its bounding box,
        in CSS pixels), under a deadline.

        The box is read by one DevTools call, then ``Page.captureScreenshot`` captures it
        (over the session's own connection to the tab where there is one). Nothing in the
        page is changed for it: Playwright's ``page.screenshot`` hides the text caret by
        writing a ``style`` attribute on every text field (and leaves ``style=""`` behind);
        here no caret is ever drawn (the :mod:`virtual clock <harness_gym.envs.browser.clock>`'s
        style), and MiniWoB's START cover, hidden for the capture, gets its ``style`` back.

        The first capture shows the session's window (minimized at start) and brings the tab
        to the front: in a minimized window, or in a background tab, Chromium takes one to two
        seconds to produce the first frame of each new document (measured here; 50-100 ms
        otherwise).
        """
        import base64

        with self.guard("a screenshot"):
            tab = self._tab(page)
            if self._front != tab:
                self._show(tab)
            box = self._evaluate(tab, TASK_AREA_BOX.replace("__SELECTOR__", json.dumps(selector)))
            if box is None:
                raise BrowserCrashedError(f"the page has no element {selector!r} to capture")
            cover = box.pop("cover")
            clip = {**box, "scale": 1}
            params = {"format": "png", "clip": clip, "captureBeyondViewport": False}
            try:
                shot = self._send(tab, "Page.captureScreenshot", params)
            finally:
                if cover is not None:
                    self._evaluate(tab, UNHIDE_COVER.replace("__STYLE__", json.dumps(cover)))
            return base64.b64decode(shot["data"])

    def _show(self, tab: int) -> None:
        """Un-minimize the window of ``tab`` (once) and bring ``tab`` to the front."""
        cdp = self._cdp[tab]
        if tab not in self._shown:
            window = cdp.send("Browser.getWindowForTarget")["windowId"]
            cdp.send("Browser.setWindowBounds", {"windowId": window, "bounds": {"windowState": "normal"}})
            self._shown.add(tab)
        cdp.send("Page.bringToFront")
        self._front = tab

    def _tab(self, page: Any) -> int:
        """The tab showing ``page``."""
        if page not in self._pages:
            raise BrowserCrashedError("the page is gone (its browser was closed or restarted)")
        return self._pages.index(page)

    def _evaluate(self, tab: int, expression: str) -> Any:
        """Evaluate ``expression`` in the document of a tab, straight through the DevTools
        protocol: Playwright's ``evaluate`` would first install its own helper script in every
        new document (one more round trip and a large compile per episode). Over the direct
        connection to the tab when there is one, else through Playwright's DevTools session."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True, "userGesture": True}
        reply = self._send(tab, "Runtime.evaluate", params)
        details = reply.get("exceptionDetails")
        if details is not None:
            error = details.get("exception", {}).get("description") or details.get("text", "")
            raise BrowserCrashedError(f"a page script failed: {error}")
        return reply["result"].get("value")

    def _send(self, tab: int, method: str, params: dict[str, Any]) -> Any:
        """A DevTools command to a tab: over the direct connection when there is one, else
        through Playwright's DevTools session."""
        return (self._direct[tab] if self._direct else self._cdp[tab]).send(method, params)

    def _run_when_ready(self, tab: int, url: str, expression: str) -> Any:
        """Evaluate ``__hgSession.ready(...)`` (see :data:`SESSION_SCRIPT`) in a tab until it
        runs in a fresh document of ``url``, navigating the tab there when it shows another."""
        from playwright.sync_api import Error as PlaywrightError

        while True:  # the guard's deadline ends it
            try:
                result = self._evaluate(tab, f"window.__hgSession ? {expression} : {{__status: 'other'}}")
            except _ContextGoneError:
                continue  # the stale document went away under the call: the new one is there now
            except PlaywrightError as err:
                # The stale document went away under the call: the new one is there now.
                if not any(gone in str(err) for gone in _CONTEXT_GONE):
                    raise
                continue
            if not (isinstance(result, dict) and result.get("__status") == "other"):
                return result
            self._pages[tab].goto(url, wait_until="commit")


# The public names of this module before its parts moved out; all but BrowserSession,
# CALL_TIMEOUT_S and LAUNCH_TIMEOUT_S are defined in (and imported from) those parts.
__all__ = [
    "CALL_TIMEOUT_S",
    "DRIVER_GRACE_S",
    "LAUNCH_TIMEOUT_S",
    "BrowserCrashedError",
    "BrowserSession",
    "BrowserTimeoutError",
    "BrowserUnavailableError",
    "DEVTOOLS_ENV",
    "DEVTOOLS_MODES",
    "DevToolsPortWarning",
    "INSTALL_CHROMIUM",
    "INSTALL_EXTRA",
    "check_requirements",
    "find_chromium",
    "processes_matching",
]
