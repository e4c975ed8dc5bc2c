"""Harbor (Terminal-Bench 2) task folders, run in the same bubblewrap sandbox.

A Harbor task is a folder with ``instruction.md``, ``task.toml``, ``environment/`` (a
``Dockerfile`` and its build context), ``tests/test.sh`` (the verifier, which writes the
reward to ``/logs/verifier/reward.txt`` or ``reward.json``) and ``solution/solve.sh`` (the
reference solution). :func:`load_harbor_task` turns a folder into a
:class:`~harness_gym.envs.terminal.task.TerminalTask` class when its environment needs
nothing the sandbox lacks, and raises :class:`UnsupportedHarborTask` saying why otherwise.

What the sandbox reproduces of a Dockerfile: ``FROM`` (recorded; the sandbox's Debian tools
stand in for the image), ``WORKDIR /app``, ``COPY``/``ADD`` of build-context files into
``/app``, and ``RUN`` commands that neither install packages, fetch from the network, nor
start services (they run in the sandbox, without network, when an episode starts).
Anything else is a reason to reject the task: package installs, ``ENV``, ``USER``,
services (``EXPOSE``, ``CMD``, ``ENTRYPOINT``, ``HEALTHCHECK``, a ``docker-compose`` file),
a prebuilt ``docker_image``, GPUs or MCP servers in ``task.toml``, copies outside ``/app``.

Verification follows Harbor: after the agent submits, every agent process is killed and a
fresh one-shot verifier sandbox (:meth:`Sandbox.run_verifier`: no agent home, a fixed
environment, git hooks and fsmonitor off) sees the final ``/app``, a copy of the task's
``tests/`` at ``/tests`` (read-only; the agent never sees them) and an empty writable
``/logs``; it runs ``bash /tests/test.sh`` and the episode succeeds when the reward is 1.
The reward file is read without following any symlink. The oracle runs ``solve.sh`` as one
command. Every seed gives the same instance (a Harbor task is one instance). A task folder
whose files are symlinks (``tests/``, ``instruction.md``, ``solve.sh``, ...) is rejected: it
could pull host files into the instance or the verdict.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
from pathlib import Path
from typing import Any

import numpy as np

from harness_gym.envs.terminal.sandbox import SandboxLimits, remove_tree, walk_tree
from harness_gym.envs.terminal.task import TerminalTask

REQUIRED = ("instruction.md", "task.toml", "tests/test.sh")
#: RUN commands the sandbox cannot reproduce: package managers, network fetches, services.
UNSUPPORTED_RUN = re.compile(
    r"\b(apt-get|apt|aptitude|dpkg|pip3?|pipx|uv|poetry|conda|mamba|npm|npx|yarn|pnpm|gem|cargo|"
    r"go\s+(?:get|install)|apk|yum|dnf|zypper|curl|wget|git\s+clone|service|systemctl|"
    r"docker|snap)\b"
)
SERVICE_INSTRUCTIONS = ("EXPOSE", "CMD", "ENTRYPOINT", "HEALTHCHECK", "VOLUME", "STOPSIGNAL")
IGNORED_INSTRUCTIONS = ("LABEL", "ARG", "MAINTAINER", "ONBUILD", "SHELL")
#: Longest a verifier may run here, whatever task.toml asks.
MAX_VERIFIER_SECONDS = 120.0
#: Files copied into an instance at most (a build context is small in the tasks this takes).
MAX_CONTEXT_BYTES = 16 << 20
#: The most a task's tests/ may hold.
MAX_TESTS_BYTES = 64 << 20


class UnsupportedHarborTask(ValueError):
    """A Harbor task folder this sandbox cannot run; the message says why."""


def load_harbor_task(folder: str | Path) -> type[TerminalTask]:
    """A TerminalTask class for one Harbor task folder, or :class:`UnsupportedHarborTask`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UnsupportedHarborTask(f"{folder} is not a folder")
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    if missing:
        raise UnsupportedHarborTask(
            f"{folder.name}: missing {', '.join(missing)} (a Harbor task needs {list(REQUIRED)})"
        )
    for rel in (*REQUIRED, "solution/solve.sh", "environment/Dockerfile", "environment", "solution"):
        _no_symlink(folder, rel)
    _tests_files(folder / "tests", folder.name)
    toml = _toml()
    try:
        config = toml.loads((folder / "task.toml").read_text(encoding="utf-8"))
    except (toml.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UnsupportedHarborTask(f"{folder.name}: task.toml is not valid TOML ({err})") from None
    _check_config(folder.name, config)
    files, setup, image = _read_environment(folder)
    solve = folder / "solution" / "solve.sh"
    verifier = config.get("verifier", {}) if isinstance(config.get("verifier"), dict) else {}
    name = "Harbor" + "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", folder.name) if p)
    attrs: dict[str, Any] = {
        "task_id": name,
        "description": _description(config, folder),
        "folder": folder.resolve(),
        "instance_files": files,
        "setup_commands": setup,
        "base_image": image,
        "instruction_text": (folder / "instruction.md").read_text(encoding="utf-8").strip() + "\n",
        "solve_script": solve.read_text(encoding="utf-8") if solve.is_file() else None,
        "verifier_timeout": min(
            float(verifier.get("timeout_sec", MAX_VERIFIER_SECONDS)), MAX_VERIFIER_SECONDS
        ),
        "max_steps": int(config.get("metadata", {}).get("max_steps", 20))
        if isinstance(config.get("metadata"), dict)
        else 20,
    }
    return type(name, (HarborTask,), attrs)


def load_harbor_dir(folder: str | Path) -> tuple[list[type[TerminalTask]], dict[str, str]]:
    """Every task folder under ``folder``: the loaded tasks, and the rejected ones with why."""
    tasks, rejected = [], {}
    for child in sorted(Path(folder).iterdir()):
        if child.is_dir() and (child / "task.toml").exists():
            try:
                tasks.append(load_harbor_task(child))
            except UnsupportedHarborTask as err:
                rejected[child.name] = str(err)
    return tasks, rejected


def register_harbor(folder: str | Path) -> list[str]:
    """Register ``harness_gym/Harbor<Name>-v0`` (takes ``harness=``) and one id per coding
    preset for every supported task under ``folder``; return the ids."""
    import gymnasium as gym

    from harness_gym.core.registry import env_id
    from harness_gym.envs.terminal import ENTRY_POINT
    from harness_gym.envs.terminal.presets import CODING_PRESETS

    tasks, _ = load_harbor_dir(folder)
    ids = []
    for task in tasks:
        for preset in (None, *CODING_PRESETS):
            new_id = env_id(task.task_id, preset)
            gym.registry.pop(new_id, None)
            gym.register(
                id=new_id,
                entry_point=ENTRY_POINT,
                kwargs={"task": task, "harness": preset or "Json"},
                disable_env_checker=False,
            )
            ids.append(new_id)
    return ids


class HarborTask(TerminalTask):
    """A Harbor task folder as a terminal task (see the module docstring)."""

    folder: Path
    instance_files: dict[str, bytes] = {}
    setup_commands: list[str] = []
    base_image = ""
    instruction_text = ""
    solve_script: str | None = None
    verifier_timeout = MAX_VERIFIER_SECONDS
    limits = SandboxLimits(timeout=30.0)

    def build(self, rng: np.random.Generator) -> None:
        self.files = dict(self.instance_files)
        self.setup = list(self.setup_commands)
        self.instruction = self.instruction_text
        self.params = {"folder": self.folder.name, "image": self.base_image}

    def solution(self) -> str:
        return self.solve_script if self.solve_script is not None else "true"

    def verify(self) -> tuple[bool, str]:
        assert self._root is not None and self._sandbox is not None
        work = self._root / "verifier"  # beside app/ and home/: never mounted for the agent
        remove_tree(work)
        tests, logs = work / "tests", work / "logs"
        try:
            _copy_tests(self.folder / "tests", tests, self.folder.name)
            (logs / "verifier").mkdir(parents=True)
            res = self._sandbox.run_verifier(
                "bash /tests/test.sh",
                timeout=self.verifier_timeout,
                binds=((tests, "/tests", False), (logs, "/logs", True)),
                app_writable=True,  # as in Harbor: a test may write next to the code it checks
            )
            reward, why = _read_reward(logs)
        finally:
            remove_tree(work)
        if reward is None:
            return False, f"{why} (test.sh exit code {res.exit_code}; {res.stdout[-200:]}{res.stderr[-200:]})"
        ok = reward >= 1.0
        return ok, "" if ok else f"reward {reward:g}: {(res.stdout + res.stderr)[-300:]}"


def _toml() -> Any:
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise ImportError("reading task.toml on Python 3.10 needs tomli: pip install tomli") from None
    return tomllib


def _read_reward(logs: Path) -> tuple[float | None, str]:
    """The reward test.sh wrote under ``logs/verifier``; no symlink is followed on the way
    (test.sh could point ``/logs/verifier`` or the file at host paths), nor a FIFO opened."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        base = os.open(logs, flags | os.O_DIRECTORY)
    except OSError:
        return None, "the verifier's /logs is gone"
    try:
        try:
            verifier = os.open("verifier", flags | os.O_DIRECTORY, dir_fd=base)
        except OSError:
            return None, "/logs/verifier is not a directory (a symlink is not followed)"
        try:
            for name in ("reward.txt", "reward.json"):
                try:
                    fd = os.open(name, flags, dir_fd=verifier)
                except OSError:
                    continue
                with os.fdopen(fd, "rb") as f:
                    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                        continue
                    text = f.read(1000).decode("utf-8", "replace").strip()
                try:
                    if name == "reward.txt":
                        return float(text.split()[0]), ""
                    data = json.loads(text)
                    return float(data["reward"] if isinstance(data, dict) else data), ""
                except (ValueError, IndexError, KeyError, TypeError):
                    return None, f"/logs/verifier/{name} holds no reward: {text[:80]!r}"
        finally:
            os.close(verifier)
    finally:
        os.close(base)
    return None, "test.sh wrote no /logs/verifier/reward.txt or reward.json"


def _no_symlink(folder: Path, rel: str) -> None:
    """Reject ``folder/rel`` when it, or a folder on the way to it, is a symlink."""
    path = folder
    for part in Path(rel).parts:
        path = path / part
        if path.is_symlink():
            raise UnsupportedHarborTask(
                f"{folder.name}: {rel} is (or lies under) a symlink, which could pull host files "
                "into the task"
            )


def _tests_files(tests: Path, name: str) -> list[tuple[str, bool]]:
    """(relative path, is a directory) of everything in ``tests/``, checked: no symlinks,
    only regular files and directories, at most :data:`MAX_TESTS_BYTES`."""
    if tests.is_symlink() or not tests.is_dir():
        raise UnsupportedHarborTask(f"{name}: tests/ is not a folder (a symlink is not followed)")
    out, total = [], 0
    for path in sorted(walk_tree(tests)):
        rel = os.path.relpath(path, tests)
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise UnsupportedHarborTask(
                f"{name}: tests/{rel} is a symlink, which could pull host files into the verdict"
            )
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise UnsupportedHarborTask(f"{name}: tests/{rel} is not a regular file")
        total += st.st_size if stat.S_ISREG(st.st_mode) else 0
        if total > MAX_TESTS_BYTES:
            raise UnsupportedHarborTask(f"{name}: tests/ is larger than {MAX_TESTS_BYTES >> 20} MB")
        out.append((rel, stat.S_ISDIR(st.st_mode)))
    return out


def _copy_tests(tests: Path, dest: Path, name: str) -> None:
    """Copy ``tests/`` without following symlinks (each file opened with ``O_NOFOLLOW``)."""
    dest.mkdir(parents=True)
    for rel, is_dir in _tests_files(tests, name):
        target = dest / rel
        if is_dir:
            target.mkdir(mode=0o755, exist_ok=True)
            continue
        fd = os.open(tests / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise UnsupportedHarborTask(f"{name}: tests/{rel} is not a regular file")
            target.write_bytes(f.read(MAX_TESTS_BYTES + 1))
            mode = os.fstat(f.fileno()).st_mode
        os.chmod(target, 0o755 if mode & 0o111 else 0o644)


def _description(config: dict[str, Any], folder: Path) -> str:
    task = config.get("task")
    if isinstance(task, dict) and task.get("description"):
        return str(task["description"])
    return f"Harbor task {folder.name}"


def _check_config(name: str, config: dict[str, Any]) -> None:
    env = config.get("environment", {})
    if not isinstance(env, dict):
        return
    if env.get("docker_image"):
        raise UnsupportedHarborTask(
            f"{name}: task.toml names a prebuilt docker_image ({env['docker_image']}), whose contents "
            "the sandbox cannot reproduce"
        )
    if int(env.get("gpus", 0) or 0) > 0:
        raise UnsupportedHarborTask(f"{name}: task.toml asks for {env['gpus']} GPU(s); the sandbox has none")
    if env.get("mcp_servers"):
        raise UnsupportedHarborTask(
            f"{name}: task.toml needs MCP servers, which are services the sandbox does not run"
        )
    if env.get("healthcheck"):
        raise UnsupportedHarborTask(f"{name}: task.toml has a healthcheck, i.e. a service to wait for")


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined."""
    out, pending = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
    if pending.strip():
        word, _, rest = pending.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _read_environment(folder: Path) -> tuple[dict[str, bytes], list[str], str]:
    """The instance files, set-up commands and base image an ``environment/`` describes."""
    env_dir = folder / "environment"
    for compose in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
        if (env_dir / compose).exists():
            raise UnsupportedHarborTask(
                f"{folder.name}: environment/{compose} defines services (containers beside the task's), "
                "which the sandbox does not run"
            )
    dockerfile = env_dir / "Dockerfile"
    if not dockerfile.is_file():
        return {}, [], ""
    files: dict[str, bytes] = {}
    setup: list[str] = []
    image, workdir = "", "/app"
    for word, args in _instructions(dockerfile.read_text(encoding="utf-8")):
        where = f"{folder.name}: environment/Dockerfile: {word} {args[:80]}"
        if word == "FROM":
            image = args.split()[0] if args else ""
        elif word == "WORKDIR":
            workdir = args if args.startswith("/") else f"{workdir.rstrip('/')}/{args}"
            if workdir.rstrip("/") != "/app":
                raise UnsupportedHarborTask(f"{where}: the sandbox's working directory is /app")
        elif word in ("COPY", "ADD"):
            _copy(folder, env_dir, word, args, workdir, files, where)
        elif word == "RUN":
            found = UNSUPPORTED_RUN.search(args)
            if found:
                raise UnsupportedHarborTask(
                    f"{where}: uses {found.group(0)!r} (installs packages, fetches from the network or "
                    "starts a service); the sandbox offers only Debian's base tools, python3, git and "
                    "sqlite3, without network"
                )
            setup.append(f"cd /app && {args}")
        elif word in SERVICE_INSTRUCTIONS:
            raise UnsupportedHarborTask(
                f"{where}: {word} starts or serves a service, which the sandbox does not run"
            )
        elif word == "ENV":
            raise UnsupportedHarborTask(
                f"{where}: ENV sets variables the sandbox's clean environment does not carry"
            )
        elif word == "USER":
            raise UnsupportedHarborTask(f"{where}: the sandbox runs every command as its one agent user")
        elif word not in IGNORED_INSTRUCTIONS:
            raise UnsupportedHarborTask(f"{where}: unknown Dockerfile instruction {word}")
    return files, setup, image


def _copy(
    folder: Path, env_dir: Path, word: str, args: str, workdir: str, files: dict[str, bytes], where: str
) -> None:
    try:
        parts = json.loads(args) if args.startswith("[") else shlex.split(args)
    except ValueError as err:
        raise UnsupportedHarborTask(f"{where}: cannot read the arguments ({err})") from None
    parts = [p for p in parts if not p.startswith("--")]
    if len(parts) < 2:
        raise UnsupportedHarborTask(f"{where}: {word} needs a source and a destination")
    *sources, dest = parts
    if any("://" in s for s in sources):
        raise UnsupportedHarborTask(f"{where}: {word} from a URL needs the network")
    target = dest if dest.startswith("/") else f"{workdir.rstrip('/')}/{dest}"
    if not (target.rstrip("/") == "/app" or target.startswith("/app/")):
        raise UnsupportedHarborTask(
            f"{where}: copies to {target}, outside /app, which the sandbox does not keep"
        )
    rel_dest = target.rstrip("/").removeprefix("/app").lstrip("/")
    base = env_dir.resolve()
    into_dir = dest.endswith("/") or len(sources) > 1 or rel_dest == ""
    for source in sources:
        src = (env_dir / source).resolve()
        if not src.is_relative_to(base) or not src.exists():
            raise UnsupportedHarborTask(f"{where}: {source} is not a file of environment/")
        entries = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
        for entry in entries:
            if entry.is_symlink():
                raise UnsupportedHarborTask(f"{where}: {entry.name} is a symlink")
            if src.is_file():
                rel = f"{rel_dest}/{entry.name}" if into_dir or (env_dir / source).is_dir() else rel_dest
            else:
                rel = "/".join(x for x in (rel_dest, str(entry.relative_to(src))) if x)
            files[rel.lstrip("/")] = entry.read_bytes()
            if sum(len(v) for v in files.values()) > MAX_CONTEXT_BYTES:
                raise UnsupportedHarborTask(
                    f"{where}: the build context is larger than {MAX_CONTEXT_BYTES >> 20} MB"
                )
