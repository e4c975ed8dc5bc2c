"""Deadlines: the watchdog thread, and the handles through which it kills a session's browser.

Every call into the browser runs under a deadline; when one passes, :class:`_Watchdog` (a
daemon thread) calls :meth:`_Handles.on_timeout`, which kills the browser so that the blocked
call fails, and the Playwright driver too if the call is still blocked
:data:`DRIVER_GRACE_S` later. :class:`_Handles` holds what that kill, a session's close and
its finalizer need (browser, driver, process needles) with no reference to the session, so a
session that is garbage-collected unclosed is still cleaned up (by PID: :meth:`_Handles.finalize`
makes no Playwright call, as a finalizer may run inside Playwright's event loop).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from harness_gym.envs.browser.driver import _Driver, _release_driver
from harness_gym.envs.browser.processes import _driver_children, _kill_all, processes_matching

#: How long a call may stay blocked after the watchdog killed its browser before the
#: Playwright driver (a Node process that may itself be frozen) is killed too (seconds).
DRIVER_GRACE_S = 1.0
#: Longest wait for a browser that answers to close before it is killed (seconds).
CLOSE_TIMEOUT_S = 5.0


class _Watchdog:
    """A daemon thread that calls ``expire()`` when an armed deadline passes.

    Arming and disarming cost a lock and two assignments (no thread wake-up per call): the
    thread sleeps until the earliest deadline it knows of and re-reads the current one then.
    """

    def __init__(self, expire: Callable[[], None]) -> None:
        self._expire = expire
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._sleeping_until: float | None = None  # None: idle, waiting for an arm
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="harness-gym-browser-watchdog", daemon=True)
        self._thread.start()

    def arm(self, seconds: float) -> None:
        with self._cond:
            self._deadline = time.monotonic() + seconds
            if self._sleeping_until is None or self._sleeping_until > self._deadline:
                self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._deadline = None

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                deadline = self._deadline
                if deadline is None:
                    self._sleeping_until = None
                    self._cond.wait()
                    continue
                left = deadline - time.monotonic()
                if left > 0:
                    self._sleeping_until = deadline
                    self._cond.wait(left)
                    continue
                self._deadline = None
                self._cond.release()
                try:
                    self._expire()
                except Exception:  # noqa: BLE001 - the watchdog must outlive a failed kill
                    pass
                finally:
                    self._cond.acquire()


class _Handles:
    """What a finalizer needs to clean up after a session (no reference to the session)."""

    def __init__(self) -> None:
        self.browser: Any = None
        self.driver: _Driver | None = None
        self.driver_key: tuple[int, int] | None = None
        #: Strings found only in this browser's processes: an environment variable that the
        #: browser (and its crash handler) inherit, and the private profile directory that
        #: every child process names on its command line.
        self.needles: list[str] = []
        #: The browser process, killed first (its pipe closing fails every pending call).
        self.main_pid: int | None = None
        #: Why the browser was killed during a call: "timeout" (watchdog) or "crash" (a page's
        #: ``crash`` event); None while it is fine.
        self.failure: str | None = None
        #: Whether the watchdog killed the Playwright driver (it did not answer either).
        self.driver_killed = False
        #: While a driver starts (under the launch deadline): the driver processes this process
        #: had before, so that a kill past the deadline kills the new one too.
        self.drivers_before: set[int] | None = None
        self.watchdog = _Watchdog(self.on_timeout)

    def on_timeout(self) -> None:
        """The deadline passed: kill the browser; if the call is still blocked
        :data:`DRIVER_GRACE_S` later (a frozen Playwright driver does not pass on the
        browser's death), kill the driver too."""
        if self.failure is None:
            self.fail("timeout")
            self.watchdog.arm(DRIVER_GRACE_S)
            return
        self.driver_killed = True
        if self.driver is not None:
            self.driver.kill()

    def on_crash(self, *_: Any) -> None:
        self.fail("crash")

    def fail(self, why: str) -> None:
        """Kill the browser, so that a call waiting for it fails at once."""
        if self.failure is None:
            self.failure = why
        self.kill()

    def kill(self) -> None:
        if self.main_pid is not None:
            try:
                os.kill(self.main_pid, signal.SIGKILL)
            except OSError:
                pass
        for needle in self.needles:
            _kill_all(needle)
        if self.drivers_before is not None:  # a driver that is still starting
            for pid in set(_driver_children()) - self.drivers_before:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def shutdown(self, keep_driver: bool = False) -> None:
        """Close the browser and kill what is left of it; release this session's share of the
        driver, unless ``keep_driver`` and it is healthy (a restart then needs no new one)."""
        browser, self.browser = self.browser, None
        if self.failure is not None:
            self.kill()  # a dead or frozen browser: Playwright's close would wait for it
        live_driver = self.driver is not None and not self.driver.dead
        if browser is not None and live_driver and self.driver_key == (os.getpid(), threading.get_ident()):
            self.watchdog.arm(CLOSE_TIMEOUT_S)
            try:
                browser.close()
            except Exception:  # noqa: BLE001 - closing a crashed browser may fail
                pass
            finally:
                self.watchdog.disarm()
        deadline = time.monotonic() + 2.0
        while self.needles and time.monotonic() < deadline:
            left = [pid for needle in self.needles for pid in processes_matching(needle)]
            if not left:
                break
            for needle in self.needles:
                _kill_all(needle)
            time.sleep(0.01)
        self.main_pid = None
        self.failure = None
        self.driver_killed = False
        if keep_driver and self.driver is not None and self.driver.healthy():
            return
        key, self.driver_key = self.driver_key, None
        driver, self.driver = self.driver, None
        if key is not None and driver is not None:
            _release_driver(driver, key)

    def close(self) -> None:
        self.shutdown()
        self.watchdog.stop()

    def finalize(self) -> None:
        """Clean up after a session garbage-collected unclosed, without calling Playwright.

        A finalizer runs wherever the collector happens to run, Playwright's own event loop
        included (an allocation while it serializes a message), and a synchronous Playwright
        call made there never returns: a sweep that dropped a browser env hung for good. So the
        browser is killed by PID and by its needles, and this session's share of the driver is
        released; a driver nobody else uses is killed, not stopped."""
        self.browser = None
        self.kill()
        self.main_pid = None
        self.watchdog.stop()
        key, self.driver_key = self.driver_key, None
        driver, self.driver = self.driver, None
        if key is not None and driver is not None:
            _release_driver(driver, key, stop=False)
