"""The verifier's sandbox: its environment, its view of the agent's git repository, the
supervisor that runs its command, and the disk watch while it may write ``/app``.

:meth:`Sandbox.run_verifier <harness_gym.envs.terminal.sandbox.Sandbox.run_verifier>` runs a
verifier in a fresh one-shot bubblewrap the agent never shaped. What it sees is fixed here:
:data:`VERIFIER_ENV` (no variable of the agent's shell, home or git config; the ones of
:data:`VERIFIER_FIXED` and every ``GIT_*`` never replaced), a copy of the repository's
``.git/config`` with only :data:`GIT_SAFE_KEYS` (:func:`git_config_binds`), and
:data:`VERIFIER_SUPERVISOR` as its PID 1, which reports how the command ended and which of
its processes outlived it (:func:`supervisor_report`).
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness_gym.envs.terminal.sandbox_processes import kill_bwrap
from harness_gym.envs.terminal.sandbox_view import APP, BWRAP_ENV

if TYPE_CHECKING:
    from harness_gym.envs.terminal.sandbox import Sandbox

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


def wait_until(proc: subprocess.Popen[bytes], deadline: float) -> int | None:
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


def read_some(fd: int, deadline: float, until_eof: bool = False) -> bytes:
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


def supervisor_report(data: bytes) -> dict[str, Any] | None:
    try:
        report = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(report, dict) or not isinstance(report.get("code"), int):
        return None
    report["survivors"] = [str(s) for s in report.get("survivors") or []]
    return report


class DiskWatch:
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
                kill_bwrap([self.proc])
                return
            pause = min(1.0, max(0.05, 4 * (time.monotonic() - began)))

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


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


def git_config_binds(app: Path) -> list[str]:
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
