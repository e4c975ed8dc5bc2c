"""Root file systems built from a Dockerfile's steps, without a container registry.

``build_rootfs(base, steps, context)`` makes the file system a task's ``environment/Dockerfile``
describes and returns a :class:`RootFS` whose ``path`` a :class:`~.sandbox.Sandbox` runs over
(read-only, with a fresh writable ``/app``):

* ``FROM`` is mapped to the nearest Debian base (:func:`~.rootfs_base.map_base`: ``debian:*``, ``ubuntu:*``,
  ``python:X.Y*``, ``buildpack-deps:*``, the toolchain images ``gcc``, ``golang``, ``node``,
  ``eclipse-temurin`` and ``openjdk`` (:data:`~.rootfs_base.TOOLCHAINS`: the suite whose own package of the
  tool is nearest) and Terminal-Bench's ``t-bench/python-3-13`` / ``ubuntu-24-04`` images);
  the base is made with ``mmdebstrap`` from Debian's package registry (nothing is pulled
  from a container registry) and cached on its own;
* ``RUN`` lines run at build time as root (Docker's default capabilities only) in a
  bubblewrap sandbox over the file system being built, sharing the host's network, which
  reaches only the package registries (apt, pip and uv are pointed at the host's mirror and
  CA bundle: :func:`~.rootfs_steps.build_environment`); a ``RUN`` naming a URL outside the
  package registries is :class:`~.rootfs_base.Unbuildable` before anything is built
  (:func:`~.rootfs_steps.check_buildable`);
* ``COPY`` copies build-context files in (inside the build sandbox, so no symlink the build
  made can point a copy at the host); ``ENV``, ``WORKDIR`` and ``USER`` apply to later steps
  and are recorded for episodes (:attr:`RootFS.env`, ``workdir``, ``user``);
* the result is cached by content hash (base, steps, the bytes of every copied file) under
  :func:`~.rootfs_cache.cache_dir` (:mod:`~.rootfs_cache`); a failing step raises
  :class:`BuildFailed` naming its Dockerfile line.

The Dockerfile itself is parsed elsewhere (``envs/terminal/dockerfile.py``); this module
takes :class:`~.rootfs_steps.BuildStep` values and builds: the base (:func:`build_base`), the
build sandbox each step runs in (its capabilities, mounts and network), :func:`build_rootfs`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness_gym.envs.terminal.rootfs_base import Base, Unbuildable, debian_mirror, map_base
from harness_gym.envs.terminal.rootfs_cache import (
    CACHE_VARIABLE,
    RootFS,
    base_key,
    cache_dir,
    cache_key,
    disk_usage,
    locked,
    remove_path,
)
from harness_gym.envs.terminal.rootfs_steps import (
    CA_IN_BUILD,
    BuildStep,
    build_environment,
    ca_bundle,
    copy_sources,
)

log = logging.getLogger(__name__)


#: Capabilities a ``RUN`` keeps (Docker's default set); everything else is dropped.
BUILD_CAPS = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
)
#: Docker's default ``PATH`` of an image.
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


#: Where the build sandbox sees the build context.
CONTEXT_IN_BUILD = "/run/harness-gym/context"
#: Mount points an episode's sandbox binds over (made in every built file system).
MOUNT_POINTS = ("opt/harness-gym/runner.py", "opt/harness-gym/command-limits.sh")
MOUNT_DIRS = ("app", "home/agent", "opt/harness-gym")
STEP_TIMEOUT = 3600.0
LOG_TAIL_CHARS = 3000


class BuildFailed(RuntimeError):
    """A build step failed: ``step_index`` (0 is the base), the Dockerfile ``line`` as
    written, its ``line_number`` (0 when unknown) and the tail of the build log."""

    def __init__(self, step_index: int, line: str, log_tail: str, line_number: int = 0) -> None:
        where = f"line {line_number}: " if line_number else ""
        super().__init__(f"build failed at step {step_index} ({where}{line}): {log_tail.strip()[-600:]}")
        self.step_index, self.line, self.log_tail, self.line_number = step_index, line, log_tail, line_number


class _Log:
    """The build log: a file, the module's logger, and the tail kept for errors."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file = open(path, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
        self.tail = ""

    def say(self, text: str) -> None:
        log.info("%s", text)
        self.write(f"# {text}\n")

    def write(self, text: str) -> None:
        self.file.write(text)
        self.file.flush()
        self.tail = (self.tail + text)[-LOG_TAIL_CHARS:]

    def close(self) -> None:
        self.file.close()


def _run_logged(argv: list[str], logbook: _Log, timeout: float, env: Mapping[str, str] | None = None) -> int:
    """Run ``argv`` with its output into the log; its exit code (124 on timeout)."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(env) if env is not None else {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
        cwd="/",
        start_new_session=True,
    )
    assert proc.stdout is not None
    expired: list[bool] = []

    def kill() -> None:  # also when the step hangs without printing anything
        expired.append(True)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, 9)

    timer = threading.Timer(timeout, kill)
    timer.daemon = True
    timer.start()
    try:
        for raw in proc.stdout:
            logbook.write(raw.decode("utf-8", "replace"))
        code = proc.wait()
    finally:
        timer.cancel()
    if expired:
        logbook.write(f"\n(timed out after {timeout:g} s)\n")
        return 124
    return code


def _require_tools() -> None:
    if os.geteuid() != 0:
        raise Unbuildable(
            "building a root file system needs root (mmdebstrap --mode=root, and RUN steps as root "
            "with Docker's capabilities); run `harness-gym rootfs build` as root, then use the cache "
            f"({CACHE_VARIABLE}) as any user"
        )
    for tool, package in (("mmdebstrap", "mmdebstrap"), ("bwrap", "bubblewrap")):
        if shutil.which(tool) is None:
            raise Unbuildable(
                f"building a root file system needs `{tool}`: apt-get install {package} "
                "(scripts/system-deps.sh)"
            )


def build_base(base: Base, cache: Path | None = None, logbook: _Log | None = None) -> Path:
    """The root of ``base`` made with mmdebstrap (cached under ``bases/``)."""
    _require_tools()
    folder = Path(cache or cache_dir()) / "bases" / base_key(base)
    root = folder / "root"
    with locked(folder.parent / f".lock-{folder.name}"):
        if (folder / "recipe.json").is_file() and root.is_dir():
            return root
        tmp = folder.parent / f".tmp-{folder.name}-{os.getpid()}"
        remove_path(tmp)
        tmp.mkdir(parents=True)
        own = logbook or _Log(folder.parent / f"{folder.name}.log")
        own.say(
            f"making Debian {base.suite} with mmdebstrap from {debian_mirror()}: {', '.join(base.packages)}"
        )
        argv = [
            "mmdebstrap",
            "--mode=root",
            "--variant=apt",
            "--format=directory",
            f"--include={','.join(base.packages)}",
            base.suite,
            str(tmp / "root"),
            debian_mirror(),
        ]
        code = _run_logged(argv, own, STEP_TIMEOUT)
        if code != 0:
            remove_path(tmp)
            raise BuildFailed(0, f"FROM {base.image} (mmdebstrap {base.suite})", own.tail)
        if base.python_image:  # python:X images let pip and uv install into the system Python
            for marker in (tmp / "root" / "usr" / "lib").glob("python3*/EXTERNALLY-MANAGED"):
                marker.unlink()
        (tmp / "recipe.json").write_text(json.dumps(base.recipe(debian_mirror()), indent=1))
        remove_path(folder)
        tmp.rename(folder)
        if logbook is None:
            own.close()
        return root


def _env_pairs(step: BuildStep) -> list[tuple[str, str]]:
    out = []
    args = list(step.args)
    if len(args) >= 2 and "=" not in args[0]:  # the legacy form: ENV KEY value words
        return [(args[0], " ".join(args[1:]))]
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not key:
            raise Unbuildable(f"{step.shown}: ENV needs KEY=VALUE")
        out.append((key, value))
    return out


def _absolute(path: str, workdir: str) -> str:
    return os.path.normpath(path if path.startswith("/") else os.path.join(workdir, path))


class _Builder:
    """Runs the steps over one file system being built."""

    def __init__(self, root: Path, context: Path | None, logbook: _Log, timeout: float) -> None:
        self.root, self.context, self.log, self.timeout = root, context, logbook, timeout
        self.env: dict[str, str] = {"PATH": IMAGE_PATH}
        self.workdir, self.user = "/", "root"

    def sandbox(self, command: str, *, context: bool = False, as_user: bool = True) -> int:
        """Run ``command`` with ``/bin/sh -c`` as root over the build's root, host network."""
        args = ["bwrap", "--bind", str(self.root), "/", "--dev", "/dev", "--proc", "/proc"]
        # /tmp is the image's own (as in `docker build`: a COPY into /tmp is there for the next
        # RUN); /run is private (the CA bundle and the context are mounted there)
        (self.root / "tmp").mkdir(mode=0o1777, exist_ok=True)
        args += ["--tmpfs", "/run"]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        args += ["--hostname", "buildkitsandbox", "--die-with-parent", "--new-session", "--clearenv"]
        args += ["--cap-drop", "ALL"]
        for cap in BUILD_CAPS:
            args += ["--cap-add", cap]
        if os.path.isfile("/etc/resolv.conf"):
            args += ["--ro-bind", os.path.realpath("/etc/resolv.conf"), "/etc/resolv.conf"]
        bundle = ca_bundle()
        if bundle:
            args += ["--ro-bind", bundle, CA_IN_BUILD]
        if context and self.context is not None:
            args += ["--ro-bind", str(self.context), CONTEXT_IN_BUILD]
        env = {"HOME": "/root", "HOSTNAME": "buildkitsandbox", **build_environment(), **self.env}
        for key, value in env.items():
            args += ["--setenv", key, value]
        workdir = self.workdir if (self.root / self.workdir.lstrip("/")).is_dir() else "/"
        args += ["--chdir", workdir, "--"]
        if as_user and self.user not in ("root", "0", "0:0"):
            args += ["setpriv", *_setpriv_ids(self.root, self.user), "--init-groups", "--"]
        args += ["/bin/sh", "-c", command]
        return _run_logged(args, self.log, self.timeout)

    def step(self, index: int, step: BuildStep) -> None:
        self.log.say(f"step {index}: {step.shown}")
        if step.kind == "RUN":
            code = self.sandbox(step.args[0])
        elif step.kind == "ENV":
            self.env.update(_env_pairs(step))
            code = 0
        elif step.kind == "WORKDIR":
            self.workdir = _absolute(step.args[0], self.workdir)
            code = self.sandbox(f"mkdir -p -- {_quote(self.workdir)}", as_user=False)
        elif step.kind == "USER":
            self.user = step.args[0]
            try:
                _setpriv_ids(self.root, self.user)
            except LookupError as err:
                raise BuildFailed(index, step.shown, str(err), step.line) from None
            code = 0
        else:
            code = self.copy(step)
        if code != 0:
            raise BuildFailed(index, step.shown, self.log.tail or f"exit code {code}", step.line)

    def copy(self, step: BuildStep) -> int:
        assert self.context is not None, "COPY needs a build context"
        sources = copy_sources(step, self.context)
        dest = step.args[-1]
        target = _absolute(dest, self.workdir)
        into = dest.endswith("/") or len(sources) > 1
        lines = []
        for rel in sources:
            src = f"{CONTEXT_IN_BUILD}/{rel}"
            if (self.context / rel).is_dir() and not (self.context / rel).is_symlink():
                lines.append(
                    f"mkdir -p -- {_quote(target)} && "
                    f"cp -R -P --preserve=mode,timestamps -- {_quote(src)}/. {_quote(target)}/"
                )
            elif into:
                lines.append(
                    f"mkdir -p -- {_quote(target)} && "
                    f"cp -P --preserve=mode,timestamps -- {_quote(src)} {_quote(target)}/"
                )
            else:
                lines.append(
                    f"mkdir -p -- {_quote(os.path.dirname(target))} && "
                    f"cp -P --preserve=mode,timestamps -- {_quote(src)} {_quote(target)}"
                )
        chown = next((a.split("=", 1)[1] for a in step.args if a.startswith("--chown=")), None)
        if chown:
            lines.append(f"chown -R -- {_quote(chown)} {_quote(target)}")
        return self.sandbox(" && ".join(lines), context=True, as_user=False)

    def finish(self) -> None:
        """Make the mount points an episode's sandbox binds over. Inside the build sandbox:
        a path the steps made a symlink (``/opt -> /etc``) then resolves in the built system,
        never on the host."""
        dirs = " ".join(_quote("/" + d) for d in MOUNT_DIRS)
        files = " ".join(_quote("/" + f) for f in MOUNT_POINTS)
        script = (
            f'set -e; for d in {dirs}; do if [ -L "$d" ]; then rm -f "$d"; fi; mkdir -p "$d"; done; '
            f'for f in {files}; do rm -rf "$f"; : > "$f"; chmod 444 "$f"; done; '
            "chmod 755 /opt/harness-gym /home/agent"
        )
        code = self.sandbox(script, as_user=False)
        if code != 0:
            raise BuildFailed(0, "(the sandbox's mount points)", self.log.tail or f"exit code {code}")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _setpriv_ids(root: Path, user: str) -> list[str]:
    """``setpriv`` options for ``user[:group]`` (names looked up in the built /etc)."""
    name, _, group = user.partition(":")

    def lookup(table: str, key: str) -> str | None:
        if key.isdigit():
            return key
        with contextlib.suppress(OSError):
            for line in (root / "etc" / table).read_text().splitlines():
                parts = line.split(":")
                if parts and parts[0] == key and len(parts) > 3:
                    return parts[2] if table == "group" else f"{parts[2]}:{parts[3]}"
        return None

    found = lookup("passwd", name)
    if found is None:
        raise LookupError(f"no user {name!r} in the built /etc/passwd")
    uid, _, gid = found.partition(":")
    if group:
        gid = lookup("group", group) or ""
    return [f"--reuid={uid}", f"--regid={gid or uid}"]


def build_rootfs(
    base: str,
    steps: Sequence[BuildStep],
    context: str | os.PathLike[str] | None,
    *,
    progress: bool = True,
    cache: str | os.PathLike[str] | None = None,
    step_timeout: float = STEP_TIMEOUT,
    on_log: Callable[[str], None] | None = None,
) -> RootFS:
    """The root file system ``FROM base`` + ``steps`` make (built once, then from the cache).

    Raises :class:`Unbuildable` when it needs what cannot be had, :class:`BuildFailed`
    naming the failing step. A progress bar shows the steps, the time and the cache size."""
    from harness_gym.progress import progress_bar

    context_path = Path(context).resolve() if context is not None else None
    steps = list(steps)
    key = cache_key(base, steps, context_path)
    mapped = map_base(base)
    cache_path = Path(cache or cache_dir())
    folder = cache_path / key
    with locked(cache_path / f".lock-{key}"):
        if (folder / "meta.json").is_file() and (folder / "root").is_dir():
            (folder / "last-used").touch()
            return RootFS.load(folder)
        _require_tools()
        tmp = cache_path / f".tmp-{key}-{os.getpid()}"
        remove_path(tmp)
        tmp.mkdir(parents=True)
        logbook = _Log(tmp / "build.log")
        start = time.monotonic()
        bar = progress_bar(len(steps) + 1, f"rootfs {key[:8]}", unit="step", enabled=progress)
        try:
            logbook.say(mapped.note)
            if on_log:
                on_log(mapped.note)
            base_root = build_base(mapped, cache_path, logbook)
            _tick(bar, cache_path)
            root = tmp / "root"
            done = subprocess.run(
                ["cp", "-a", "--reflink=auto", "--", str(base_root), str(root)],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise BuildFailed(0, f"FROM {base}", done.stderr)
            builder = _Builder(root, context_path, logbook, step_timeout)
            for index, step in enumerate(steps, start=1):
                builder.step(index, step)
                _tick(bar, cache_path)
            builder.finish()
            seconds = time.monotonic() - start
            built = RootFS(
                key=key,
                path=folder / "root",
                image=base,
                base={"suite": mapped.suite, "python": mapped.python, "note": mapped.note},
                env=dict(builder.env),
                workdir=builder.workdir,
                user=builder.user,
                steps=[s.shown for s in steps],
                build_seconds=round(seconds, 2),
                size_bytes=disk_usage(root),
                created=time.time(),
            )
            logbook.say(f"built in {seconds:.1f} s, {built.size_bytes / 1e6:.0f} MB")
            (tmp / "meta.json").write_text(json.dumps(built.meta(), indent=1))
        except BaseException:
            logbook.close()
            failed = cache_path / f"{key}.failed.log"
            with contextlib.suppress(OSError):
                shutil.copyfile(logbook.path, failed)
            remove_path(tmp)
            raise
        finally:
            if bar is not None:
                bar.close()
        logbook.close()
        remove_path(folder)
        tmp.rename(folder)
        (folder / "last-used").touch()
        (cache_path / f"{key}.failed.log").unlink(missing_ok=True)
        return RootFS.load(folder)


def _tick(bar: Any, cache: Path) -> None:
    if bar is not None:
        bar.set_postfix_str(f"cache {disk_usage(cache) / 1e9:.2f} GB", refresh=False)
        bar.update(1)
