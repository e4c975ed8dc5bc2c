"""The Playwright driver (a Node process between Python and Chromium), shared per (process, thread).

Playwright's sync API runs one driver per ``sync_playwright()``; every session of one thread
of one process shares one (:func:`_acquire_driver`, :func:`_release_driver`), stopped with the
last of them. :class:`_Driver` knows the Node process's PID, so that the watchdog can kill a
driver that does not answer (frozen, say) and the next start runs a new one.
"""

from __future__ import annotations

import os
import signal
import threading

from harness_gym.envs.browser.processes import _driver_children, is_stopped_or_dying


class _Driver:
    """One Playwright driver (a Node process) and how many sessions use it."""

    def __init__(self) -> None:
        from playwright.sync_api import sync_playwright

        manager = sync_playwright()
        before = set(_driver_children())
        self.playwright = manager.start()
        self.users = 0
        self.dead = False
        transport = getattr(getattr(manager, "_client", None), "_transport", None)
        proc = getattr(transport, "_proc", None)
        found = sorted(set(_driver_children()) - before)
        #: The Node process, which the watchdog kills when it does not answer.
        self.pid: int | None = getattr(proc, "pid", None) or (found[0] if found else None)

    def healthy(self) -> bool:
        """Whether the Node process is alive and running: not killed, exited or stopped
        (``SIGSTOP``). Read from ``/proc``, no round trip; True where there is no ``/proc``."""
        if self.dead:
            return False
        if self.pid is None or not os.path.isdir("/proc"):
            return True
        return not is_stopped_or_dying(self.pid)

    def kill(self) -> None:
        """Kill the Node process: every call waiting on it fails at once."""
        self.dead = True
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def stop(self) -> None:
        try:
            self.playwright.stop()
        except Exception:  # noqa: BLE001 - a dead driver is already stopped
            pass


_drivers: dict[tuple[int, int], _Driver] = {}
#: Reentrant: a finalizer that releases a driver may run while this thread holds it (the
#: collector runs on any allocation, e.g. while :func:`_acquire_driver` starts a driver).
_drivers_lock = threading.RLock()


def _acquire_driver() -> _Driver:
    """The driver of this (process, thread), started (again, if the last one was killed)."""
    key = (os.getpid(), threading.get_ident())
    with _drivers_lock:
        driver = _drivers.get(key)
        if driver is not None and not driver.dead and not driver.healthy():
            driver.kill()  # killed or stopped from outside: replaced
        if driver is None or driver.dead:
            driver = _drivers[key] = _Driver()
        driver.users += 1
        return driver


def _release_driver(driver: _Driver, key: tuple[int, int], stop: bool = True) -> None:
    """Give back one session's share; the last one stops the driver (``stop``) or, from a
    finalizer (which must not call Playwright), kills its Node process."""
    with _drivers_lock:
        driver.users -= 1
        if driver.users > 0:
            return
        if _drivers.get(key) is driver:
            del _drivers[key]
    if not stop:
        driver.kill()
    elif key == (os.getpid(), threading.get_ident()):
        driver.stop()
