"""Where a terminal episode's commands run: the seam between a task and its execution engine.

A terminal task talks to its episode through :class:`ExecutionBackend` (run a command, read
or write a file, stop the agent, run the verifier, close). Two backends:

* ``bwrap`` (the default): :class:`~harness_gym.envs.terminal.sandbox.Sandbox`, a bubblewrap
  sandbox on this machine, over the host's system or a built root file system;
* ``harbor``: :class:`HarborBackend`, any environment of the ``harbor`` package (docker,
  podman, daytona, modal, e2b, ...; ``harbor.environments.base.BaseEnvironment``) driven
  through its ``exec`` / ``upload_dir`` / ``download_dir``: harness-gym's harness, presets
  and verifier loop; Harbor's engine, so the same harnesses run at scale.

``open_backend(name_or_factory, root, limits, ...)`` makes one for an episode directory.
"""

from __future__ import annotations

import asyncio
import base64
import shlex
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from harness_gym.envs.terminal.sandbox import Sandbox
from harness_gym.envs.terminal.sandbox_limits import CommandResult, SandboxLimits
from harness_gym.envs.terminal.sandbox_verifier import VERIFIER_ENV
from harness_gym.envs.terminal.sandbox_view import APP

T = TypeVar("T")


@runtime_checkable
class ExecutionBackend(Protocol):
    """What a terminal task needs of the place its episode runs (``Sandbox`` is one).

    ``root`` is the episode's host directory: ``root/app`` is the host copy of ``/app`` that
    host-side verifiers and snapshots read (a remote backend syncs it on :meth:`prepare` and
    :meth:`stop_agent`)."""

    root: Path
    app: Path
    limits: SandboxLimits

    def prepare(self) -> None:
        """Make the episode's ``/app`` what the host copy holds (after set-up or a restore)."""

    def run(self, command: str, persistent: bool = False, timeout: float | None = None) -> CommandResult:
        """Run an agent command with bash in ``/app`` (or in the persistent shell)."""

    def read_file(self, path: str) -> dict[str, Any]:
        """``{"ok": True, "content": str}`` or ``{"ok": False, "error": str}``."""

    def write_file(self, path: str, content: str) -> dict[str, Any]:
        """``{"ok": True}`` or ``{"ok": False, "error": str}``."""

    def reset_shell(self) -> None:
        """Drop the persistent shell's state and kill the agent's processes."""

    def stop_agent(self) -> None:
        """Kill every agent process (and bring ``/app`` back to the host copy)."""

    def run_verifier(
        self,
        command: str,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        binds: tuple[tuple[Path, str, bool], ...] = (),
        app_writable: bool = False,
        cwd: str = APP,
    ) -> CommandResult:
        """Run a verifier's command where the agent can no longer act; ``binds`` are (host
        folder, path, writable) mounts whose writable ones come back to the host."""

    def close(self) -> None:
        """Stop everything the episode started."""


BackendFactory = Callable[..., ExecutionBackend]


Binds = tuple[tuple[Path, str, bool], ...]


def bwrap_backend(
    root: Path,
    limits: SandboxLimits | None = None,
    *,
    rootfs: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    binds: Binds = (),
) -> ExecutionBackend:
    """The default backend: a bubblewrap :class:`Sandbox` on this machine."""
    return Sandbox(root, limits, binds=binds, rootfs=rootfs, env=dict(env or {}))


BACKENDS: dict[str, BackendFactory] = {"bwrap": bwrap_backend}


def open_backend(
    backend: str | BackendFactory,
    root: Path,
    limits: SandboxLimits | None = None,
    *,
    rootfs: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    binds: Binds = (),
) -> ExecutionBackend:
    """The backend ``backend`` names (``"bwrap"``) or makes (a factory taking ``root``,
    ``limits``, ``rootfs=``, ``env=``, ``binds=``), for the episode directory ``root``;
    ``binds`` are (host folder, path, writable) folders the agent sees (e.g. ``/solution``)."""
    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise ValueError(
                f"unknown terminal backend {backend!r}: use one of {sorted(BACKENDS)} or a factory "
                "(e.g. HarborBackend.factory(make_environment))"
            )
        backend = BACKENDS[backend]
    return backend(root, limits, rootfs=rootfs, env=env, binds=binds)


# -- Harbor's environments -------------------------------------------------------------------


class _Loop:
    """An event loop on its own thread, so that Harbor's async API serves synchronous calls
    (also from code that already runs a loop)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="hg-harbor-loop", daemon=True)
        self.thread.start()

    def call(self, make: Callable[[], Awaitable[T]], timeout: float | None) -> T:
        async def wrapped() -> T:
            return await make()

        future = asyncio.run_coroutine_threadsafe(wrapped(), self.loop)
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout} s") from None

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


#: Where the emulated persistent shell keeps its working directory and exported variables.
STATE_DIR = "/tmp/.hg-shell"


def _cap(text: str, head: int, tail: int) -> tuple[str, int, int]:
    """(shown text, omitted bytes, total bytes) of an output, head and tail kept."""
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= head + tail:
        return text, 0, len(data)
    omitted = len(data) - head - tail
    shown = (
        data[:head].decode("utf-8", "replace")
        + f"\n[... {omitted} bytes omitted ...]\n"
        + data[-tail:].decode("utf-8", "replace")
    )
    return shown, omitted, len(data)


def _emptied(path: str) -> str:
    """A command that leaves ``path`` an empty folder (also when it is a mount point)."""
    quoted = shlex.quote(path)
    return f"mkdir -p {quoted} && find {quoted} -mindepth 1 -delete"


class HarborBackend:
    """An episode in a Harbor environment (``harbor.environments.base.BaseEnvironment``).

    ``environment`` is built by Harbor (e.g. with
    ``harbor.environments.factory.EnvironmentFactory.create_environment``, see
    :meth:`from_task_dir`); anything with its async ``start(force_build)``,
    ``exec(command, cwd, env, timeout_sec, user)`` (returning ``stdout``, ``stderr``,
    ``return_code``), ``upload_dir``, ``download_dir`` and ``stop(delete)`` serves. Each command
    is one ``exec`` in ``/app``; the persistent shell is emulated (the working directory and
    exported variables carry over through ``/tmp/.hg-shell``). Containment is the engine's:
    the sandbox's limits and threat model (docs/terminal.md) are bwrap's, and a Harbor
    environment gives what its provider gives (Harbor runs the agent as root, and its
    verifier in the agent's own container).
    """

    def __init__(
        self,
        environment: Any,
        root: Path,
        limits: SandboxLimits | None = None,
        *,
        env: Mapping[str, str] | None = None,
        binds: Binds = (),
        user: str | int | None = None,
        force_build: bool = False,
    ) -> None:
        self.environment = environment
        self.root = Path(root)
        self.app = self.root / "app"
        self.home = self.root / "home"
        self.limits = limits or SandboxLimits()
        self.env = dict(env or {})
        #: Host folders copied into the environment (again whenever their files change).
        self.binds = tuple((Path(h), t, w) for h, t, w in binds)
        self._bind_state: dict[str, tuple[Any, ...]] = {}
        self.user = user
        self.force_build = force_build
        self._loop: _Loop | None = None
        self._started = False
        self._uploaded = False
        self.commands = 0

    @classmethod
    def factory(cls, make_environment: Callable[[Path], Any], **options: Any) -> BackendFactory:
        """A backend factory for tasks: ``make_environment(root)`` builds the Harbor environment
        of one episode (``rootfs`` is not used: the environment brings its own image)."""

        def make(
            root: Path,
            limits: SandboxLimits | None = None,
            *,
            rootfs: Any = None,
            env: Mapping[str, str] | None = None,
            binds: Binds = (),
        ) -> ExecutionBackend:
            del rootfs
            return cls(make_environment(root), root, limits, env=env, binds=binds, **options)

        return make

    @staticmethod
    def from_task_dir(
        task_dir: str | Path, environment_type: str, trial_dir: str | Path, **kwargs: Any
    ) -> Any:
        """A Harbor environment for a Harbor task folder (needs ``pip install harbor``, Python
        >= 3.12): ``harbor.models.task.task.Task`` reads the folder,
        ``harbor.models.trial.paths.TrialPaths`` names the trial's output folder, and
        ``EnvironmentFactory.create_environment`` builds ``environment_type`` ("docker",
        "podman", "daytona", "modal", ...) as ``harbor.trial.trial.Trial`` does."""
        try:
            from harbor.environments.factory import EnvironmentFactory
            from harbor.models.environment_type import EnvironmentType
            from harbor.models.task.task import Task
            from harbor.models.trial.paths import TrialPaths
        except ImportError as err:
            raise ImportError(
                f"the Harbor backend needs the harbor package (Python >= 3.12): pip install harbor ({err})"
            ) from None
        task = Task(task_dir)
        paths = TrialPaths(Path(trial_dir))
        paths.mkdir()
        return EnvironmentFactory.create_environment(
            type=EnvironmentType(environment_type),
            environment_dir=task.paths.environment_dir,
            environment_name=task.short_name,
            session_id=f"{task.short_name}__harness-gym__env",
            trial_paths=paths,
            task_env_config=task.config.environment,
            **kwargs,
        )

    # -- plumbing ---------------------------------------------------------------------------

    def _call(self, make: Callable[[], Awaitable[T]], timeout: float | None = None) -> T:
        if self._loop is None:
            self._loop = _Loop()
        return self._loop.call(make, timeout)

    def _start(self) -> None:
        if not self._started:
            self._call(lambda: self.environment.start(force_build=self.force_build))
            self._started = True
        if not self._uploaded:
            self._upload_app()
        self._sync_binds()

    def _sync_binds(self) -> None:
        """Copy each bind's host folder in when its files changed since the last copy (a
        Harbor environment has no bind mounts: e.g. the oracle's ``/solution`` is uploaded)."""
        for host, target, _ in self.binds:
            state = tuple(
                (str(p.relative_to(host)), p.stat().st_size, p.stat().st_mtime_ns)
                for p in sorted(host.rglob("*"))
                if p.is_file() and not p.is_symlink()
            )
            if self._bind_state.get(target) != state:
                self._exec(_emptied(target), 60, cwd="/")
                if state:
                    self._call(lambda h=host, t=target: self.environment.upload_dir(h, t))
                self._bind_state[target] = state

    def _exec(
        self, command: str, timeout: float, cwd: str = APP, env: Mapping[str, str] | None = None
    ) -> tuple[str, str, int | None, bool]:
        """(stdout, stderr, exit code, timed out) of one ``exec``."""
        try:
            res = self._call(
                lambda: self.environment.exec(
                    command,
                    cwd=cwd,
                    env=dict(env if env is not None else self.env) or None,
                    timeout_sec=max(1, int(round(timeout))),
                    user=self.user,
                ),
                timeout + 30,
            )
        except (TimeoutError, asyncio.TimeoutError):
            return "", f"timed out after {timeout:g} s", None, True
        except RuntimeError as err:  # Harbor's docker environment: "Command timed out after N seconds"
            if "timed out" in str(err):
                return "", str(err), None, True
            return "", f"the Harbor environment failed: {err}", None, False
        return res.stdout or "", res.stderr or "", res.return_code, False

    def _upload_app(self) -> None:
        self._exec(_emptied(APP), 60, cwd="/")
        if self.app.is_dir() and any(self.app.iterdir()):
            self._call(lambda: self.environment.upload_dir(self.app, APP))
        self._uploaded = True

    def _download_app(self) -> None:
        from harness_gym.envs.terminal.episode_dirs import remove_tree

        for child in list(self.app.iterdir()) if self.app.is_dir() else []:
            remove_tree(child)
        self.app.mkdir(parents=True, exist_ok=True)
        self._call(lambda: self.environment.download_dir(APP, self.app))

    def _result(self, command: str, out: str, err: str, code: int | None, timed_out: bool) -> CommandResult:
        lim = self.limits
        out, out_omitted, out_total = _cap(out, lim.head_bytes, lim.tail_bytes)
        err, err_omitted, err_total = _cap(err, lim.head_bytes, lim.tail_bytes)
        return CommandResult(
            command=command,
            stdout=out,
            stderr=err,
            exit_code=code,
            stdout_omitted=out_omitted,
            stderr_omitted=err_omitted,
            stdout_bytes=out_total,
            stderr_bytes=err_total,
            timed_out=timed_out,
        )

    # -- the ExecutionBackend API -------------------------------------------------------------

    def prepare(self) -> None:
        self.app.mkdir(parents=True, exist_ok=True)
        self._uploaded = False
        if self._started:
            self._upload_app()

    def run(self, command: str, persistent: bool = False, timeout: float | None = None) -> CommandResult:
        timeout = self.limits.timeout if timeout is None else timeout
        self.commands += 1
        self._start()
        script = command
        if persistent:  # one exec per command: carry the cwd and exported variables over
            state = shlex.quote(STATE_DIR)
            script = (
                f'mkdir -p {state}; cd "$(cat {state}/cwd 2>/dev/null || echo {APP})" 2>/dev/null '
                f"|| cd {APP}; "
                f". {state}/env 2>/dev/null; {command}\n"
                f"__hg_rc=$?; pwd > {state}/cwd; export -p > {state}/env; exit $__hg_rc"
            )
        out, err, code, timed_out = self._exec(f"bash -c {shlex.quote(script)}", timeout)
        return self._result(command, out, err, code, timed_out)

    def read_file(self, path: str) -> dict[str, Any]:
        self._start()
        limit = self.limits.max_file_bytes
        out, err, code, _ = self._exec(f"head -c {limit + 1} -- {shlex.quote(path)} | base64 -w0", 30)
        if code != 0 or err.strip():
            return {"ok": False, "error": f"cannot read {path!r}: {err.strip() or f'exit code {code}'}"}
        data = base64.b64decode(out.strip() or b"")
        return {
            "ok": True,
            "content": data[:limit].decode("utf-8", "replace"),
            "truncated": len(data) > limit,
            "binary": b"\x00" in data[:limit],
        }

    def write_file(self, path: str, content: str) -> dict[str, Any]:
        self._start()
        data = base64.b64encode(content.encode("utf-8", "surrogateescape")).decode()
        quoted = shlex.quote(path)
        script = f'mkdir -p -- "$(dirname -- {quoted})" && printf %s {data} | base64 -d > {quoted}'
        _, err, code, _ = self._exec(script, 30)
        if code != 0:
            return {"ok": False, "error": f"cannot write {path!r}: {err.strip() or f'exit code {code}'}"}
        return {"ok": True}

    def reset_shell(self) -> None:
        if self._started:
            self._exec(f"rm -rf {STATE_DIR}", 30, cwd="/")

    def stop_agent(self) -> None:
        """Harbor's environments keep one container: kill every process but the exec's own
        (``kill -9 -1`` as the exec user), then copy ``/app`` back for host-side checks."""
        if not self._started:
            return
        self._exec("kill -9 -1 2>/dev/null; true", 30, cwd="/")
        self._download_app()

    def run_verifier(
        self,
        command: str,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        binds: tuple[tuple[Path, str, bool], ...] = (),
        app_writable: bool = False,
        cwd: str = APP,
    ) -> CommandResult:
        """As Harbor's verifier does (``harbor/verifier/verifier.py``): upload each bind's
        folder, ``exec`` the command in the same environment, download the writable ones."""
        del app_writable  # one container: /app is as the agent left it, writable, as in Harbor
        timeout = self.limits.timeout if timeout is None else timeout
        self._start()
        for host, target, _ in binds:
            self._exec(_emptied(target), 60, cwd="/")
            if any(Path(host).iterdir()):
                self._call(lambda h=host, t=target: self.environment.upload_dir(h, t))
        merged = {**VERIFIER_ENV, **self.env, **(env or {})}
        merged.pop("HOME", None)  # the container's own home (Harbor's verifier sets none)
        out, err, code, timed_out = self._exec(
            f"bash --noprofile --norc -c {shlex.quote(command)}", timeout, cwd=cwd, env=merged
        )
        for host, target, writable in binds:
            if writable:
                self._call(lambda h=host, t=target: self.environment.download_dir(t, h))
        return self._result(command, out, err, code, timed_out)

    def close(self) -> None:
        if self._started:
            try:
                self._call(lambda: self.environment.stop(delete=True), 300)
            finally:
                self._started = False
        if self._loop is not None:
            self._loop.close()
            self._loop = None
