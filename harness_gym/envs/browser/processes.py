"""Process discovery and killing under ``/proc``: the browser's processes, its profile dir, the driver's.

A session tags every process of its browser (an environment variable that the browser and
its crash handler inherit, and the private profile directory ``--user-data-dir=`` that every
child names on its command line); :func:`processes_matching` finds them by those needles, so a
close, a deadline or a finalizer can kill what is left (:func:`_kill_all`) without a handle on
each process. Linux only; elsewhere nothing is found.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


def _read(pid: int, name: str) -> str:
    try:
        raw = Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", "replace")


def _cmdline(pid: int) -> str:
    return _read(pid, "cmdline")


_SIGKILL_BIT = 1 << (signal.SIGKILL - 1)


def _is_dying(pid: int) -> bool:
    """Whether ``pid`` is gone, a zombie, or already sent SIGKILL.

    A process that was sent SIGKILL cannot run again, but on a loaded machine it may wait
    a while for a CPU before it exits (seen: Chromium renderers still runnable after a kill,
    their SIGKILL pending); counting it as alive made a cleanup look like a leak."""
    status = _read(pid, "status")
    if not status:
        return True
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key == "State" and value.strip()[:1] in ("Z", "X"):
            return True
        if key in ("SigPnd", "ShdPnd") and int(value.strip() or "0", 16) & _SIGKILL_BIT:
            return True
    return False


def processes_matching(needle: str) -> list[int]:
    """Live processes (not zombies, not already killed) whose command line or environment
    contains ``needle``.

    Linux only (``/proc``); elsewhere the list is empty.
    """
    if not needle or not os.path.isdir("/proc"):
        return []
    own = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == own:
            continue
        pid = int(entry)
        if (needle in _cmdline(pid) or needle in _read(pid, "environ")) and not _is_dying(pid):
            pids.append(pid)
    return sorted(pids)


def _profile_dirs(marker: str) -> list[str]:
    """The ``--user-data-dir=...`` argument of the browser process whose environment has ``marker``."""
    for pid in processes_matching(marker):
        for arg in _cmdline(pid).split(" "):
            if arg.startswith("--user-data-dir="):
                return [arg]
    return []


def _kill_all(needle: str) -> None:
    for pid in processes_matching(needle):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _browser_pid(marker: str) -> int | None:
    """The browser process (not a renderer, zygote or helper) whose environment has ``marker``."""
    for pid in processes_matching(marker):
        command = _cmdline(pid)  # a zygote's children rewrite theirs as one space-separated string
        if "--type=" not in command and "crashpad" not in command.split(" ")[0]:
            return pid
    return None


def _driver_children() -> list[int]:
    """Child processes of this one that run a Playwright driver (``run-driver``)."""
    if not os.path.isdir("/proc"):
        return []
    own, out = str(os.getpid()), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if stat[stat.rfind(")") + 2 :].split(" ")[1] == own and "run-driver" in _cmdline(int(entry)):
                out.append(int(entry))
    return out
