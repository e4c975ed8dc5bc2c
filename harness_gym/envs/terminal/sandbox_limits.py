"""The limits of a sandbox and what a command ran into.

:class:`SandboxLimits` holds every limit (timeout, CPU seconds, address space, processes,
file size, ``/tmp`` and ``/dev/shm`` sizes, disk quota and entry count, output caps, the
whole sandbox's memory); :class:`CommandResult` records which of them a command ran into
(:attr:`CommandResult.contained`). The per-command limits are resource limits
(:func:`set_rlimits` here for the verifier; the runner sets the agent's), the memory cap a
:class:`MemoryCgroup`; the disk quota is enforced while a command runs (by the runner for the
agent, by :class:`~harness_gym.envs.terminal.sandbox_verifier.DiskWatch` for a verifier).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from harness_gym.envs.terminal.sandbox_view import APP


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of every command (and the caps on what is kept of its output)."""

    timeout: float = 10.0
    cpu_seconds: int = 10
    address_space: int = 1 << 30
    processes: int = 64
    file_size: int = 32 << 20
    tmp_size: int = 64 << 20
    disk_quota: int = 128 << 20
    head_bytes: int = 16384
    tail_bytes: int = 16384
    max_file_bytes: int = 65536
    #: Files, directories and links under /app and $HOME together.
    max_files: int = 50_000
    #: Size of the sandbox's /dev/shm (tmpfs).
    shm_size: int = 16 << 20
    #: Memory of the whole sandbox (a memory cgroup where one can be made; see memory_cgroup).
    memory: int = 2 << 30


@dataclass
class CommandResult:
    """What one command did. ``stdout``/``stderr`` are head + tail with ``omitted`` bytes cut."""

    command: str
    stdout: str
    stderr: str
    exit_code: int | None
    cwd: str = APP
    stdout_omitted: int = 0
    stderr_omitted: int = 0
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    binary: bool = False
    timed_out: bool = False
    signal: str | None = None
    shell_restarted: bool = False
    sandbox_restarted: bool = False
    killed_processes: int = 0
    quota_removed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: ``"disk_quota"`` / ``"file_count_limit"``: the rule the episode's files broke (the
    #: command was killed when it broke it while running; the excess was removed).
    disk_rule: str | None = None
    #: A file reached the file-size limit (its writer got SIGXFSZ), even inside a pipeline.
    file_size_limit: bool = False
    #: Lines on the control channel that were not the runner's reply (forged; ignored).
    forged_replies: int = 0
    #: The sandbox's memory cgroup killed a process (the whole sandbox's memory cap).
    memory_limit: bool = False
    #: A verifier's command ran under the supervisor, which reported how it ended.
    supervised: bool = False
    #: What a verifier's command did that its result cannot be trusted after (it was killed
    #: by a signal, processes it started outlived it, the supervisor was killed).
    tampering: list[str] = field(default_factory=list)

    @property
    def contained(self) -> list[str]:
        """Names of the containment rules this command ran into (for ``info``)."""
        out = []
        if self.timed_out:
            out.append("timeout")
        if self.signal == "SIGXCPU":
            out.append("cpu_limit")
        if self.signal == "SIGXFSZ" or self.file_size_limit:
            out.append("file_size_limit")
        if self.stdout_omitted or self.stderr_omitted:
            out.append("output_capped")
        if self.killed_processes:
            out.append("processes_killed")
        if self.disk_rule == "file_count_limit":
            out.append("file_count_limit")
        elif self.quota_removed or self.disk_rule:
            out.append("disk_quota")
        if self.memory_limit:
            out.append("memory_limit")
        if self.forged_replies:
            out.append("forged_replies_ignored")
        if self.tampering:
            out.append("verifier_tampering")
        if self.shell_restarted:
            out.append("shell_restarted")
        if self.sandbox_restarted:
            out.append("sandbox_restarted")
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class MemoryCgroup:
    """A memory cgroup that caps the whole sandbox (every process together), where one can
    be made: a writable cgroup v1 memory hierarchy (root), or a delegated cgroup v2 subtree
    with the memory controller enabled. :meth:`make` returns ``None`` elsewhere (then only
    the per-process address-space limit holds)."""

    _counter = 0

    def __init__(self, path: str, version: int) -> None:
        self.path, self.version = path, version

    @classmethod
    def make(cls, limit: int) -> MemoryCgroup | None:
        for base, version in _memory_cgroup_parents():
            MemoryCgroup._counter += 1
            path = os.path.join(base, f"hg-sandbox-{os.getpid()}-{MemoryCgroup._counter}")
            try:
                os.mkdir(path)
            except OSError:
                continue
            box = cls(path, version)
            try:
                if version == 1:
                    box._write("memory.limit_in_bytes", limit)
                    if os.path.exists(os.path.join(path, "memory.memsw.limit_in_bytes")):
                        box._write("memory.memsw.limit_in_bytes", limit)
                else:
                    box._write("memory.max", limit)
                    if os.path.exists(os.path.join(path, "memory.swap.max")):
                        box._write("memory.swap.max", 0)
            except OSError:
                box.remove()
                continue
            return box
        return None

    def _write(self, name: str, value: int) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(str(value))

    def add(self, pids: list[int]) -> None:
        for pid in pids:
            try:
                self._write("cgroup.procs", pid)
            except OSError:
                pass

    def oom_kills(self) -> int:
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            with open(os.path.join(self.path, name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)


def _memory_cgroup_parents() -> list[tuple[str, int]]:
    """Writable cgroups this process is in that can hold a memory-limited child."""
    out = []
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            base = os.path.join("/sys/fs/cgroup/memory", path.lstrip("/"))
            if os.access(base, os.W_OK):
                out.append((base, 1))
        elif controllers == "":
            base = os.path.join("/sys/fs/cgroup", path.lstrip("/"))
            try:
                with open(os.path.join(base, "cgroup.subtree_control")) as f:
                    enabled = "memory" in f.read().split()
            except OSError:
                enabled = False
            if enabled and os.access(base, os.W_OK):
                out.append((base, 2))
    return out


def set_rlimits(limits: dict[str, int]) -> None:
    """In the child before exec: lower each limit (never above the hard limit it has)."""
    for name, value in limits.items():
        which = getattr(resource, name)
        hard = resource.getrlimit(which)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def head_tail(f: Any, head: int, tail: int) -> tuple[bytes, int]:
    """The first ``head`` and last ``tail`` bytes of a file written by a child, and its size."""
    total = f.seek(0, os.SEEK_END)
    f.seek(0)
    if total <= head + tail:
        return f.read(), total
    first = f.read(head)
    f.seek(total - tail)
    return first + f.read(tail), total
