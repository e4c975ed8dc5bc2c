"""The Harbor task folder format: ``task.toml``, its steps, and the files a step takes.

A Harbor task is a folder with ``instruction.md``, ``task.toml``, ``environment/``,
``tests/test.sh`` and ``solution/solve.sh``; a multi-step task lists ``[[steps]]`` in
``task.toml``, each with ``steps/<name>/instruction.md`` and its own ``tests/``,
``solution/`` and ``workdir/``. This module reads and checks all but ``environment/``
(:mod:`~harness_gym.envs.terminal.harbor_image`): the timeouts and env tables of
``task.toml`` (``${VAR:-default}`` only: no host variable is read), what the sandbox cannot
give (:func:`check_config`), the steps (:class:`HarborStep`, :func:`read_steps`; a test
script that installs packages when it runs is rejected), and the files of ``tests/``,
``solution/`` and ``workdir/`` (no symlink, only regular files and folders, size-capped:
:func:`tests_files`). Everything it rejects is an :class:`UnsupportedHarborTask`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_gym.envs.terminal.episode_dirs import walk_tree

#: Longest a verifier or a single agent command may run here, whatever task.toml asks.
MAX_VERIFIER_SECONDS = 3600.0
MAX_AGENT_SECONDS = 3600.0
#: Harbor's defaults (models/task/config.py): verifier 600 s, the agent unlimited (here 900 s).
DEFAULT_VERIFIER_SECONDS = 600.0
DEFAULT_AGENT_SECONDS = 900.0


#: The most a task's tests/ (or solution/) may hold.
MAX_TESTS_BYTES = 64 << 20


class UnsupportedHarborTask(ValueError):
    """A Harbor task folder this sandbox cannot run; the message says why and ``kind`` names
    the reason's family (``needs-build``, ``service``, ``registry-image``, ...)."""

    def __init__(self, message: str, kind: str = "other") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class HarborStep:
    """One step of a Harbor task (a single-step task has one, named ``""``)."""

    name: str
    instruction: str
    #: Folders copied to ``/tests``, in order (shared ``tests/`` first, then the step's).
    tests: tuple[Path, ...]
    #: The test script, relative to ``/tests``.
    test_script: str
    solution: Path | None
    #: Files of ``steps/<name>/workdir/``, written into the working directory before the step.
    workdir_files: dict[str, bytes] = field(default_factory=dict)
    agent_timeout: float = DEFAULT_AGENT_SECONDS
    verifier_timeout: float = DEFAULT_VERIFIER_SECONDS
    verifier_env: dict[str, str] = field(default_factory=dict)
    min_reward: float | dict[str, float] | None = None
    #: Content digest of ``solution`` (names the oracle's command).
    solution_digest: str = ""

    def __post_init__(self) -> None:
        if self.solution is not None and not self.solution_digest:
            object.__setattr__(self, "solution_digest", _digest(self.solution))


# -- task.toml --------------------------------------------------------------------------------


def toml_section(config: dict[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name)
    return value if isinstance(value, dict) else {}


def network_policy(config: dict[str, Any]) -> str:
    env = toml_section(config, "environment")
    mode = env.get("network_mode")
    if mode is None and env.get("allow_internet") is not None:
        mode = "public" if env.get("allow_internet") else "no-network"
    if mode in (None, "public", "allowlist"):
        return f"none (task.toml allows {mode or 'public'} network; the sandbox has none)"
    return "none"


_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def resolve_env(name: str, table: Any, where: str) -> dict[str, str]:
    """A task.toml env table with Harbor's ``${VAR}`` / ``${VAR:-default}`` templates: only
    defaults are taken; a variable of the host is never read (a task needing one is rejected)."""
    if not table:
        return {}
    if not isinstance(table, dict):
        raise UnsupportedHarborTask(f"{name}: task.toml [{where}] is not a table", "bad-toml")
    out = {}
    for key, value in table.items():
        text = str(value)
        for found in _TEMPLATE.finditer(text):
            if found.group(2) is None:
                raise UnsupportedHarborTask(
                    f"{name}: task.toml [{where}] {key} needs the host variable ${{{found.group(1)}}}, "
                    "which the sandbox never passes in",
                    "host-variable",
                )
        out[str(key)] = _TEMPLATE.sub(lambda m: m.group(2) or "", text)
    return out


def check_config(name: str, config: dict[str, Any]) -> None:
    env = toml_section(config, "environment")
    if str(env.get("os", "linux")).lower() != "linux":
        raise UnsupportedHarborTask(f"{name}: task.toml targets {env['os']}; the sandbox is Linux", "windows")
    if env.get("docker_image"):
        raise UnsupportedHarborTask(
            f"{name}: task.toml names a prebuilt docker_image ({env['docker_image']}); no container "
            "registry is reachable",
            "registry-image",
        )
    if int(env.get("gpus", 0) or 0) > 0 or env.get("tpu"):
        raise UnsupportedHarborTask(f"{name}: task.toml asks for a GPU or TPU; the sandbox has none", "gpu")
    if env.get("mcp_servers"):
        raise UnsupportedHarborTask(
            f"{name}: task.toml needs MCP servers, which are services the sandbox does not run", "service"
        )
    if env.get("healthcheck") or any(
        isinstance(s, dict) and s.get("healthcheck") for s in config.get("steps") or []
    ):
        raise UnsupportedHarborTask(
            f"{name}: task.toml has a healthcheck, i.e. a service to wait for", "service"
        )
    verifier = toml_section(config, "verifier")
    if verifier.get("environment") or verifier.get("environment_mode") == "separate":
        raise UnsupportedHarborTask(
            f"{name}: task.toml gives the verifier its own environment, which the sandbox does not build",
            "verifier-environment",
        )


def _timeout(value: Any, default: float, cap: float) -> float:
    try:
        seconds = float(value) if value is not None else default
    except (TypeError, ValueError):
        seconds = default
    return min(max(seconds, 1.0), cap)


def read_steps(folder: Path, config: dict[str, Any]) -> list[HarborStep]:
    """The task's steps (one for a single-step task); :class:`UnsupportedHarborTask` for a
    folder that lacks files, or whose test script installs packages when it runs."""
    steps = _read_steps_unchecked(folder, config)
    for step in steps:
        for tests in step.tests:
            script = tests / step.test_script
            if script.is_file() and not script.is_symlink():
                found = verify_time_install(_text(script))
                if found is not None:
                    raise UnsupportedHarborTask(
                        f"{folder.name}: tests/{step.test_script} installs packages when it runs "
                        f"({found}); verification here is offline, so it could never pass: install "
                        "them in the Dockerfile instead",
                        "verify-time-install",
                    )
    return steps


#: Commands that fetch packages whatever their arguments (``uvx``, ``npx``, ...).
FETCHING_TOOLS = frozenset({"uvx", "npx", "pipx", "bunx", "pnpx"})
#: Package tools and the subcommands of theirs that fetch (``pip install``, ``uv run``, ...).
INSTALLING_SUBCOMMANDS = {
    "pip": {"install", "download"},
    "pip3": {"install", "download"},
    "uv": {"pip", "run", "sync", "add", "tool"},
    "apt-get": {"install", "update"},
    "apt": {"install", "update"},
    "apk": {"add"},
    "npm": {"install", "i", "ci"},
    "yarn": {"add", "install"},
    "pnpm": {"add", "install"},
    "conda": {"install", "create"},
    "mamba": {"install", "create"},
    "poetry": {"install", "add"},
    "gem": {"install"},
    "cargo": {"install"},
    "dnf": {"install"},
    "yum": {"install"},
}


#: Words before a command that run it (``sudo pip install``, ``if uvx ...``).
PREFIX_WORDS = frozenset({"sudo", "env", "exec", "command", "time", "if", "!", "while", "until"})


def verify_time_install(script: str) -> str | None:
    """The first command of a shell script that installs packages (``uvx pytest``,
    ``pip install``, ``python3 -m pip install``, ``apt-get install``), shown with its line
    number; ``None`` when there is none. A plain word scan: comments and quoted text that
    only mention a tool are skipped, a command hidden in a variable is not found."""
    for number, line in enumerate(script.splitlines(), 1):
        code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        for part in re.split(r"&&|\|\||;|\||\$\(|`|\bthen\b|\bdo\b|\belse\b", code):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                words = part.split()
            while words and (
                re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0])
                or words[0] in ("sudo", "env", "exec", "command", "time", "if", "!")
            ):
                words = words[1:]
            if not words:
                continue
            tool = os.path.basename(words[0])
            rest = words[1:]
            if re.fullmatch(r"python[0-9.]*", tool) and rest[:2] == ["-m", "pip"]:
                tool, rest = "pip", rest[2:]
            flags_gone = [w for w in rest if not w.startswith("-")]
            if tool in FETCHING_TOOLS or (
                tool in INSTALLING_SUBCOMMANDS
                and flags_gone
                and flags_gone[0] in INSTALLING_SUBCOMMANDS[tool]
            ):
                return f"line {number}: {line.strip()[:80]}"
    return None


def _read_steps_unchecked(folder: Path, config: dict[str, Any]) -> list[HarborStep]:
    """The task's steps: ``[[steps]]`` of task.toml, or the one step of a plain task."""
    agent, verifier = toml_section(config, "agent"), toml_section(config, "verifier")
    agent_timeout = _timeout(agent.get("timeout_sec"), DEFAULT_AGENT_SECONDS, MAX_AGENT_SECONDS)
    verifier_timeout = _timeout(verifier.get("timeout_sec"), DEFAULT_VERIFIER_SECONDS, MAX_VERIFIER_SECONDS)
    verifier_env = resolve_env(folder.name, verifier.get("env"), "verifier.env")
    shared_tests = folder / "tests"
    solution = folder / "solution"
    for rel in ("tests", "solution", "environment", "instruction.md", "steps"):
        no_symlink(folder, rel)
    listed = config.get("steps")
    if not listed and (folder / "steps").is_dir() and not (folder / "instruction.md").is_file():
        raise UnsupportedHarborTask(
            f"{folder.name}: a multi-step task folder (steps/) whose task.toml lists no [[steps]] "
            'entries: name each step, in order, as [[steps]] name = "<folder under steps/>"',
            "bad-toml",
        )
    if not listed:
        missing = [n for n in ("instruction.md", "tests/test.sh") if not (folder / n).is_file()]
        if missing:
            raise UnsupportedHarborTask(
                f"{folder.name}: missing {', '.join(missing)} (a Harbor task needs instruction.md, "
                "task.toml and tests/test.sh)",
                "missing-files",
            )
        tests_files(shared_tests, folder.name)
        no_symlink(folder, "solution/solve.sh")
        return [
            HarborStep(
                name="",
                instruction=_text(folder / "instruction.md"),
                tests=(shared_tests,),
                test_script="test.sh",
                solution=solution if (solution / "solve.sh").is_file() else None,
                agent_timeout=agent_timeout,
                verifier_timeout=verifier_timeout,
                verifier_env=verifier_env,
            )
        ]
    steps = []
    for entry in listed:
        if not isinstance(entry, dict) or not re.fullmatch(
            r"[A-Za-z0-9][A-Za-z0-9._-]*", str(entry.get("name", ""))
        ):
            raise UnsupportedHarborTask(f"{folder.name}: a [[steps]] entry has no valid name", "bad-toml")
        name = str(entry["name"])
        base = folder / "steps" / name
        for rel in ("", "instruction.md", "tests", "solution", "workdir"):
            no_symlink(folder, f"steps/{name}/{rel}".rstrip("/"))
        if not (base / "instruction.md").is_file():
            raise UnsupportedHarborTask(
                f"{folder.name}: missing steps/{name}/instruction.md", "missing-files"
            )
        tests = tuple(p for p in (shared_tests, base / "tests") if p.is_dir())
        for t in tests:
            tests_files(t, folder.name)
        if (base / "tests" / "test.sh").is_file():
            script = "test.sh"
        elif (shared_tests / "test.sh").is_file():
            script = "test.sh"
        else:
            raise UnsupportedHarborTask(
                f"{folder.name}: step {name} has no tests/test.sh (its own or the task's)", "missing-files"
            )
        step_solution = base / "solution" if (base / "solution" / "solve.sh").is_file() else None
        if step_solution is None and (solution / "solve.sh").is_file():
            step_solution = solution
        step_agent, step_verifier = toml_section(entry, "agent"), toml_section(entry, "verifier")
        steps.append(
            HarborStep(
                name=name,
                instruction=_text(base / "instruction.md"),
                tests=tests,
                test_script=script,
                solution=step_solution,
                workdir_files=_folder_files(base / "workdir", folder.name),
                agent_timeout=_timeout(step_agent.get("timeout_sec"), agent_timeout, MAX_AGENT_SECONDS),
                verifier_timeout=_timeout(
                    step_verifier.get("timeout_sec"), verifier_timeout, MAX_VERIFIER_SECONDS
                ),
                verifier_env={
                    **verifier_env,
                    **resolve_env(folder.name, step_verifier.get("env"), f"steps.{name}.verifier.env"),
                },
                min_reward=entry.get("min_reward"),
            )
        )
    return steps


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip() + "\n"
    except UnicodeDecodeError:
        raise UnsupportedHarborTask(
            f"{path.parent.name}: {path.name} is not UTF-8 text", "bad-file"
        ) from None


def _folder_files(folder: Path, name: str) -> dict[str, bytes]:
    if not folder.is_dir():
        return {}
    out = {}
    for rel, is_dir in tests_files(folder, name, what="workdir"):
        if not is_dir:
            out[rel] = (folder / rel).read_bytes()
    return out


def task_description(config: dict[str, Any], folder: Path) -> str:
    task = toml_section(config, "task")
    if task.get("description"):
        return str(task["description"])
    return f"Harbor task {folder.name}"


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(walk_tree(folder)):
        if os.path.isfile(path) and not os.path.islink(path):
            h.update(os.path.relpath(path, folder).encode() + b"\0")
            h.update(Path(path).read_bytes())
    return h.hexdigest()[:16]


# -- safe copies -------------------------------------------------------------------------------


def toml_module() -> Any:
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise ImportError("reading task.toml on Python 3.10 needs tomli: pip install tomli") from None
    return tomllib


def no_symlink(folder: Path, rel: str) -> None:
    """Reject ``folder/rel`` when it, or a folder on the way to it, is a symlink."""
    path = folder
    for part in Path(rel).parts:
        path = path / part
        if path.is_symlink():
            raise UnsupportedHarborTask(
                f"{folder.name}: {rel} is (or lies under) a symlink, which could pull host files "
                "into the task",
                "symlink",
            )


def tests_files(tests: Path, name: str, what: str = "tests") -> list[tuple[str, bool]]:
    """(relative path, is a directory) of everything in ``tests/`` (or ``solution/``),
    checked: no symlinks, only regular files and directories, at most :data:`MAX_TESTS_BYTES`."""
    if tests.is_symlink() or not tests.is_dir():
        raise UnsupportedHarborTask(f"{name}: {what}/ is not a folder (a symlink is not followed)", "symlink")
    out, total = [], 0
    for path in sorted(walk_tree(tests)):
        rel = os.path.relpath(path, tests)
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise UnsupportedHarborTask(
                f"{name}: {what}/{rel} is a symlink, which could pull host files into the verdict", "symlink"
            )
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise UnsupportedHarborTask(f"{name}: {what}/{rel} is not a regular file", "bad-file")
        total += st.st_size if stat.S_ISREG(st.st_mode) else 0
        if total > MAX_TESTS_BYTES:
            raise UnsupportedHarborTask(
                f"{name}: {what}/ is larger than {MAX_TESTS_BYTES >> 20} MB", "too-large"
            )
        out.append((rel, stat.S_ISDIR(st.st_mode)))
    return out
