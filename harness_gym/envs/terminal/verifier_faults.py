"""Faults injected into a terminal task's verifier, for ``harness-gym validate``.

A reward can be trusted only if a verifier that did not finish never reports a pass: a
verifier that reads "no failure printed" or "exit code not 1" as success pays when it is
timed out or killed. :func:`recording` measures how long each verifier run of an instance
takes; :func:`injecting` then makes every verifier run of the episode fail half-way
through it: ``"timeout"`` gives it half its measured time as its limit, ``"killed"`` has the host send
``SIGKILL`` to the verifier's sandbox (the process group of the ``bwrap`` the run started,
as an out-of-memory killer or a lost machine would) at that point. Whether the fault
landed (the run timed out, or ended by ``SIGKILL``) is recorded: a verdict is evidence only
when it did.

Both patch the episode's execution backend (its ``run_verifier``) for the ``with`` block
only; nothing of the task's own code changes.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from harness_gym.envs.terminal.task import TerminalTask

#: The faults validate injects.
FAULTS: dict[str, str] = {
    "timeout": "the verifier's time limit runs out half-way through its run",
    "killed": "every process of the verifier is killed (SIGKILL) half-way through its run",
}
#: The shortest time a fault waits (a verifier sandbox takes longer than this to start).
MIN_DELAY = 0.02


@dataclass
class VerifierCalls:
    """What the verifier runs of one ``with`` block did: seconds each, and faults landed."""

    seconds: list[float] = field(default_factory=list)
    landed: list[bool] = field(default_factory=list)

    @property
    def any_landed(self) -> bool:
        return any(self.landed)


def _backend(task: TerminalTask) -> Any:
    sandbox = task._sandbox  # noqa: SLF001 - same package: the episode's backend
    if sandbox is None:
        raise RuntimeError("reset() the task before injecting faults into its verifier")
    return sandbox


@contextmanager
def recording(task: TerminalTask) -> Iterator[VerifierCalls]:
    """Record the duration of every verifier run within the block."""
    sandbox = _backend(task)
    original = sandbox.run_verifier
    calls = VerifierCalls()

    def run_verifier(command: str, *args: Any, **kwargs: Any) -> Any:
        res = original(command, *args, **kwargs)
        calls.seconds.append(float(res.seconds))
        calls.landed.append(False)
        return res

    sandbox.run_verifier = run_verifier
    try:
        yield calls
    finally:
        del sandbox.run_verifier  # the class's method again


@contextmanager
def injecting(task: TerminalTask, fault: str, seconds: list[float]) -> Iterator[VerifierCalls]:
    """Make the verifier runs within the block fail with ``fault`` (of :data:`FAULTS`) at half
    the duration that :func:`recording` measured for the same run (the i-th run, or the last
    one measured)."""
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; faults: {sorted(FAULTS)}")
    sandbox = _backend(task)
    original = sandbox.run_verifier
    calls = VerifierCalls()

    def run_verifier(command: str, timeout: float | None = None, **kwargs: Any) -> Any:
        i = len(calls.seconds)
        measured = seconds[min(i, len(seconds) - 1)] if seconds else 0.0
        delay = max(MIN_DELAY, measured / 2)
        if fault == "timeout":
            res = original(command, timeout=delay, **kwargs)
            landed = bool(res.timed_out)
        else:
            before = _children()
            done = threading.Event()
            killer = threading.Thread(target=_kill_new_children, args=(before, delay, done), daemon=True)
            killer.start()
            try:
                res = original(command, timeout=timeout, **kwargs)
            finally:
                done.set()
                killer.join()
            landed = res.exit_code in (137, -9) or res.signal == "SIGKILL"
        calls.seconds.append(float(res.seconds))
        calls.landed.append(landed)
        return res

    sandbox.run_verifier = run_verifier
    try:
        yield calls
    finally:
        del sandbox.run_verifier


def _children() -> set[int]:
    """The process ids whose parent is this process."""
    me, out = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 1 and int(fields[1]) == me:
                out.add(int(entry))
    return out


def _kill_new_children(before: set[int], delay: float, done: threading.Event) -> None:
    """After ``delay`` seconds (unless ``done`` first), kill the process group of every child
    process started since ``before`` was taken: the verifier's sandbox."""
    if done.wait(delay):
        return
    for pid in _children() - before:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
