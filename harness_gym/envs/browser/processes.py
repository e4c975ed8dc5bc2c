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


def _bit(sig: signal.Signals) -> int:
    return 1 << (sig - 1)


def process_state(pid: int) -> tuple[str, int]:
    """``pid``'s state letter (``""`` when gone) and the mask of signals pending for it.

    A signal sent is acted on only when the process next runs: on a loaded machine a process
    sent SIGKILL or SIGSTOP may stay runnable for a while, and only the pending mask tells."""
    state, pending = "", 0
    for line in _read(pid, "status").splitlines():
        key, _, value = line.partition(":")
        if key == "State":
            state = value.strip()[:1]
        elif key in ("SigPnd", "ShdPnd"):
            pending |= int(value.strip() or "0", 16)
    return state, pending


def _is_dying(pid: int) -> bool:
    """Whether ``pid`` is gone, a zombie, or already sent SIGKILL (which cannot be caught).

    Seen: Chromium renderers still runnable after a kill, their SIGKILL pending; counting them
    as alive made a cleanup look like a leak."""
    state, pending = process_state(pid)
    return state in ("", "Z", "X", "x") or bool(pending & _bit(signal.SIGKILL))


def is_stopped_or_dying(pid: int) -> bool:
    """Whether ``pid`` is gone, dying, stopped, or sent SIGSTOP (which cannot be caught) and
    not yet stopped: a process that will not answer."""
    state, pending = process_state(pid)
    halting = _bit(signal.SIGKILL) | _bit(signal.SIGSTOP)
    return state in ("", "Z", "X", "x", "T", "t") or bool(pending & halting)


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
