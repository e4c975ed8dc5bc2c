"""A bubblewrap sandbox for one episode of a terminal task.

Each episode gets a fresh directory on the host, ``<root>/app`` (the working directory the
agent sees as ``/app``) and ``<root>/home`` (``$HOME``, seen as ``/home/agent``). Commands
run inside ``bwrap`` with (the module that enforces each rule in brackets):

* no network (``--unshare-net``: only a private loopback; the host's loopback is unreachable),
  their own user, PID, IPC, UTS and cgroup namespaces (``--unshare-all``), and no nested user
  namespace (``--disable-userns``) [:mod:`~harness_gym.envs.terminal.sandbox_view`];
* ``--die-with-parent`` and ``--new-session``; the sandbox runs as an unprivileged user with
  every capability dropped (as root on the host, under a dedicated host uid) [``sandbox_view``];
* the system (``/usr``, ``/etc``) read-only, with neutral user, group and host names; ``/dev``
  read-only; only the episode directory and private, size-limited ``/tmp`` and ``/dev/shm``
  writable; ``/root``, ``/home``, the checkout and the rest of the host invisible
  [``sandbox_view``; the episode directory: :mod:`~harness_gym.envs.terminal.episode_dirs`];
* nothing of the host's environment (bwrap itself starts with :data:`BWRAP_ENV`; ``--clearenv``)
  [``sandbox_view``; the agent's variables: :meth:`Sandbox.start` here];
* per command: a wall-clock timeout (the command's whole session, and every other process of
  the sandbox, is killed), CPU seconds, address space, number of processes and file size
  limits; output capped while it is read (head and tail kept, the rest counted)
  [the values: :mod:`~harness_gym.envs.terminal.sandbox_limits`; applied by the runner];
* the whole sandbox's memory in a memory cgroup where one can be made (:class:`MemoryCgroup`)
  [``sandbox_limits``];
* a disk quota and an entry limit on ``/app`` and ``$HOME``, enforced by the runner while the
  command runs (a command that breaks one is killed and the excess removed) [the runner; for a
  verifier, :mod:`~harness_gym.envs.terminal.sandbox_verifier`];
* every process of the sandbox killed at its end [:mod:`~harness_gym.envs.terminal.sandbox_processes`].

One small runner process (:mod:`harness_gym.envs.terminal.runner`, on the system
``python3``) is the sandbox's PID 1 for the episode and starts every command, so the
per-command cost is one fork and exec, not a new sandbox. Its code comes in through a file
descriptor (the checkout's path and permissions never matter); requests and replies travel
over two private pipes, every line bound to its request by a per-episode HMAC, so nothing the
agent writes is taken for a reply (this module). A verifier runs after the agent in a fresh
one-shot sandbox (:meth:`Sandbox.run_verifier`; what it sees: ``sandbox_verifier``). Nothing
ever runs unsandboxed: where bubblewrap cannot run, :func:`require_bwrap` raises
:class:`SandboxUnavailable` saying how to install it. See "Threat model" in docs/terminal.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import select
import shutil
import stat
import subprocess
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from harness_gym.envs.terminal.episode_dirs import walk_tree
from harness_gym.envs.terminal.sandbox_limits import (
    CommandResult,
    MemoryCgroup,
    SandboxLimits,
    head_tail,
    set_rlimits,
)
from harness_gym.envs.terminal.sandbox_processes import (
    child_pids,
    descendant_pids,
    is_running,
    kill_bwrap,
    owner_uid,
    signal_name,
)
from harness_gym.envs.terminal.sandbox_verifier import (
    VERIFIER_ENV,
    VERIFIER_FIXED,
    VERIFIER_SUPERVISOR,
    DiskWatch,
    git_config_binds,
    read_some,
    supervisor_report,
    wait_until,
)
from harness_gym.envs.terminal.sandbox_view import (
    APP,
    BWRAP_ENV,
    FIXED_AGENT_ENV,
    HOME,
    LIMITS_IN_SANDBOX,
    RUNNER_IN_SANDBOX,
    SYSTEM_PYTHON,
    SandboxUnavailable,
    as_user,
    bwrap_base,
    bwrap_supports,
    data_fd,
    require_bwrap,
    rootfs_problem,
    runner_code,
    sandbox_uid,
)


class SandboxError(RuntimeError):
    """The sandbox stopped answering (it is restarted on the next command)."""


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
        self._finalizer = weakref.finalize(self, kill_bwrap, [None])
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
        code_fd = data_fd(runner_code())
        limits_fd = data_fd(f"ulimit -t {int(lim.cpu_seconds)} 2>/dev/null; unset BASH_ENV\n".encode())
        args = bwrap_base(self.uid, lim.tmp_size, shm_size=lim.shm_size, rootfs=self.rootfs)
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
                **as_user(self.uid),
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
        self._finalizer = weakref.finalize(self, kill_bwrap, [self._proc, req_w, rep_r])
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
            self.cgroup.add([self._proc.pid, *child_pids(self._proc.pid)])
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, kill_bwrap, [self._proc, req_w, rep_r, self.cgroup])

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
        mine = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and owner_uid(p) == os.getuid())
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
            kill_bwrap([proc])
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
        inits = child_pids(self.pid) if self.alive and self.pid is not None else []
        self.close()
        deadline = time.monotonic() + wait
        for pid in inits:
            while is_running(pid) and time.monotonic() < deadline:
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
        args = bwrap_base(self.uid, lim.tmp_size, shm_size=lim.shm_size, rootfs=self.rootfs)
        # The supervisor is the sandbox's PID 1: nothing inside can kill or stop it.
        args += ["--as-pid-1", "--bind" if app_writable else "--ro-bind", str(self.app), APP]
        for host, target, writable in binds:
            args += ["--bind" if writable else "--ro-bind", str(host), target]
        args += git_config_binds(self.app)  # the repository's config, less keys that run code
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
        watch: DiskWatch | None = None
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
                        preexec_fn=lambda: set_rlimits(rlimits),
                        **as_user(self.uid),
                    )
                finally:
                    for fd in (argfd, status_w, go_r):
                        os.close(fd)
                deadline = start + timeout
                # The supervisor says it is ready (nothing of the command runs yet): the whole
                # sandbox goes into a memory cgroup, then the command starts.
                ready = read_some(status_r, deadline)
                if ready[:1] == b"R":
                    status = ready[1:]
                    cgroup = self._verifier_cgroup()
                    if cgroup is not None:
                        ooms = cgroup.oom_kills()
                        cgroup.add(descendant_pids(proc.pid))
                    if app_writable:
                        watch = DiskWatch(self, proc)
                    try:
                        os.write(go_w, b"g")
                    except OSError:
                        pass
                code: int | None = wait_until(proc, deadline)
                if code is None:
                    timed_out = True
                    kill_bwrap([proc])
                if watch is not None:
                    watch.stop()
                status += read_some(status_r, time.monotonic() + 1, until_eof=True)
                stdout, stdout_total = head_tail(out, lim.head_bytes, lim.tail_bytes)
                stderr, stderr_total = head_tail(err, lim.head_bytes, lim.tail_bytes)
        finally:
            for fd in (status_r, go_w):
                os.close(fd)
            if cgroup is not None:  # kept for the next verification (removed at close)
                memory_limit = cgroup.oom_kills() > ooms
        report = supervisor_report(status)
        findings: list[str] = []
        sig = signal_name(code)
        if report is None:
            if not timed_out:
                findings.append("the verifier's supervisor gave no report (it was killed)")
        else:
            code = report["code"] if report.get("signal") is None else -int(report["signal"])
            sig = signal_name(code)
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


def _mac(key: bytes, kind: bytes, body: bytes) -> bytes:
    return hmac.new(key, kind + body, hashlib.sha256).hexdigest().encode()
