"""Process control of a sandbox from the host: killing it, finding its processes.

A sandbox's processes live in their own PID namespace, which dies with bwrap
(:func:`kill_bwrap`); :func:`child_pids`, :func:`descendant_pids` and :func:`is_running`
read ``/proc`` to wait for them or move them into a memory cgroup, and :func:`process_tag`
names a process even after its pid is reused (an episode directory's owner).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from harness_gym.envs.terminal.sandbox_limits import MemoryCgroup


def descendant_pids(pid: int) -> list[int]:
    found, stack = [], [pid]
    while stack:
        top = stack.pop()
        found.append(top)
        stack.extend(child_pids(top))
    return found


def owner_uid(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None


def kill_bwrap(holder: list[Any]) -> None:
    """Kill bwrap (``holder[0]``; its PID namespace dies with it), then close the channel's
    file descriptors and remove the memory cgroup that follow it in ``holder``."""
    proc = holder[0]
    if proc is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.kill()
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    for extra in holder[1:]:
        if isinstance(extra, MemoryCgroup):
            extra.remove()
        elif isinstance(extra, int) and extra >= 0:
            try:
                os.close(extra)
            except OSError:
                pass


def signal_name(code: int | None) -> str | None:
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return str(-code)


def child_pids(pid: int) -> list[int]:
    """The child processes of ``pid`` (from /proc; scanning it where ``children`` is missing)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        pass
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rpartition(")")[2].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def is_running(pid: int) -> bool:
    """Whether ``pid`` exists and is not yet a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def process_tag(pid: int) -> str | None:
    """``"<pid> <start time>"``: names a process even after its pid is reused."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f"{pid} {f.read().rpartition(')')[2].split()[19]}"
    except (OSError, IndexError):
        return None
