"""A bubblewrap sandbox for one episode of a terminal task.

Each episode gets a fresh directory on the host, ``<root>/app`` (the working directory the
agent sees as ``/app``) and ``<root>/home`` (``$HOME``, seen as ``/home/agent``). Commands
run inside ``bwrap`` with:

* no network (``--unshare-net``: only a private loopback; the host's loopback is unreachable),
  their own user, PID, IPC, UTS and cgroup namespaces (``--unshare-all``), and no nested user
  namespace (``--disable-userns``);
* ``--die-with-parent`` and ``--new-session``; the sandbox runs as an unprivileged user with
  every capability dropped (as root on the host, under a dedicated host uid);
* the system (``/usr``, ``/etc``) read-only, with neutral user, group and host names; ``/dev``
  read-only; only the episode directory and private, size-limited ``/tmp`` and ``/dev/shm``
  writable; ``/root``, ``/home``, the checkout and the rest of the host invisible;
* nothing of the host's environment (bwrap itself starts with :data:`BWRAP_ENV`; ``--clearenv``);
* per command: a wall-clock timeout (the command's whole session, and every other process of
  the sandbox, is killed), CPU seconds, address space, number of processes and file size
  limits; output capped while it is read (head and tail kept, the rest counted);
* the whole sandbox's memory in a memory cgroup where one can be made (:class:`MemoryCgroup`);
* a disk quota and an entry limit on ``/app`` and ``$HOME``, enforced by the runner while the
  command runs (a command that breaks one is killed and the excess removed).

One small runner process (:mod:`harness_gym.envs.terminal.runner`, on the system
``python3``) is the sandbox's PID 1 for the episode and starts every command, so the
per-command cost is one fork and exec, not a new sandbox. Its code comes in through a file
descriptor (the checkout's path and permissions never matter); requests and replies travel
over two private pipes, every line bound to its request by a per-episode HMAC, so nothing the
agent writes is taken for a reply. Nothing ever runs unsandboxed: where bubblewrap cannot
run, :func:`require_bwrap` raises :class:`SandboxUnavailable` saying how to install it.
See "Threat model" in docs/terminal.md.
"""

from __future__ import annotations

import atexit
import hashlib
import hmac
import json
import os
import re
import resource
import secrets
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RUNNER = Path(__file__).with_name("runner.py")
#: Where the runner appears inside the sandbox (its code is copied in from a file descriptor,
#: so the checkout's path and permissions never matter).
RUNNER_IN_SANDBOX = "/opt/harness-gym/runner.py"
#: Sourced by every command's bash before it reads the command (``BASH_ENV``), so the command's
#: CPU limit holds from its first instruction (the runner also sets it with ``prlimit`` at once,
#: failing closed; alone that raced a command that forks or reads its limits straight away).
LIMITS_IN_SANDBOX = "/opt/harness-gym/command-limits.sh"
#: Where the episode directory and home appear inside the sandbox.
APP = "/app"
#: Variables of the agent's environment that a task's own (``Sandbox(env=...)``) never replaces.
FIXED_AGENT_ENV = ("HOME", "USER", "LOGNAME", "BASH_ENV")
HOME = "/home/agent"
SYSTEM_PYTHON = "/usr/bin/python3"
#: Host uids used for sandboxes when harness-gym runs as root (one per host process, 4000 of
#: them): above systemd-nspawn's container range (524288-1879048191) and its DynamicUser range
#: (61184-65519), below systemd's foreign range (from 2147352576) and the signed 32-bit limit.
SANDBOX_UID_BASE = 0x70000000
SANDBOX_UIDS = 4000
#: The whole environment bwrap itself is started with (the sandbox sets its own).
BWRAP_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
#: What replaces the host's user and host names inside the sandbox (``/etc`` is read-only).
NEUTRAL_ETC = {
    "passwd": (
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        "agent:x:1000:1000:agent:/home/agent:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    ),
    "group": "root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n",
    "hostname": "sandbox\n",
    "hosts": "127.0.0.1 localhost\n127.0.1.1 sandbox\n::1 localhost\n",
    "mailname": "sandbox\n",
    "machine-id": "0" * 31 + "1\n",
    "subuid": "",
    "subgid": "",
    "resolv.conf": "",
}
INSTALL_HINT = (
    "Terminal tasks run every command in a bubblewrap sandbox. Install it with "
    "`apt-get install bubblewrap` (Debian/Ubuntu; or run scripts/system-deps.sh), or your "
    "distribution's `bubblewrap` package. Nothing runs unsandboxed."
)


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces on this machine."""


class SandboxError(RuntimeError):
    """The sandbox stopped answering (it is restarted on the next command)."""


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


_checked: dict[str, str | None] = {}
_check_lock = threading.Lock()


def sandbox_uid() -> int | None:
    """The host uid sandboxes run as: a dedicated one under root, else the caller's own."""
    if os.geteuid() != 0:
        return None
    return SANDBOX_UID_BASE + os.getpid() % SANDBOX_UIDS


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot run here (``None`` when it can). Cached per process."""
    with _check_lock:
        if "bwrap" in _checked:
            return _checked["bwrap"]
        problem: str | None = None
        if shutil.which("bwrap") is None:
            problem = "the `bwrap` command is not installed"
        elif not os.path.exists(SYSTEM_PYTHON):
            problem = f"{SYSTEM_PYTHON} (the system Python the sandbox runs commands with) is missing"
        else:
            uid = sandbox_uid()
            try:
                done = subprocess.run(
                    [*_bwrap_base(uid), "--", "/bin/true"],
                    capture_output=True,
                    timeout=30,
                    env=BWRAP_ENV,
                    cwd="/",
                    **_as_user(uid),
                )
                if done.returncode != 0:
                    problem = (
                        "bwrap cannot create its namespaces: " + done.stderr.decode(errors="replace").strip()
                    )
            except (OSError, subprocess.SubprocessError) as err:
                problem = f"bwrap failed to start: {err}"
        _checked["bwrap"] = problem
        return problem


def require_bwrap() -> None:
    """Raise :class:`SandboxUnavailable` with install instructions when bwrap cannot run."""
    problem = bwrap_problem()
    if problem is not None:
        raise SandboxUnavailable(f"{problem}. {INSTALL_HINT}")


def _as_user(uid: int | None) -> dict[str, Any]:
    if uid is None:
        return {}
    return {"user": uid, "group": uid, "extra_groups": []}


def _bwrap_base(
    uid: int | None, tmp_size: int = 64 << 20, *, shm_size: int = 16 << 20, rootfs: Path | None = None
) -> list[str]:
    """bwrap's arguments for a sandbox of the system alone (no episode directory yet).

    Start bwrap with ``env=BWRAP_ENV`` (or none) and ``cwd="/"``: without ``--as-pid-1``
    its init is the sandbox's ``/proc/1``, whose environment the sandbox can read. Inside: no
    user namespaces can be made (bubblewrap >= 0.8), ``/dev`` is read-only (its ``/dev/shm``
    and ``/tmp`` are size-limited tmpfs), and ``/etc``'s user, group and host names are
    neutral ones. The system is the host's ``/usr`` and ``/etc``, or with ``rootfs`` that
    file system's top-level folders (read-only; nothing of the host's system). A one-shot
    sandbox appends its binds, then ``--`` and a command."""
    del uid  # the same arguments under every uid; kept for callers
    args = ["bwrap", "--unshare-all", "--unshare-user"]
    if bwrap_supports("--disable-userns"):  # bubblewrap >= 0.8
        args.append("--disable-userns")
    args += [
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--hostname",
        "sandbox",
    ]
    args += _system_binds(rootfs)
    etc = neutral_etc_dir()
    for name in sorted(NEUTRAL_ETC):
        host = os.path.join(str(rootfs) if rootfs is not None else "/", "etc", name)
        if os.path.isfile(host) and not os.path.islink(host):
            args += ["--ro-bind", os.path.join(etc, name), os.path.join("/etc", name)]
    args += [
        "--dev",
        "/dev",
        "--size",
        str(shm_size),
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--proc",
        "/proc",
        "--size",
        str(tmp_size),
        "--tmpfs",
        "/tmp",
    ]
    return args


#: Top-level folders of a root file system the sandbox never takes from it (its own ones).
ROOTFS_SKIPPED = frozenset({"dev", "proc", "sys", "tmp", "run", "app"})
#: What a root file system must hold for the sandbox (its runner and shell, the mount points).
ROOTFS_REQUIRED = (
    SYSTEM_PYTHON.lstrip("/"),
    "bin/bash",
    "home/agent",
    RUNNER_IN_SANDBOX.lstrip("/"),
    LIMITS_IN_SANDBOX.lstrip("/"),
)


def _system_binds(rootfs: Path | None) -> list[str]:
    """Read-only binds of the system: the host's ``/usr``, its ``/bin``, ``/lib*``, ``/sbin``
    links and ``/etc``; or every top-level entry of ``rootfs`` but :data:`ROOTFS_SKIPPED`."""
    if rootfs is None:
        args = ["--ro-bind", "/usr", "/usr"]
        for name in ("bin", "lib", "lib64", "sbin", "lib32", "libx32"):
            target = os.path.join("/", name)
            if os.path.islink(target):
                args += ["--symlink", os.readlink(target), target]
            elif os.path.isdir(target):
                args += ["--ro-bind", target, target]
        return args + ["--ro-bind", "/etc", "/etc"]
    args = []
    with os.scandir(rootfs) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name in ROOTFS_SKIPPED:
                continue
            target = "/" + entry.name
            if entry.is_symlink():
                # relative: bwrap resolves its mount targets through these links from outside
                # the new root, where an absolute target would name the wrong folder
                link = os.readlink(entry.path)
                args += ["--symlink", (link.lstrip("/") or ".") if link.startswith("/") else link, target]
            elif entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False):
                args += ["--ro-bind", entry.path, target]
    return args


def _exists_within(root: Path, rel: str) -> bool:
    """Whether ``/rel`` exists in the file system rooted at ``root``, symlinks resolved as
    they resolve inside it (an absolute link target starts again at ``root``, never on the
    host)."""
    todo = [p for p in rel.split("/") if p]
    current, hops = root, 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            current = current.parent if current != root else root
            continue
        nxt = current / part
        if nxt.is_symlink():
            hops += 1
            if hops > 40:
                return False
            target = os.readlink(nxt)
            todo = [p for p in target.split("/") if p] + todo
            if target.startswith("/"):
                current = root
            continue
        if not os.path.lexists(nxt):
            return False
        current = nxt
    return True


def rootfs_problem(rootfs: str | os.PathLike[str], uid: int | None = None) -> str | None:
    """Why a sandbox cannot run over ``rootfs`` (``None`` when it can): a missing runner
    Python, shell or mount point, or (for a dedicated sandbox ``uid``) a folder on the way
    that others cannot enter."""
    root = Path(rootfs)
    if not root.is_dir():
        return f"the root file system {root} is not a folder"
    for rel in ROOTFS_REQUIRED:
        if not _exists_within(root, rel):
            return (
                f"the root file system {root} lacks /{rel} (build it with "
                "harness_gym.envs.terminal.rootfs.build_rootfs, which adds the sandbox's mount points)"
            )
    if uid is not None:
        for folder in [root, *root.absolute().parents]:
            try:
                if not os.stat(folder).st_mode & stat.S_IXOTH:
                    return (
                        f"{folder} cannot be entered by the sandbox's own uid (mode "
                        f"{stat.S_IMODE(os.stat(folder).st_mode):o}); keep root file systems in a "
                        "folder others can enter (HARNESS_GYM_ROOTFS_CACHE)"
                    )
            except OSError as err:
                return f"cannot read {folder}: {err}"
    return None


_etc_dir: list[str] = []
_etc_lock = threading.Lock()


def neutral_etc_dir() -> str:
    """A directory of this process with the files of :data:`NEUTRAL_ETC` (made once).

    It lives in ``/dev/shm`` (else ``/tmp``), never under ``$TMPDIR``, so the path the
    sandbox's ``mountinfo`` shows for it says nothing about the host user."""
    with _etc_lock:
        if _etc_dir and os.path.isdir(_etc_dir[0]):
            return _etc_dir[0]
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else "/tmp"
        path = tempfile.mkdtemp(prefix="hg-sandbox-etc-", dir=base)
        for name, text in NEUTRAL_ETC.items():
            with open(os.path.join(path, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(path, name), 0o644)
        os.chmod(path, 0o755)
        _etc_dir[:] = [path]
        atexit.register(_remove_etc_dir, path, os.getpid())
        return path


def _remove_etc_dir(path: str, owner: int) -> None:
    if os.getpid() == owner:  # not from a forked child
        shutil.rmtree(path, ignore_errors=True)


def _data_fd(data: bytes) -> int:
    """A file descriptor holding ``data`` from offset 0 (for bwrap's ``--ro-bind-data``)."""
    try:
        fd = os.memfd_create("hg-data", 0)
    except (AttributeError, OSError):  # no memfd: a pipe holds up to 64 kB
        read, write = os.pipe()
        os.write(write, data)
        os.close(write)
        return read
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def bwrap_supports(option: str) -> bool:
    """Whether the installed bwrap knows ``option`` (from its ``--help``; cached)."""
    with _etc_lock:
        if "help" not in _checked:
            try:
                done = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=30)
                _checked["help"] = done.stdout + done.stderr
            except (OSError, subprocess.SubprocessError):
                _checked["help"] = ""
        return f"{option} " in (_checked["help"] or "")


_runner_code: list[bytes] = []


def runner_code() -> bytes:
    if not _runner_code:
        _runner_code.append(RUNNER.read_bytes())
    return _runner_code[0]


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


class Sandbox:
    """The sandbox of one episode: its directory on the host and the runner inside bwrap.

    ``Sandbox(root)`` uses ``root/app`` and ``root/home`` (created if missing); call
    :meth:`run` for each command and :meth:`close` at the end (which kills every process of
    the sandbox). The runner starts at the first command, and again after a crash.

    ``rootfs`` runs the sandbox (and its verifier) over a built root file system instead of
    the host's ``/usr`` and ``/etc`` (read-only; ``/app`` is still the episode's own), and
    ``env`` adds variables to every command (a Dockerfile's ``ENV``; the verifier gets them
    too, under its own git and Python safety settings).
    """

    def __init__(
        self,
        root: Path,
        limits: SandboxLimits | None = None,
        binds: tuple[tuple[Path, str, bool], ...] = (),
        env: dict[str, str] | None = None,
        rootfs: str | os.PathLike[str] | None = None,
    ) -> None:
        require_bwrap()
        #: The system the sandbox runs over: a built root file system (read-only), or the host's.
        self.rootfs = Path(rootfs).absolute() if rootfs is not None else None
        if self.rootfs is not None:
            problem = rootfs_problem(self.rootfs, sandbox_uid())
            if problem is not None:
                raise SandboxUnavailable(problem)
        self.root = Path(root)
        #: Variables every command of the agent sees besides the sandbox's own (e.g. a
        #: Dockerfile's ``ENV``); the ones of :data:`FIXED_AGENT_ENV` are never replaced.
        self.extra_env = {k: v for k, v in (env or {}).items() if k not in FIXED_AGENT_ENV}
        self.app = self.root / "app"
        self.home = self.root / "home"
        self.limits = limits or SandboxLimits()
        #: Extra (host directory, sandbox path, writable) mounts, e.g. a verifier's /tests.
        self.binds = tuple((Path(h), t, w) for h, t, w in binds)
        self.uid = sandbox_uid()
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._key = b""
        self._seq = 0
        self._req_fd = self._rep_fd = -1
        #: Lines on the control channel that were not a reply of the runner (ignored).
        self.forged_replies = 0
        self.cgroup: MemoryCgroup | None = None
        self._vcgroup: MemoryCgroup | None = None
        self._finalizer = weakref.finalize(self, _kill, [None])
        self.commands = 0
        self.restarts = 0

    # -- life cycle ------------------------------------------------------------------------

    def prepare(self) -> None:
        """Hand the episode directory to the sandbox user (after the task wrote its files)."""
        self.app.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        writable = [h for h, _, w in self.binds if w]
        for host in writable:
            host.mkdir(parents=True, exist_ok=True)
        if self.uid is not None:
            for base in (self.app, self.home, *writable):
                os.chown(base, self.uid, self.uid)
                for path in walk_tree(base):
                    try:
                        os.lchown(path, self.uid, self.uid)
                    except OSError:  # vanished, or a path too long to name: left as it is
                        pass

    def start(self) -> None:
        """Start bwrap with the runner as the sandbox's PID 1 (nothing if it already runs).

        The runner's code and the neutral ``/etc`` files come in through file descriptors, the
        requests and replies over two private pipes (bwrap's own stdin/stdout are
        ``/dev/null``), bwrap with :data:`BWRAP_ENV` in ``/``: nothing of the host's environment,
        paths or user name reaches the sandbox but the episode directory's bind mounts."""
        if self._proc is not None and self._proc.poll() is None:
            return
        self._close_channel()
        self.prepare()
        lim = self.limits
        config = {
            "cwd": APP,
            "head_bytes": lim.head_bytes,
            "tail_bytes": lim.tail_bytes,
            "max_file_bytes": lim.max_file_bytes,
            "disk_quota": lim.disk_quota,
            "max_files": lim.max_files,
            # a writable bind (a Harbor task's /logs) is disk the agent can fill: counted too
            "counted": [APP, HOME, *(t for _, t, w in self.binds if w)],
            "watched": ["/tmp", "/dev/shm"],
            "roots": {APP: "app", HOME: "home"},
            "rlimits": {
                "RLIMIT_CPU": lim.cpu_seconds,
                "RLIMIT_AS": lim.address_space,
                "RLIMIT_NPROC": self._nproc_limit(),
                "RLIMIT_FSIZE": lim.file_size,
                "RLIMIT_CORE": 0,
                "RLIMIT_MSGQUEUE": 1 << 16,
            },
        }
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": HOME,
            "USER": "agent",
            "LOGNAME": "agent",
            "SHELL": "/bin/bash",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "TMPDIR": "/tmp",
            "PYTHONDONTWRITEBYTECODE": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "BASH_ENV": LIMITS_IN_SANDBOX,
        }
        env = {**env, **self.extra_env, **{k: env[k] for k in FIXED_AGENT_ENV if k in env}}
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        code_fd = _data_fd(runner_code())
        limits_fd = _data_fd(f"ulimit -t {int(lim.cpu_seconds)} 2>/dev/null; unset BASH_ENV\n".encode())
        args = _bwrap_base(self.uid, lim.tmp_size, shm_size=lim.shm_size, rootfs=self.rootfs)
        args += [
            "--as-pid-1",
            "--bind",
            str(self.app),
            APP,
            "--bind",
            str(self.home),
            HOME,
            *(["--perms", "0444"] if bwrap_supports("--perms") else []),
            "--ro-bind-data",
            str(code_fd),
            RUNNER_IN_SANDBOX,
            *(["--perms", "0444"] if bwrap_supports("--perms") else []),
            "--ro-bind-data",
            str(limits_fd),
            LIMITS_IN_SANDBOX,
            "--chdir",
            APP,
        ]
        for host, target, writable_bind in self.binds:
            args += ["--bind" if writable_bind else "--ro-bind", str(host), target]
        for key, value in env.items():
            args += ["--setenv", key, value]
        args += ["--remount-ro", "/"]  # the sandbox's own root (its /bin, /lib links) read-only too
        args += ["--", SYSTEM_PYTHON, "-I", "-S", "-B", RUNNER_IN_SANDBOX, str(req_r), str(rep_w)]
        try:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(req_r, rep_w, code_fd, limits_fd),
                env=BWRAP_ENV,
                cwd="/",
                start_new_session=True,
                **_as_user(self.uid),
            )
        except BaseException:
            for fd in (req_w, rep_r):
                os.close(fd)
            raise
        finally:
            for fd in (req_r, rep_w, code_fd, limits_fd):
                os.close(fd)
        self._req_fd, self._rep_fd = req_w, rep_r
        self._buffer = b""
        self._seq = 0
        self._key = secrets.token_bytes(32)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _kill, [self._proc, req_w, rep_r])
        try:
            os.write(req_w, (json.dumps({"key": self._key.hex(), "config": config}) + "\n").encode())
        except OSError:
            pass
        try:
            reply = self._receive(time.monotonic() + 30, 0)
        except SandboxError as err:
            self.close()
            raise SandboxError(f"the sandbox runner did not start: {err}") from None
        if not reply.get("ready"):
            self.close()
            raise SandboxError(f"the sandbox runner did not start: {reply}")
        # No command has run yet: bwrap and the runner are the sandbox's only processes.
        self.cgroup = MemoryCgroup.make(lim.memory)
        if self.cgroup is not None:
            self.cgroup.add([self._proc.pid, *_children(self._proc.pid)])
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, _kill, [self._proc, req_w, rep_r, self.cgroup])

    def _close_channel(self) -> None:
        for fd in (self._req_fd, self._rep_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._req_fd = self._rep_fd = -1

    def _nproc_limit(self) -> int:
        if self.uid is not None:  # a dedicated host uid: count only the sandbox's processes
            return self.limits.processes
        # Under the caller's own uid RLIMIT_NPROC counts all of its processes.
        mine = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _owner(p) == os.getuid())
        return mine + self.limits.processes

    def close(self) -> None:
        """Kill every process of the sandbox (its PID namespace dies with bwrap)."""
        if self.alive:
            try:  # the runner kills the shell and every other process of the sandbox first
                self._request({"op": "reset_shell"}, 5)
            except SandboxError:
                pass
        proc, self._proc = self._proc, None
        if proc is not None:
            _kill([proc])
        self._close_channel()
        self._finalizer.detach()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- requests --------------------------------------------------------------------------

    def run(self, command: str, persistent: bool = False, timeout: float | None = None) -> CommandResult:
        """Run ``command`` with ``bash`` in ``/app`` (or in the persistent shell)."""
        timeout = self.limits.timeout if timeout is None else timeout
        self.commands += 1
        forged_before = self.forged_replies
        ooms_before = self.cgroup.oom_kills() if self.cgroup is not None else 0
        restarted = not self.alive and self._proc is not None
        try:
            self.start()
            reply = self._request(
                {"op": "run", "cmd": command, "timeout": timeout, "persistent": persistent}, timeout + 10
            )
        except SandboxError as err:
            self.close()
            self.restarts += 1
            return CommandResult(
                command, "", str(err), None, sandbox_restarted=True, shell_restarted=persistent
            )
        if "stdout" not in reply:
            self.reset_shell()
            return CommandResult(
                command, "", str(reply.get("error", "the sandbox failed")), None, shell_restarted=persistent
            )
        out, err = reply["stdout"], reply["stderr"]
        result = CommandResult(
            command=command,
            stdout=out["head"] + out["tail"],
            stderr=err["head"] + err["tail"],
            exit_code=reply["exit_code"],
            cwd=reply["cwd"],
            stdout_omitted=out["omitted"],
            stderr_omitted=err["omitted"],
            stdout_bytes=out["total"],
            stderr_bytes=err["total"],
            binary=out["binary"] or err["binary"],
            timed_out=reply["timed_out"],
            signal=reply["signal"],
            shell_restarted=reply["shell_restarted"] or restarted,
            sandbox_restarted=restarted,
            killed_processes=reply["killed_processes"],
            seconds=reply["seconds"],
            quota_removed=list(reply.get("quota_removed", [])),
            disk_rule=reply.get("disk_rule"),
            file_size_limit=bool(reply.get("file_size_limit")),
            forged_replies=self.forged_replies - forged_before,
            memory_limit=self.cgroup is not None and self.cgroup.oom_kills() > ooms_before,
        )
        # Keep the boundary between head and tail visible in the stored text.
        if out["omitted"]:
            result.stdout = out["head"] + f"\n[... {out['omitted']} bytes omitted ...]\n" + out["tail"]
        if err["omitted"]:
            result.stderr = err["head"] + f"\n[... {err['omitted']} bytes omitted ...]\n" + err["tail"]
        return result

    def read_file(self, path: str) -> dict[str, Any]:
        return self._file_op({"op": "read", "path": path})

    def write_file(self, path: str, content: str) -> dict[str, Any]:
        return self._file_op({"op": "write", "path": path, "content": content})

    def reset_shell(self) -> None:
        if self.alive:
            try:
                self._request({"op": "reset_shell"}, 10)
            except SandboxError:
                self.close()

    def _file_op(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            self.start()
            reply = self._request(request, 10)
        except SandboxError as err:
            self.close()
            return {"ok": False, "error": str(err)}
        return reply

    def _request(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send ``request`` (HMAC-signed, numbered) and wait for the reply bound to it."""
        if not self.alive or self._req_fd < 0:
            raise SandboxError("the sandbox runner died")
        self._seq += 1
        body = json.dumps({**request, "id": self._seq}).encode()
        line = _mac(self._key, b"request ", body) + b" " + body + b"\n"
        try:
            while line:
                line = line[os.write(self._req_fd, line) :]
        except OSError:
            raise SandboxError("the sandbox runner died") from None
        return self._receive(time.monotonic() + timeout, self._seq)

    def _receive(self, deadline: float, expect: int) -> dict[str, Any]:
        """The runner's reply to request ``expect``; any other line is counted and dropped."""
        fd = self._rep_fd
        while True:
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SandboxError("the sandbox runner stopped answering")
                ready, _, _ = select.select([fd], [], [], left)
                if ready:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        raise SandboxError("the sandbox runner died")
                    self._buffer += chunk
                    if len(self._buffer) > 64 << 20:
                        raise SandboxError("the sandbox runner sent an oversized reply")
            line, _, self._buffer = self._buffer.partition(b"\n")
            mac, _, body = line.partition(b" ")
            if hmac.compare_digest(mac, _mac(self._key, b"reply ", body)):
                try:
                    reply = json.loads(body)
                except ValueError:
                    raise SandboxError("the sandbox runner sent a malformed reply") from None
                if isinstance(reply, dict) and reply.get("id") == expect:
                    return reply
            self.forged_replies += 1

    # -- disk ------------------------------------------------------------------------------

    def disk_usage(self, *bases: Path) -> list[tuple[int, str]]:
        """(bytes, path) of every file under ``bases`` (``/app`` and the home by default):
        the larger of its size and its allocated blocks (``fallocate --keep-size`` holds
        disk in a file of size 0). Directories count as entries of 0 bytes."""
        files = []
        for base in bases or (self.app, self.home):
            for path in walk_tree(base):
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                files.append((0 if stat.S_ISDIR(st.st_mode) else max(st.st_size, st.st_blocks * 512), path))
        return files

    def enforce_quota(self) -> list[str]:
        """Remove the largest files while the episode directory exceeds the disk quota."""
        files = self.disk_usage()
        total = sum(size for size, _ in files)
        removed = []
        for size, path in sorted(files, reverse=True):
            if total <= self.limits.disk_quota:
                break
            try:
                os.unlink(path)
            except OSError:
                continue
            total -= size
            removed.append(os.path.relpath(path, self.root))
        return removed

    # -- the verifier: a fresh one-shot sandbox, after the agent -------------------------------

    def stop_agent(self, wait: float = 5.0) -> None:
        """Kill every process of the agent's sandbox and wait until they are gone.

        The runner's PID namespace dies with its init; that init turns into a zombie only
        after the kernel has killed and reaped every other process of the namespace, so
        waiting for it means no agent process still runs (or writes) when this returns.
        """
        inits = _children(self.pid) if self.alive and self.pid is not None else []
        self.close()
        deadline = time.monotonic() + wait
        for pid in inits:
            while _running(pid) and time.monotonic() < deadline:
                time.sleep(0.002)

    def _verifier_cgroup(self) -> MemoryCgroup | None:
        """The verifiers' memory cgroup (the sandbox's cap), made once and kept while the
        episode lasts: removing it right after its processes died would wait for the
        kernel to release them, on every verification."""
        if self._vcgroup is None:
            self._vcgroup = MemoryCgroup.make(self.limits.memory)
            if self._vcgroup is not None:
                weakref.finalize(self, self._vcgroup.remove)
        return self._vcgroup

    def run_verifier(
        self,
        command: str,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        binds: tuple[tuple[Path, str, bool], ...] = (),
        app_writable: bool = False,
        cwd: str = APP,
    ) -> CommandResult:
        """Run a verifier's ``command`` in a fresh one-shot sandbox the agent never shaped.

        Every agent process is killed first (:meth:`stop_agent`); the command then runs in a
        new ``bwrap`` (not through the agent's runner, whose output the agent may reach) with
        ``bash --noprofile --norc`` in ``cwd``, ``/app`` read-only (writable only with
        ``app_writable``), the agent's home not mounted (``$HOME`` is an empty directory in
        a private ``/tmp``), the fixed :data:`VERIFIER_ENV` (plus ``env``) and the episode's
        limits. ``binds`` adds (host directory, sandbox path, writable) mounts.
        """
        timeout = self.limits.timeout if timeout is None else timeout
        self.stop_agent()
        lim = self.limits
        for host, _, writable in binds:
            if writable and self.uid is not None:
                os.chown(host, self.uid, self.uid)
                for path in walk_tree(host):
                    os.lchown(path, self.uid, self.uid)
        args = _bwrap_base(self.uid, lim.tmp_size, shm_size=lim.shm_size, rootfs=self.rootfs)
        # The supervisor is the sandbox's PID 1: nothing inside can kill or stop it.
        args += ["--as-pid-1", "--bind" if app_writable else "--ro-bind", str(self.app), APP]
        for host, target, writable in binds:
            args += ["--bind" if writable else "--ro-bind", str(host), target]
        args += _git_config_binds(self.app)  # the repository's config, less keys that run code
        args += ["--dir", VERIFIER_ENV["HOME"], "--chdir", cwd]
        merged = {**VERIFIER_ENV, **self.extra_env, **(env or {})}
        merged.update({k: v for k, v in VERIFIER_ENV.items() if k in VERIFIER_FIXED or k.startswith("GIT_")})
        for key, value in merged.items():
            args += ["--setenv", key, value]
        args += ["--remount-ro", "/"]
        status_r, status_w = os.pipe()
        go_r, go_w = os.pipe()
        shell = [
            "--",
            SYSTEM_PYTHON,
            "-I",
            "-S",
            "-B",
            "-c",
            VERIFIER_SUPERVISOR,
            str(status_w),
            str(go_r),
            command,
        ]
        rlimits = {
            "RLIMIT_CPU": lim.cpu_seconds,
            "RLIMIT_AS": lim.address_space,
            "RLIMIT_FSIZE": lim.file_size,
            "RLIMIT_CORE": 0,
            "RLIMIT_NPROC": self._nproc_limit(),
            "RLIMIT_MSGQUEUE": 1 << 16,
        }
        start = time.monotonic()
        timed_out = False
        # The options (host paths among them) go through a memfd (`--args`), not the command
        # line, and bwrap starts with an empty environment: its init is the sandbox's /proc/1,
        # which the checked code can read.
        argfd = os.memfd_create("hg-verifier-args")
        os.write(argfd, b"".join(a.encode("utf-8", "surrogateescape") + b"\0" for a in args[1:]))
        os.lseek(argfd, 0, os.SEEK_SET)
        bwrap = shutil.which("bwrap") or "bwrap"
        cgroup: MemoryCgroup | None = None
        ooms = 0
        watch: _DiskWatch | None = None
        status = b""
        memory_limit = False
        try:
            with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
                try:
                    proc = subprocess.Popen(
                        [bwrap, "--args", str(argfd), *shell],
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=err,
                        env={},
                        pass_fds=(argfd, status_w, go_r),
                        start_new_session=True,
                        preexec_fn=lambda: _set_rlimits(rlimits),
                        **_as_user(self.uid),
                    )
                finally:
                    for fd in (argfd, status_w, go_r):
                        os.close(fd)
                deadline = start + timeout
                # The supervisor says it is ready (nothing of the command runs yet): the whole
                # sandbox goes into a memory cgroup, then the command starts.
                ready = _read_some(status_r, deadline)
                if ready[:1] == b"R":
                    status = ready[1:]
                    cgroup = self._verifier_cgroup()
                    if cgroup is not None:
                        ooms = cgroup.oom_kills()
                        cgroup.add(_descendants(proc.pid))
                    if app_writable:
                        watch = _DiskWatch(self, proc)
                    try:
                        os.write(go_w, b"g")
                    except OSError:
                        pass
                code: int | None = _wait_until(proc, deadline)
                if code is None:
                    timed_out = True
                    _kill([proc])
                if watch is not None:
                    watch.stop()
                status += _read_some(status_r, time.monotonic() + 1, until_eof=True)
                stdout, stdout_total = _head_tail(out, lim.head_bytes, lim.tail_bytes)
                stderr, stderr_total = _head_tail(err, lim.head_bytes, lim.tail_bytes)
        finally:
            for fd in (status_r, go_w):
                os.close(fd)
            if cgroup is not None:  # kept for the next verification (removed at close)
                memory_limit = cgroup.oom_kills() > ooms
        report = _supervisor_report(status)
        findings: list[str] = []
        sig = _signal_name(code)
        if report is None:
            if not timed_out:
                findings.append("the verifier's supervisor gave no report (it was killed)")
        else:
            code = report["code"] if report.get("signal") is None else -int(report["signal"])
            sig = _signal_name(code)
            if report.get("signal") is not None and not timed_out:
                findings.append(f"the verifier's command was killed by {sig}")
            if report.get("survivors"):
                findings.append(
                    f"{len(report['survivors'])} process(es) the command started outlived it "
                    f"(they could rewrite its result): {', '.join(report['survivors'][:3])[:200]}"
                )
        quota_removed = self.enforce_quota() if app_writable else []
        rule = watch.rule if watch is not None else None
        if quota_removed and rule is None:
            rule = "disk_quota"
        return CommandResult(
            command=command,
            stdout=stdout.decode("utf-8", "replace"),
            stderr=stderr.decode("utf-8", "replace"),
            exit_code=code,
            cwd=cwd,
            stdout_omitted=stdout_total - len(stdout),
            stderr_omitted=stderr_total - len(stderr),
            stdout_bytes=stdout_total,
            stderr_bytes=stderr_total,
            timed_out=timed_out,
            signal=sig,
            seconds=time.monotonic() - start,
            quota_removed=quota_removed,
            disk_rule=rule,
            memory_limit=memory_limit,
            supervised=report is not None,
            tampering=findings,
        )


#: Runs the verifier's command inside its sandbox as its PID 1 (``python3 -I -S -B -c``;
#: argv: status fd, go fd, command), which no process inside can signal. Undumpable, so no
#: process of the same uid opens its ``/proc`` files (its status pipe among them); waits for
#: the host's go (the sandbox is in its memory cgroup), runs ``bash --noprofile --norc -c
#: command`` under umask 022, then reports on its private pipe how the command ended and
#: which of its processes outlived it (then kills them). It imports only ``ctypes`` (for
#: ``prctl``), ``os`` and ``sys``: ``json`` and ``signal`` doubled its start-up (the report is
#: JSON written by hand, every string printable with ``\`` and ``"`` escaped).
VERIFIER_SUPERVISOR = r"""
import ctypes, os, sys
status, go, cmd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
try:
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
except Exception:
    pass
os.set_inheritable(status, False)
os.write(status, b"R")
os.read(go, 1)
os.close(go)
os.umask(0o022)
pid = os.fork()
if pid == 0:
    try:
        os.execv("/bin/bash", ["bash", "--noprofile", "--norc", "-c", cmd])
    finally:
        os._exit(127)
while True:
    try:
        _, st = os.waitpid(pid, 0)
        break
    except InterruptedError:
        continue
me, left = os.getpid(), []
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) not in (1, me):
        try:
            with open("/proc/%s/stat" % name) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open("/proc/%s/cmdline" % name, "rb") as f:
                line = f.read(120).replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            left.append(line or name)
for _ in range(3):
    try:
        os.kill(-1, 9)
    except OSError:
        break
sig = os.WTERMSIG(st) if os.WIFSIGNALED(st) else None
code = os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + sig
def q(s):
    s = "".join(c if c.isprintable() else "?" for c in s)
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
report = '{"code": %d, "signal": %s, "survivors": [%s]}' % (
    code, "null" if sig is None else sig, ", ".join(q(s) for s in left[:20]))
os.write(status, report.encode("utf-8", "replace"))
os._exit(code)
"""


def _wait_until(proc: subprocess.Popen[bytes], deadline: float) -> int | None:
    """``proc``'s exit status, or ``None`` if it still runs at ``deadline``. Waits on a pidfd
    where the kernel has them: ``Popen.wait(timeout)`` polls with sleeps that grow to 50 ms,
    which a verifier's short command pays in latency."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (Linux < 5.3), or the process is gone
        fd = None
    if fd is not None:
        try:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(fd)
        return proc.poll()
    try:
        return proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return None


def _read_some(fd: int, deadline: float, until_eof: bool = False) -> bytes:
    """What arrives on ``fd`` before ``deadline``: one chunk, or everything up to EOF."""
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return data
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return data
        chunk = os.read(fd, 65536)
        if not chunk:
            return data
        data += chunk
        if not until_eof or len(data) > 1 << 16:
            return data


def _supervisor_report(data: bytes) -> dict[str, Any] | None:
    try:
        report = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(report, dict) or not isinstance(report.get("code"), int):
        return None
    report["survivors"] = [str(s) for s in report.get("survivors") or []]
    return report


def _descendants(pid: int) -> list[int]:
    found, stack = [], [pid]
    while stack:
        top = stack.pop()
        found.append(top)
        stack.extend(_children(top))
    return found


class _DiskWatch:
    """Measures ``/app`` while a verifier with a writable ``/app`` runs (allocated blocks and
    entries, as for the agent); kills it when it breaks the disk quota or the entry limit."""

    def __init__(self, box: Sandbox, proc: subprocess.Popen[bytes]) -> None:
        self.box, self.proc = box, proc
        self.rule: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        pause = 0.05
        while not self._done.wait(pause):
            began = time.monotonic()
            files = self.box.disk_usage(self.box.app, self.box.home)
            if sum(size for size, _ in files) > self.box.limits.disk_quota:
                self.rule = "disk_quota"
            elif len(files) > self.box.limits.max_files:
                self.rule = "file_count_limit"
            if self.rule is not None:
                _kill([self.proc])
                return
            pause = min(1.0, max(0.05, 4 * (time.monotonic() - began)))

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _mac(key: bytes, kind: bytes, body: bytes) -> bytes:
    return hmac.new(key, kind + body, hashlib.sha256).hexdigest().encode()


def _owner(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None


def _kill(holder: list[Any]) -> None:
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


#: The verifier's whole environment: nothing of the agent's shell, home or git config.
VERIFIER_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
    "HOME": "/tmp/verifier-home",
    "USER": "verifier",
    "LOGNAME": "verifier",
    "SHELL": "/bin/bash",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "dumb",
    "TMPDIR": "/tmp",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONNOUSERSITE": "1",
    # Python >= 3.11: neither the working directory (`python3 -m pytest` in /app) nor a
    # script's folder goes first on sys.path, so /app/pytest.py is not what runs.
    "PYTHONSAFEPATH": "1",
    # Bytecode is read only from (and never written to) this empty folder: a forged
    # unchecked-hash .pyc in /app/__pycache__ is never run in place of its source.
    "PYTHONPYCACHEPREFIX": "/tmp/verifier-pycache",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    # Like `git -c` for every git the verifier runs (a task's test.sh too): these win over
    # the repository's own config, so no hook or fsmonitor of the agent's runs.
    "GIT_CONFIG_COUNT": "4",
    "GIT_CONFIG_KEY_0": "core.hooksPath",
    "GIT_CONFIG_VALUE_0": "/dev/null",
    "GIT_CONFIG_KEY_1": "core.fsmonitor",
    "GIT_CONFIG_VALUE_1": "false",
    "GIT_CONFIG_KEY_2": "core.untrackedCache",
    "GIT_CONFIG_VALUE_2": "false",
    "GIT_CONFIG_KEY_3": "status.showUntrackedFiles",
    "GIT_CONFIG_VALUE_3": "all",
}
#: Verifier variables no task ``env`` replaces (with every ``GIT_*`` one): they keep the
#: agent's files from configuring what the verifier runs.
VERIFIER_FIXED = frozenset(
    {"HOME", "PYTHONNOUSERSITE", "PYTHONDONTWRITEBYTECODE", "PYTHONSAFEPATH", "PYTHONPYCACHEPREFIX"}
)
#: Keys of a repository's own config the verifier's git still reads (none of them runs a
#: program): every other key (filters, textconv, hooks, fsmonitor, includes, aliases,
#: external diff, pagers, credential helpers, ...) is dropped from the copy it sees.
GIT_SAFE_KEYS = re.compile(
    r"(core\.(repositoryformatversion|bare|filemode|logallrefupdates|ignorecase|precomposeunicode"
    r"|symlinks|autocrlf|eol|safecrlf|quotepath|abbrev|checkstat|trustctime)"
    r"|extensions\.(objectformat|refstorage)|remote\..+\.(url|fetch)|branch\..+\.(remote|merge)"
    r"|user\.(name|email)|init\.defaultbranch)"
)


#: Sanitized config texts by (path, device, inode, size, mtime, ctime) of the config read.
_SAFE_GIT_CONFIG: dict[tuple[Any, ...], str] = {}


def _git_config_binds(app: Path) -> list[str]:
    """bwrap options that show the verifier a copy of ``app/.git/config`` with only
    :data:`GIT_SAFE_KEYS` (written beside ``app``), an empty ``commondir`` over one, and an
    empty file over a ``.git`` that is not a plain directory (a gitfile or a symlink to
    another git directory): the verifier's git reads no config key of the agent's that runs
    a program. Nothing where there is no ``.git``."""
    dot_git = app / ".git"
    try:
        st = os.lstat(dot_git)
    except OSError:
        return []
    empty = app.parent / "verifier-git-empty"
    empty.unlink(missing_ok=True)
    empty.write_text("")
    os.chmod(empty, 0o444)
    if not stat.S_ISDIR(st.st_mode):
        return ["--ro-bind", str(empty), f"{APP}/.git"]
    args = []
    config = dot_git / "config"
    if os.path.lexists(config):
        text = ""
        git = shutil.which("git")
        st = os.lstat(config)
        key = (str(config), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if key in _SAFE_GIT_CONFIG:
            text = _SAFE_GIT_CONFIG[key]
        elif stat.S_ISREG(st.st_mode) and git is not None:
            listed = subprocess.run(
                [git, "config", "--file", str(config), "--no-includes", "--list", "--null"],
                capture_output=True,
                env={**BWRAP_ENV, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"},
                cwd="/",
                timeout=30,
                check=False,
            ).stdout.decode("utf-8", "replace")
            text = _git_config_text(listed)
            if len(_SAFE_GIT_CONFIG) > 256:
                _SAFE_GIT_CONFIG.clear()
            _SAFE_GIT_CONFIG[key] = text
        safe = app.parent / "verifier-gitconfig"
        safe.unlink(missing_ok=True)
        safe.write_text(text)
        os.chmod(safe, 0o444)
        args += ["--ro-bind", str(safe), f"{APP}/.git/config"]
    if os.path.lexists(dot_git / "commondir"):
        args += ["--ro-bind", str(empty), f"{APP}/.git/commondir"]
    return args


def _git_config_text(listed: str) -> str:
    """``git config --list --null`` output, less unsafe keys, as a config file."""
    sections: dict[str, list[str]] = {}
    for item in listed.split("\0"):
        key, _, value = item.partition("\n")
        if not GIT_SAFE_KEYS.fullmatch(key.lower()) and not GIT_SAFE_KEYS.fullmatch(key):
            continue
        section, _, name = key.rpartition(".")
        head, _, sub = section.partition(".")
        title = f'[{head} "{_git_quote(sub)}"]' if sub else f"[{head}]"
        sections.setdefault(title, []).append(f'\t{name} = "{_git_quote(value)}"')
    return "".join(f"{title}\n" + "\n".join(lines) + "\n" for title, lines in sections.items())


def _git_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")


#: The file in an episode directory (outside what the sandbox mounts) naming its owner process.
OWNER_FILE = ".hg-owner"
EPISODE_PREFIX = "hg-term-"


def _set_rlimits(limits: dict[str, int]) -> None:
    """In the child before exec: lower each limit (never above the hard limit it has)."""
    for name, value in limits.items():
        which = getattr(resource, name)
        hard = resource.getrlimit(which)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def _head_tail(f: Any, head: int, tail: int) -> tuple[bytes, int]:
    """The first ``head`` and last ``tail`` bytes of a file written by a child, and its size."""
    total = f.seek(0, os.SEEK_END)
    f.seek(0)
    if total <= head + tail:
        return f.read(), total
    first = f.read(head)
    f.seek(total - tail)
    return first + f.read(tail), total


def _signal_name(code: int | None) -> str | None:
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return str(-code)


def _children(pid: int) -> list[int]:
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


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not yet a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def walk_tree(root: str | os.PathLike[str]) -> list[str]:
    """Every path under ``root`` (not ``root`` itself), iteratively: no symlink is followed,
    any depth is fine, and entries that vanish or cannot be read are skipped."""
    found: list[str] = []
    stack = [os.fspath(root)]
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as entries:
                for entry in entries:
                    found.append(entry.path)
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                    except OSError:
                        pass
        except OSError:
            continue
    return found


def remove_tree(path: str | os.PathLike[str]) -> bool:
    """Remove ``path`` whatever the agent left there: any depth, FIFOs, symlinks (never
    followed), directories without write or search permission. True when it is gone."""
    path = os.fspath(path)
    if not os.path.lexists(path):
        return True
    if os.path.islink(path) or not os.path.isdir(path):
        try:
            os.unlink(path)
        except OSError:
            pass
        return not os.path.lexists(path)
    for argv in (["rm", "-rf", "--", path], ["chmod", "-R", "u+rwX", "--", path], ["rm", "-rf", "--", path]):
        if not os.path.lexists(path):
            break
        subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    return not os.path.lexists(path)


def copy_tree(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Copy a directory as it is (``cp -a``: symlinks as symlinks, FIFOs as FIFOs, modes kept,
    any depth). Raises ``OSError`` saying what could not be copied."""
    done = subprocess.run(
        ["cp", "-a", "--no-target-directory", "--", os.fspath(src), os.fspath(dst)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise OSError(f"cannot copy {src}: {done.stderr.strip()[-500:]}")


def _process_tag(pid: int) -> str | None:
    """``"<pid> <start time>"``: names a process even after its pid is reused."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f"{pid} {f.read().rpartition(')')[2].split()[19]}"
    except (OSError, IndexError):
        return None


#: Chooses the host folder of episode directories (default: ``/tmp``, whatever ``$TMPDIR`` says).
EPISODE_BASE_VARIABLE = "HARNESS_GYM_SANDBOX_TMP"


def episode_base() -> str:
    """The host folder that holds episode directories.

    A bind mount's source path shows inside the sandbox (``/proc/self/mountinfo``), so the
    default is a fixed, neutral ``/tmp`` (or ``/var/tmp``) rather than ``$TMPDIR``, which often
    names the user (``/home/alice/tmp``, ``/run/user/1000``). ``$HARNESS_GYM_SANDBOX_TMP``
    chooses another folder, which the agent can then see.
    """
    chosen = os.environ.get(EPISODE_BASE_VARIABLE)
    if chosen:
        return chosen
    for base in ("/tmp", "/var/tmp"):
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            return base
    return tempfile.gettempdir()


def owned_tempdir(prefix: str = EPISODE_PREFIX) -> Path:
    """A fresh host directory (under :func:`episode_base`) whose :data:`OWNER_FILE` names this
    process; stale ones (their owner gone, e.g. a killed harness) are removed first."""
    remove_stale_episode_dirs()
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=episode_base()))
    # Written whole or not at all (a rename): another process's sweep must never read a
    # half-written owner file and take the directory for a stale one.
    partial = root / (OWNER_FILE + ".partial")
    partial.write_text(_process_tag(os.getpid()) or "")
    partial.rename(root / OWNER_FILE)
    return root


def remove_stale_episode_dirs(base: str | os.PathLike[str] | None = None) -> list[str]:
    """Remove this user's episode and snapshot directories whose owner process is gone."""
    base = os.fspath(base or episode_base())
    removed = []
    try:
        with os.scandir(base) as entries:
            candidates = [
                e.path
                for e in entries
                if e.name.startswith(EPISODE_PREFIX)
                and e.is_dir(follow_symlinks=False)
                and e.stat(follow_symlinks=False).st_uid == os.geteuid()
            ]
    except OSError:
        return removed
    for path in candidates:
        try:
            fd = os.open(os.path.join(path, OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd) as f:
                tag = f.read(100).strip()
        except OSError:
            continue  # no owner file: being created now, or not ours to judge
        pid = tag.split()[0] if tag else ""
        if not pid.isdigit() or _process_tag(int(pid)) == tag:
            continue  # unreadable (not ours to judge) or its owner is alive
        if remove_tree(path):
            removed.append(path)
    return removed


def make_episode_dir(prefix: str = EPISODE_PREFIX) -> Path:
    """A fresh host directory for one episode (``app`` and ``home`` inside)."""
    root = owned_tempdir(prefix)
    os.chmod(root, 0o755)
    (root / "app").mkdir()
    (root / "home").mkdir()
    return root


def remove_episode_dir(root: Path) -> None:
    """Remove an episode directory completely, whatever the agent left in it (never raises)."""
    remove_tree(root)
