"""What a sandbox sees: the file-system view bubblewrap builds, and whether it can run here.

:func:`bwrap_base` is the argv every sandbox starts from (the agent's, the verifier's):
its own user, PID, IPC, UTS, cgroup and network namespaces, no nested user namespace, every
capability dropped, the host's ``/usr`` and ``/etc`` (or a built root file system's
top-level folders, :func:`system_binds`) read-only, neutral user, group and host names
(:data:`NEUTRAL_ETC`), a read-only ``/dev`` and size-limited ``/tmp`` and ``/dev/shm``.
:func:`bwrap_problem` / :func:`require_bwrap` say whether bubblewrap can run at all (nothing
ever runs unsandboxed), :func:`rootfs_problem` whether a root file system holds what the
sandbox needs. See "Threat model" in docs/terminal.md.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import subprocess
import tempfile
import threading
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
                    [*bwrap_base(uid), "--", "/bin/true"],
                    capture_output=True,
                    timeout=30,
                    env=BWRAP_ENV,
                    cwd="/",
                    **as_user(uid),
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


def as_user(uid: int | None) -> dict[str, Any]:
    if uid is None:
        return {}
    return {"user": uid, "group": uid, "extra_groups": []}


def bwrap_base(
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
    args += system_binds(rootfs)
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


def system_binds(rootfs: Path | None) -> list[str]:
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


def data_fd(data: bytes) -> int:
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
