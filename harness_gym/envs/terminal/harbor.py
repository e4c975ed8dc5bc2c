"""Harbor (Terminal-Bench 2) task folders, run in the same bubblewrap sandbox.

A Harbor task is a folder with ``instruction.md``, ``task.toml``, ``environment/`` (a
``Dockerfile`` and its build context), ``tests/test.sh`` (the verifier, which writes the
reward to ``/logs/verifier/reward.txt`` or ``reward.json``) and ``solution/solve.sh`` (the
reference solution); a multi-step task lists ``[[steps]]`` in ``task.toml``, each with
``steps/<name>/instruction.md`` and its own ``tests/``, ``solution/`` and ``workdir/``.
:func:`load_harbor_task` turns a folder into a
:class:`~harness_gym.envs.terminal.task.TerminalTask` class, or raises
:class:`UnsupportedHarborTask` saying why (its ``kind`` names the reason's family).

The semantics follow Harbor's own code (the ``harbor`` package on PyPI, 0.26.0; cited in
docs/terminal.md): the oracle uploads ``solution/`` to ``/solution`` and runs
``bash /solution/solve.sh`` in the working directory with ``DEBIAN_FRONTEND=noninteractive``
and ``[solution.env]`` (``agents/oracle.py``); the verifier uploads ``tests/`` to
``/tests``, runs ``/tests/test.sh`` with ``[verifier.env]`` under ``verifier.timeout_sec``
and reads ``reward.json`` (a flat object of finite numbers) before ``reward.txt`` (one
finite number); success is ``reward`` >= 1 (``verifier/verifier.py``). A Dockerfile's
``ENV`` reaches the agent's and the verifier's processes; ``CMD`` never runs (Harbor
replaces it with ``sleep infinity``, ``environments/docker/docker-compose-build.yaml``), so a
plain shell or idle ``CMD``/``ENTRYPOINT`` is accepted and one that starts a program (a
service the tests would expect) is rejected.

Environments: the Dockerfile is read by :mod:`harness_gym.envs.terminal.dockerfile`. When
it only copies files into ``/app`` and runs commands the host's base tools have (no package
install, no network), the instance is made on the host's system (``COPY``/``ADD`` files
written into a fresh ``/app``, ``RUN`` lines run in the sandbox at reset); anything else
needs a root file system built from the Dockerfile, and is rejected with the reason while
no builder is available.

Verification: after the agent submits, every agent process is killed and a fresh one-shot
verifier sandbox (:meth:`Sandbox.run_verifier`) sees the final ``/app``, a copy of the
task's tests at ``/tests`` (read-only; the agent never sees them) and an empty writable
``/logs``. The reward file is read without following any symlink. A task folder whose files
are symlinks is rejected: it could pull host files into the instance or the verdict.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import shlex
import shutil
import stat
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness_gym.core.task import Action, StepResult
from harness_gym.envs.terminal import dockerfile as df
from harness_gym.envs.terminal.episode_dirs import copy_tree, remove_tree, walk_tree
from harness_gym.envs.terminal.sandbox_limits import SandboxLimits
from harness_gym.envs.terminal.sandbox_verifier import VERIFIER_ENV
from harness_gym.envs.terminal.task import TerminalTask

#: Longest a verifier or a single agent command may run here, whatever task.toml asks.
MAX_VERIFIER_SECONDS = 3600.0
MAX_AGENT_SECONDS = 3600.0
#: Harbor's defaults (models/task/config.py): verifier 600 s, the agent unlimited (here 900 s).
DEFAULT_VERIFIER_SECONDS = 600.0
DEFAULT_AGENT_SECONDS = 900.0
#: Files copied into an instance at most (a build context is small in the tasks this takes).
MAX_CONTEXT_BYTES = 32 << 20
#: The most a task's tests/ (or solution/) may hold.
MAX_TESTS_BYTES = 64 << 20
#: Commands that install packages: they need a root file system built from the Dockerfile.
PACKAGE_TOOLS = frozenset(
    "apt-get apt aptitude dpkg pip pip3 pipx uv uvx poetry conda mamba micromamba npm npx yarn pnpm "
    "gem cargo rustup apk yum dnf zypper snap brew bun deno".split()
)
#: Commands that fetch from the network.
NETWORK_TOOLS = frozenset("curl wget ssh scp rsync ftp nc".split())
#: Commands that start services.
SERVICE_TOOLS = frozenset("service systemctl docker dockerd supervisord".split())
#: Shell builtins and keywords (never looked up on the host).
SHELL_WORDS = frozenset(
    ". : [ [[ ]] alias bg bind break builtin caller cd command compgen complete continue declare dirs "
    "disown echo enable eval exec exit export false fc fg getopts hash help history jobs kill let "
    "local logout mapfile popd printf pushd pwd read readarray readonly return set shift shopt source "
    "suspend test times trap true type typeset ulimit umask unalias unset wait case esac for in do "
    "done if then else elif fi while until function select time { } ! fi".split()
)
#: Instructions that only describe the image (nothing to reproduce).
DESCRIPTIVE = frozenset({"LABEL", "MAINTAINER", "EXPOSE", "VOLUME", "STOPSIGNAL", "SHELL", "ARG"})
#: Shells a plain ``ENTRYPOINT`` may name (it then only wraps Harbor's ``sleep infinity``).
PLAIN_SHELLS = frozenset({"bash", "sh", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/usr/bin/env"})
#: A ``CMD`` that only keeps a container alive (what Harbor runs in its place).
IDLE_COMMANDS = frozenset({"sleep", "tail", "true", "/bin/true", "cat"})
#: Variables of the verifier that a task's environment never replaces (git hardening, home).
FIXED_VERIFIER_ENV = frozenset(k for k in VERIFIER_ENV if k.startswith("GIT_")) | {
    "HOME",
    "USER",
    "LOGNAME",
    "PYTHONNOUSERSITE",
}
HOST_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


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


@dataclass
class ImagePlan:
    """What a Dockerfile asks for, as this loader reads it."""

    base_image: str = ""
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    executables: list[str] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)
    #: Why the instance needs a root file system built from the Dockerfile (empty: it does not).
    needs_build: list[str] = field(default_factory=list)
    instructions: list[df.Instruction] = field(default_factory=list)


def load_harbor_task(folder: str | Path) -> type[TerminalTask]:
    """A TerminalTask class for one Harbor task folder, or :class:`UnsupportedHarborTask`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UnsupportedHarborTask(f"{folder} is not a folder", "missing-files")
    if not (folder / "task.toml").is_file():
        raise UnsupportedHarborTask(f"{folder.name}: missing task.toml", "missing-files")
    _no_symlink(folder, "task.toml")
    toml = _toml()
    try:
        config = toml.loads((folder / "task.toml").read_text(encoding="utf-8"))
    except (toml.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UnsupportedHarborTask(
            f"{folder.name}: task.toml is not valid TOML ({err})", "bad-toml"
        ) from None
    _check_config(folder.name, config)
    steps = _read_steps(folder, config)
    plan = read_environment(folder, _section(config, "environment").get("workdir"))
    env = {
        **plan.env,
        **_resolve_env(folder.name, _section(config, "environment").get("env"), "environment.env"),
    }
    _check_base(folder.name, plan)
    build_steps = _build_steps(folder, plan) if plan.needs_build else ()
    solution_env = _resolve_env(folder.name, _section(config, "solution").get("env"), "solution.env")
    environment = _section(config, "environment")
    name = harbor_task_id(folder)
    metadata = _section(config, "metadata")
    per_step = int(metadata.get("max_steps", 20)) if str(metadata.get("max_steps", "")).isdigit() else 20
    memory = int(environment.get("memory_mb") or 4096) << 20
    attrs: dict[str, Any] = {
        "task_id": name,
        "description": _description(config, folder),
        "folder": folder.resolve(),
        "plan": plan,
        "build_steps": build_steps,
        "built": None,
        "image_env": env,
        "solution_env": solution_env,
        "steps": tuple(steps),
        "reward_strategy": str(config.get("multi_step_reward_strategy") or "mean"),
        "network": _network(config),
        "max_steps": per_step * len(steps),
        "limits": SandboxLimits(
            timeout=min(max(s.agent_timeout for s in steps), MAX_AGENT_SECONDS),
            cpu_seconds=int(min(max(s.agent_timeout for s in steps), MAX_AGENT_SECONDS)),
            address_space=max(memory, 4 << 30) * 2,
            processes=512,
            file_size=1 << 30,
            tmp_size=512 << 20,
            disk_quota=int(environment.get("storage_mb") or 2048) << 20,
            memory=max(memory, 2 << 30),
        ),
    }
    return type(name, (HarborTask,), attrs)


def rootfs_recipe(folder: str | Path) -> tuple[str, tuple[Any, ...], Path]:
    """The ``FROM`` image, the build steps and the build context of a task folder's Dockerfile
    (``harness-gym rootfs build FOLDER``), also for a task the host's tools could run;
    :class:`UnsupportedHarborTask` when it cannot be built."""
    folder = Path(folder)
    toml = _toml()
    try:
        config = toml.loads((folder / "task.toml").read_text(encoding="utf-8"))
    except (OSError, toml.TOMLDecodeError, UnicodeDecodeError):
        config = {}
    plan = read_environment(folder, _section(config, "environment").get("workdir"))
    _check_base(folder.name, plan)
    return plan.base_image, _build_steps(folder, plan), folder / "environment"


def find_task_folders(folder: str | Path) -> list[Path]:
    """Every Harbor task folder (one holding ``task.toml``) at or under ``folder``, sorted;
    a task folder's own subfolders are not searched."""
    folder = Path(folder)
    if (folder / "task.toml").is_file():
        return [folder]
    out = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames.sort()
        if "task.toml" in filenames and dirpath != str(folder):
            out.append(Path(dirpath))
            dirnames.clear()
        elif any(n.startswith(".") for n in dirnames):
            dirnames[:] = [n for n in dirnames if not n.startswith(".")]
    return sorted(out)


def load_harbor_dir(folder: str | Path) -> tuple[list[type[TerminalTask]], dict[str, str]]:
    """Every task folder under ``folder``: the loaded tasks, and the rejected ones with why."""
    tasks, rejected = [], {}
    for child in find_task_folders(folder):
        try:
            tasks.append(load_harbor_task(child))
        except UnsupportedHarborTask as err:
            rejected[str(child.relative_to(folder)) if child != Path(folder) else child.name] = str(err)
    return tasks, rejected


#: Folders of Harbor tasks registered by :func:`register_harbor_folder` (``os.pathsep``-joined),
#: so that worker processes (a sweep's) find the same task ids.
HARBOR_DIRS_VARIABLE = "HARNESS_GYM_HARBOR_DIRS"
_BY_ID: dict[str, type[TerminalTask]] = {}
_FOLDERS: dict[str, str] = {}


def harbor_task_id(folder: str | Path) -> str:
    """The task id of a Harbor task folder: ``Harbor`` + its name in CamelCase."""
    return "Harbor" + "".join(
        p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", Path(folder).name) if p
    )


def make_harbor_env(
    task_dir: str | Path,
    harness: Any = None,
    render_mode: str | None = None,
    terminal: Any = None,
) -> Any:
    """A Gymnasium env of one Harbor task folder (``gym.make("harness_gym/Harbor-v0",
    task_dir=PATH, harness="TerminusStyle")``); :class:`UnsupportedHarborTask` says why not."""
    from harness_gym.envs.terminal.env import TerminalEnv

    return TerminalEnv(
        load_harbor_task(task_dir), harness=harness, render_mode=render_mode, terminal=terminal
    )


def register_harbor_folder(folder: str | Path) -> tuple[list[str], dict[str, str]]:
    """Register every loadable task under ``folder`` as a terminal-family task (its id, its
    ``-v0`` and per-preset Gymnasium ids, a task of ``harness-gym sweep --tasks``); return the
    task ids and the rejected folders with why. The folder is remembered in
    :data:`HARBOR_DIRS_VARIABLE`, so processes started from here know the ids too."""
    folder = Path(folder).resolve()
    tasks, rejected = load_harbor_dir(folder)
    for task in tasks:
        _BY_ID[task.task_id] = task
    _register_ids([t.task_id for t in tasks])
    dirs = [d for d in os.environ.get(HARBOR_DIRS_VARIABLE, "").split(os.pathsep) if d]
    if str(folder) not in dirs:
        os.environ[HARBOR_DIRS_VARIABLE] = os.pathsep.join([*dirs, str(folder)])
    return [t.task_id for t in tasks], rejected


def register_remembered_folders() -> list[str]:
    """Register the task ids of the folders :data:`HARBOR_DIRS_VARIABLE` names (without
    loading them: a task is loaded when first used)."""
    ids = []
    for root in os.environ.get(HARBOR_DIRS_VARIABLE, "").split(os.pathsep):
        if root and os.path.isdir(root):
            ids += [harbor_task_id(f) for f in find_task_folders(root)]
    _register_ids(ids)
    return ids


def _register_ids(ids: list[str]) -> None:
    from harness_gym.core.registry import register_family
    from harness_gym.envs.terminal.catalog import ENTRY_POINT
    from harness_gym.envs.terminal.options import FAMILY
    from harness_gym.envs.terminal.presets import TERMINAL_PRESET_INFO

    if ids:
        register_family(
            {i: f"{__name__}:{i}" for i in ids},
            ENTRY_POINT,
            False,
            family=FAMILY,
            presets=TERMINAL_PRESET_INFO,
        )


def __getattr__(name: str) -> Any:
    """A registered Harbor task's class by its id (loaded from its folder on first use)."""
    if name.startswith("Harbor"):
        if name not in _BY_ID:
            roots = os.environ.get(HARBOR_DIRS_VARIABLE, "")
            if _FOLDERS.get("") != roots:  # the id -> folder map of the remembered folders, once
                _FOLDERS.clear()
                _FOLDERS[""] = roots
                for root in roots.split(os.pathsep):
                    for folder in find_task_folders(root) if root and os.path.isdir(root) else []:
                        _FOLDERS.setdefault(harbor_task_id(folder), str(folder))
            if name in _FOLDERS:
                _BY_ID[name] = load_harbor_task(_FOLDERS[name])
        if name in _BY_ID:
            return _BY_ID[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_harbor(folder: str | Path) -> list[str]:
    """Register ``harness_gym/Harbor<Name>-v0`` (takes ``harness=``) and one id per coding
    preset for every supported task under ``folder``; return the ids."""
    import gymnasium as gym

    from harness_gym.core.registry import env_id
    from harness_gym.envs.terminal.catalog import ENTRY_POINT
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
    plan: ImagePlan = ImagePlan()
    image_env: dict[str, str] = {}
    solution_env: dict[str, str] = {}
    steps: tuple[HarborStep, ...] = ()
    #: The Dockerfile as build steps when the instance needs a built root file system.
    build_steps: tuple[Any, ...] = ()
    #: The root file system once built (:meth:`build_rootfs`; shared by the class's episodes).
    built: Any = None
    reward_strategy = "mean"
    network = "none"
    limits = SandboxLimits(timeout=30.0)

    def build(self, rng: np.random.Generator) -> None:
        #: What the last verification found that makes its reward untrustworthy.
        self.tampering: list[str] = []
        self.step_index = 0
        self.step_rewards: list[dict[str, float] | None] = []
        self.agent_seconds = 0.0
        built = bool(self.build_steps)
        self.files = {} if built else dict(self.plan.files)  # built: /app comes from the image
        self.files.update(self.steps[0].workdir_files)
        self.setup = [] if built else list(self.plan.setup)
        if self.plan.executables and not built:
            self.setup.insert(0, "chmod +x -- " + " ".join(shlex.quote(p) for p in self.plan.executables))
        self.setup += self._step_setup(self.steps[0])
        self.instruction = self.steps[0].instruction
        self.params = {
            "folder": self.folder.name,
            "image": self.plan.base_image,
            "network": self.network,
            "steps": [s.name for s in self.steps if s.name],
        }

    def make_sandbox(self, root: Path) -> Any:
        """The agent's sandbox (from :attr:`backend`, bwrap by default): ``/solution`` mounted
        read-only from the episode directory (empty until the oracle uploads the solution),
        the image's ``ENV``, and the built root file system when the task needs one."""
        from harness_gym.envs.terminal.backends import open_backend

        solution = root / "solution"
        solution.mkdir(exist_ok=True)
        # Harbor's containers have a writable /logs (a RUN or the agent may write there); the
        # verifier never sees this one: it gets a fresh /logs of its own.
        logs = root / "agent-logs"
        (logs / "agent").mkdir(parents=True, exist_ok=True)
        binds = ((solution, "/solution", False), (logs, "/logs", True))
        if not self.build_steps:
            return open_backend(self.backend, root, self.limits, env=self.image_env, binds=binds)
        built = type(self).build_rootfs()
        if built.app.is_dir():  # what the build left in /app is the episode's start
            copy_tree(built.app, root / "app")
        for rel, content in self.steps[0].workdir_files.items():
            (root / "app" / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / "app" / rel).write_bytes(content)
        return open_backend(
            self.backend,
            root,
            self.limits,
            rootfs=built.path,
            env={**built.env, **self.image_env},
            binds=binds,
        )

    @classmethod
    def build_rootfs(cls, progress: bool | None = None) -> Any:
        """The root file system of this task's Dockerfile (built once, then from the cache of
        :func:`~harness_gym.envs.terminal.rootfs.build_rootfs`); ``None`` when the task needs
        none. A failing build raises ``BuildFailed`` naming the Dockerfile line."""
        if not cls.build_steps:
            return None
        if cls.built is None:
            from harness_gym.envs.terminal import rootfs

            if progress is None:  # a bar where someone watches (a first reset can take minutes)
                progress = sys.stderr.isatty()
            cls.built = rootfs.build_rootfs(
                cls.plan.base_image, cls.build_steps, cls.folder / "environment", progress=progress
            )
        return cls.built

    @property
    def current(self) -> HarborStep:
        return self.steps[min(self.step_index, len(self.steps) - 1)]

    def solution(self) -> str:
        """``bash /solution/solve.sh`` as Harbor's oracle runs it; the trailing comment names
        the solution's content digest, so only the oracle's own command uploads it."""
        step = self.current
        if step.solution is None:
            return "true  # this task has no solution/solve.sh"
        variables = {"DEBIAN_FRONTEND": "noninteractive", **self.solution_env}
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
        return f"env {assigns} bash /solution/solve.sh  # harbor oracle {step.solution_digest}"

    def step(self, action: Action) -> StepResult:
        if self.done or self._sandbox is None:
            return super().step(action)
        if action.name == "run" and action["command"] == self.solution() and self.current.solution:
            self._upload_solution(self.current.solution)
        if action.name != "submit":
            if self.agent_seconds >= self.current.agent_timeout:  # Harbor: the agent phase ends
                result = super().step(Action.of("submit"))
                self.verdict = f"agent timeout ({self.current.agent_timeout:g} s); {self.verdict}"
                return StepResult(result.reward, result.done, result.success, self.verdict)
            start = time.monotonic()
            result = super().step(action)
            self.agent_seconds += time.monotonic() - start
            return result
        return self._submit()

    def _submit(self) -> StepResult:
        assert self._sandbox is not None
        try:
            self._sandbox.stop_agent()
        except OSError:
            pass
        step = self.current
        try:
            rewards, why = self._verify_step(step)
        except Exception as err:  # noqa: BLE001 - a broken state is a failed check, never a crash
            rewards, why = None, f"verifier error: {type(err).__name__}: {err}"
        self.step_rewards.append(rewards)
        reward = (rewards or {}).get("reward")
        last = self.step_index + 1 >= len(self.steps)
        gate = _min_reward_failure(rewards, step.min_reward)
        record = {
            "action": "submit",
            "step": step.name,
            "rewards": rewards,
            "verdict": why,
            "tampering": list(self.tampering),
        }
        if not last and gate is None and rewards is not None:
            self.step_index += 1
            self.oracle_done = False
            self.agent_seconds = 0.0
            nxt = self.current
            self._start_step(nxt)
            self.instruction = nxt.instruction
            self.last = {
                "kind": "submit",
                "ok": True,
                "text": f"step {step.name!r} checked (reward {reward}); "
                f"next step {nxt.name!r}:\n{nxt.instruction}",
            }
            self.history.append(record)
            return StepResult(0.0, False, False, "")
        total = self._trial_reward()
        ok = total is not None and total >= 1.0
        if not ok and not last and gate is not None:
            why = f"step {step.name!r}: {gate}, so the remaining steps are not run; {why}"
        if not ok and not why:
            why = f"reward {total}"
        self.done, self.succeeded, self.verdict = True, ok, "" if ok else why
        self.last = {"kind": "submit", "ok": ok, "text": "submitted"}
        record.update(success=ok, verdict=self.verdict, reward=total)
        self.history.append(record)
        return StepResult(float(ok), True, ok, self.verdict)

    def verify(self) -> tuple[bool, str]:
        """Run the current step's verifier (as at submit) and say whether its reward is 1."""
        rewards, why = self._verify_step(self.current)
        reward = (rewards or {}).get("reward")
        ok = reward is not None and reward >= 1.0
        return ok, "" if ok else (why or f"reward {reward}")

    def _trial_reward(self) -> float | None:
        """Harbor's trial reward: the one step's, or per ``multi_step_reward_strategy``
        ("mean" of the steps that produced a result, a missing key counting 0; "final")."""
        if len(self.steps) == 1 or self.reward_strategy == "final":
            last = self.step_rewards[-1] if self.step_rewards else None
            return None if last is None else last.get("reward")
        results = [r for r in self.step_rewards if r is not None]
        if not results:
            return None
        return sum(r.get("reward", 0.0) for r in results) / len(results)

    def _verify_step(self, step: HarborStep) -> tuple[dict[str, float] | None, str]:
        assert self._root is not None and self._sandbox is not None
        self.tampering = []
        work = self._root / "verifier"  # beside app/ and home/: never mounted for the agent
        remove_tree(work)
        tests, logs = work / "tests", work / "logs"
        try:
            for source in step.tests:
                _copy_tests(source, tests, self.folder.name)
            script = tests / step.test_script
            if script.is_file() and not script.is_symlink():
                os.chmod(script, 0o755)  # Harbor: chmod +x, then run the script itself
            for sub in ("verifier", "agent"):
                (logs / sub).mkdir(parents=True)
            env = {
                k: v
                for k, v in {**self.image_env, **step.verifier_env}.items()
                if k not in FIXED_VERIFIER_ENV
            }
            res = self._sandbox.run_verifier(
                shlex.quote(f"/tests/{step.test_script}"),
                timeout=step.verifier_timeout,
                env=env,
                binds=((tests, "/tests", False), (logs, "/logs", True)),
                app_writable=True,  # as in Harbor: a test may write next to the code it checks
                cwd=self.plan.workdir if self.plan.workdir.startswith("/app") else "/app",
            )
            rewards, why = read_reward(logs)
            tampering = list(res.tampering)
            if res.supervised:  # the files as test.sh left them (a remote backend copies them)
                tampering += reward_tampering(logs, _named_reward_files(tests))
        finally:
            remove_tree(work)
        tail = f"(test.sh exit code {res.exit_code}{', timed out' if res.timed_out else ''}; "
        tail += f"{res.stdout[-200:]}{res.stderr[-200:]})"
        self.tampering = tampering
        if tampering:
            return None, f"reward tampering: {'; '.join(tampering)} {tail}"
        if res.timed_out:
            return None, f"test.sh timed out after {step.verifier_timeout:g} s {tail}"
        if rewards is None:
            return None, f"{why} {tail}"
        reward = rewards.get("reward")
        if reward is None or reward < 1.0:
            return rewards, f"reward {reward}: {(res.stdout + res.stderr)[-300:]}"
        return rewards, ""

    def _upload_solution(self, source: Path) -> None:
        """Copy the solution folder into the episode's ``/solution`` (as Harbor's oracle
        uploads it), replacing what an earlier step put there."""
        assert self._root is not None
        target = self._root / "solution"
        for child in list(target.iterdir()):
            remove_tree(child)
        for rel, is_dir in _tests_files(source, self.folder.name, what="solution"):
            dest = target / rel
            if is_dir:
                dest.mkdir(mode=0o755, exist_ok=True)
                continue
            fd = os.open(source / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as f:
                dest.write_bytes(f.read(MAX_TESTS_BYTES + 1))
            os.chmod(dest, 0o755)
        for path in walk_tree(target):
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o755)

    def _step_setup(self, step: HarborStep) -> list[str]:
        if step.name and "setup.sh" in step.workdir_files:
            return ["cd /app && bash /app/setup.sh"]
        return []

    def _start_step(self, step: HarborStep) -> None:
        """Harbor's next-step preparation: upload ``workdir/`` into the working directory,
        then run its ``setup.sh``."""
        assert self._sandbox is not None
        for rel, content in step.workdir_files.items():
            self._sandbox.write_file(f"/app/{rel}", content.decode("utf-8", "replace"))
        for command in self._step_setup(step):
            self._sandbox.run(command, persistent=False, timeout=120)


#: The files test.sh may write its reward to (Harbor reads the first that exists).
REWARD_FILES = ("reward.json", "reward.txt")


def _named_reward_files(tests: Path) -> set[str]:
    """The reward files some file of the task's tests names (test.sh, or a checker it runs)."""
    named: set[str] = set()
    for path in walk_tree(tests):
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                data = f.read(MAX_TESTS_BYTES)
            named.update(n for n in REWARD_FILES if n.encode() in data)
    return named


def reward_tampering(logs: Path, named: set[str]) -> list[str]:
    """What says the reward under ``logs/verifier`` is not the one test.sh wrote: the
    directory made read-only, a reward file no file of the tests names (the agent's code
    wrote it), one made read-only (test.sh's own write then fails), hard-linked, or whose
    mode or owner changed after its last write (ctime after mtime). test.sh runs the agent's
    code as its own uid: these are the traces that code leaves when it claims the reward."""
    found: list[str] = []
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_NONBLOCK
    try:  # no link is followed on the way (read_reward names a linked /logs/verifier)
        base = os.open(logs, flags)
    except OSError:
        return found
    try:
        fd = os.open("verifier", flags, dir_fd=base)
    except OSError:
        return found
    finally:
        os.close(base)
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o700 != 0o700:
            found.append(f"/logs/verifier was made mode {stat.S_IMODE(st.st_mode):o}")
        for name in REWARD_FILES:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            where = f"/logs/verifier/{name}"
            if name not in named:
                found.append(f"{where} exists, but no file of the task's tests names it")
            if not stat.S_ISREG(st.st_mode):
                continue
            if not st.st_mode & 0o200:
                found.append(f"{where} was made read-only (mode {stat.S_IMODE(st.st_mode):o})")
            if st.st_nlink != 1:
                found.append(f"{where} has {st.st_nlink} hard links")
            if st.st_ctime_ns != st.st_mtime_ns:
                found.append(f"{where}'s mode or owner changed after its last write")
    finally:
        os.close(fd)
    return found


def read_reward(logs: Path) -> tuple[dict[str, float] | None, str]:
    """The rewards ``test.sh`` wrote under ``logs/verifier``, read as Harbor reads them
    (``reward.json`` first: an object of finite numbers; else ``reward.txt``: one finite
    number, as ``{"reward": x}``). No symlink is followed on the way (test.sh could point
    ``/logs/verifier`` or the file at host paths), nor a FIFO opened."""
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
            for name in ("reward.json", "reward.txt"):
                try:
                    fd = os.open(name, flags, dir_fd=verifier)
                except FileNotFoundError:
                    continue
                except OSError:
                    return None, f"/logs/verifier/{name} is not a regular file (a symlink is not followed)"
                with os.fdopen(fd, "rb") as f:
                    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                        return None, f"/logs/verifier/{name} is not a regular file"
                    text = f.read(1 << 20).decode("utf-8", "replace")
                return _parse_reward(name, text)
        finally:
            os.close(verifier)
    finally:
        os.close(base)
    return None, "test.sh wrote no /logs/verifier/reward.txt or reward.json"


def _parse_reward(name: str, text: str) -> tuple[dict[str, float] | None, str]:
    if not text:
        return None, f"/logs/verifier/{name} is empty"
    if name == "reward.txt":
        try:
            value = float(text)
        except ValueError:
            return None, f"/logs/verifier/reward.txt holds no number: {text[:80]!r}"
        if not math.isfinite(value):
            return None, f"/logs/verifier/reward.txt holds a non-finite reward {value!r}"
        return {"reward": value}, ""
    try:
        data = json.loads(text)
    except ValueError:
        return None, f"/logs/verifier/reward.json is not JSON: {text[:80]!r}"
    if not isinstance(data, dict):
        return None, f"/logs/verifier/reward.json must be an object of rewards, got {text[:80]!r}"
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None, f"/logs/verifier/reward.json: reward {key!r} is not a finite number ({value!r})"
    return {str(k): float(v) for k, v in data.items()}, ""


def _min_reward_failure(rewards: dict[str, float] | None, min_reward: Any) -> str | None:
    """Harbor's step gate (trial/multi_step.py): a float gates ``reward``, a table each key."""
    if min_reward is None:
        return None
    thresholds = {"reward": min_reward} if isinstance(min_reward, (int, float)) else dict(min_reward)
    for key, threshold in thresholds.items():
        actual = (rewards or {}).get(key, float("-inf"))
        if actual < float(threshold):
            return f"{key}={actual} below min_reward {threshold}"
    return None


# -- task.toml --------------------------------------------------------------------------------


def _section(config: dict[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name)
    return value if isinstance(value, dict) else {}


def _network(config: dict[str, Any]) -> str:
    env = _section(config, "environment")
    mode = env.get("network_mode")
    if mode is None and env.get("allow_internet") is not None:
        mode = "public" if env.get("allow_internet") else "no-network"
    if mode in (None, "public", "allowlist"):
        return f"none (task.toml allows {mode or 'public'} network; the sandbox has none)"
    return "none"


_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _resolve_env(name: str, table: Any, where: str) -> dict[str, str]:
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


def _check_config(name: str, config: dict[str, Any]) -> None:
    env = _section(config, "environment")
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
    verifier = _section(config, "verifier")
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


def _read_steps(folder: Path, config: dict[str, Any]) -> list[HarborStep]:
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
    agent, verifier = _section(config, "agent"), _section(config, "verifier")
    agent_timeout = _timeout(agent.get("timeout_sec"), DEFAULT_AGENT_SECONDS, MAX_AGENT_SECONDS)
    verifier_timeout = _timeout(verifier.get("timeout_sec"), DEFAULT_VERIFIER_SECONDS, MAX_VERIFIER_SECONDS)
    verifier_env = _resolve_env(folder.name, verifier.get("env"), "verifier.env")
    shared_tests = folder / "tests"
    solution = folder / "solution"
    for rel in ("tests", "solution", "environment", "instruction.md", "steps"):
        _no_symlink(folder, rel)
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
        _tests_files(shared_tests, folder.name)
        _no_symlink(folder, "solution/solve.sh")
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
            _no_symlink(folder, f"steps/{name}/{rel}".rstrip("/"))
        if not (base / "instruction.md").is_file():
            raise UnsupportedHarborTask(
                f"{folder.name}: missing steps/{name}/instruction.md", "missing-files"
            )
        tests = tuple(p for p in (shared_tests, base / "tests") if p.is_dir())
        for t in tests:
            _tests_files(t, folder.name)
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
        step_agent, step_verifier = _section(entry, "agent"), _section(entry, "verifier")
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
                    **_resolve_env(folder.name, step_verifier.get("env"), f"steps.{name}.verifier.env"),
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
    for rel, is_dir in _tests_files(folder, name, what="workdir"):
        if not is_dir:
            out[rel] = (folder / rel).read_bytes()
    return out


def _description(config: dict[str, Any], folder: Path) -> str:
    task = _section(config, "task")
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


# -- environment/ ----------------------------------------------------------------------------


def read_environment(folder: Path, workdir_override: str | None = None) -> ImagePlan:
    """What ``environment/Dockerfile`` asks for (:class:`ImagePlan`); rejects what no build
    could give (services, a compose file, multi-stage copies, a URL), and lists in
    ``needs_build`` what only a built root file system gives."""
    env_dir = folder / "environment"
    plan = ImagePlan(env={"PATH": df.DEFAULT_PATH})
    for compose in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
        if (env_dir / compose).exists():
            raise UnsupportedHarborTask(
                f"{folder.name}: environment/{compose} defines services (containers beside the task's), "
                "which the sandbox does not run",
                "service",
            )
    dockerfile = env_dir / "Dockerfile"
    if not dockerfile.is_file():
        raise UnsupportedHarborTask(f"{folder.name}: missing environment/Dockerfile", "missing-files")
    try:
        instructions = df.parse_dockerfile(dockerfile.read_text(encoding="utf-8"))
    except (df.DockerfileError, UnicodeDecodeError) as err:
        raise UnsupportedHarborTask(f"{folder.name}: environment/Dockerfile: {err}", "dockerfile") from None
    plan.instructions = instructions
    patterns = df.read_dockerignore(env_dir)
    variables: dict[str, str] = {}
    stages = 0
    for ins in instructions:
        where = f"{folder.name}: environment/Dockerfile {ins}"[:200]
        if ins.kind not in df.KNOWN:
            raise UnsupportedHarborTask(f"{where}: unknown Dockerfile instruction {ins.kind}", "dockerfile")
        try:
            if ins.kind == "ARG":
                for key, value in df.parse_assignments(ins, variables).items():
                    variables.setdefault(key, value)
            elif ins.kind == "FROM":
                stages += 1
                if stages > 1:
                    raise UnsupportedHarborTask(f"{where}: a multi-stage build", "multi-stage")
                words = df.expand(ins.args, variables).split()
                plan.base_image = words[0] if words else ""
            elif ins.kind == "ENV":
                for key, value in df.parse_assignments(ins, {**variables, **plan.env}).items():
                    plan.env[key] = value
            elif ins.kind == "WORKDIR":
                plan.workdir = df.join_dest(
                    plan.workdir, df.expand(ins.args.strip(), {**variables, **plan.env})
                )
                if plan.workdir.rstrip("/") != "/app":
                    plan.needs_build.append(f"{ins}: the host-tools sandbox works in /app")
            elif ins.kind == "USER":
                plan.user = df.expand(ins.args.strip(), {**variables, **plan.env})
            elif ins.kind in ("COPY", "ADD"):
                _copy(env_dir, ins, plan, patterns, {**variables, **plan.env}, where)
            elif ins.kind == "RUN":
                _run(ins, plan, where)
            elif ins.kind in ("ENTRYPOINT", "CMD"):
                words = ins.words()
                if words and words[0] not in PLAIN_SHELLS | (IDLE_COMMANDS if ins.kind == "CMD" else set()):
                    raise UnsupportedHarborTask(
                        f"{where}: {ins.kind} {words[0]} starts a program with the container (a "
                        "service: Harbor replaces CMD with `sleep infinity`, and the sandbox runs no "
                        "service), so the task's tests would find nothing serving",
                        "service",
                    )
            elif ins.kind in ("HEALTHCHECK", "ONBUILD"):
                raise UnsupportedHarborTask(
                    f"{where}: {ins.kind} is for a service or a derived image", "service"
                )
        except df.DockerfileError as err:
            raise UnsupportedHarborTask(f"{where}: {err}", "dockerfile") from None
    if workdir_override:
        plan.workdir = df.join_dest(plan.workdir, str(workdir_override))
        if plan.workdir.rstrip("/") != "/app":
            plan.needs_build.append(
                f"task.toml workdir {workdir_override}: the host-tools sandbox works in /app"
            )
    if plan.workdir == "/" and not plan.needs_build:
        plan.workdir = "/app"
    return plan


def _run(ins: df.Instruction, plan: ImagePlan, where: str) -> None:
    """A ``RUN`` line: kept as a set-up command when the host's tools can run it without
    network, else a reason for a build."""
    script = ins.args
    heredoc_only = re.fullmatch(r"\s*(<<-?[\"']?\w+[\"']?\s*)+", ins.args or "")
    if ins.heredocs:
        script = (
            "\n".join(ins.heredocs.values()) if heredoc_only else re.sub(r"<<-?[\"']?\w+[\"']?", "", ins.args)
        )
    form = ins.exec_form
    if form is not None:
        script = shlex.join(form)
    if ins.flags.get("mount") or ins.flags.get("network"):
        plan.needs_build.append(f"{ins}: RUN --mount/--network needs a build")
        return
    for words in df.shell_commands(script):
        cmd = os.path.basename(words[0])
        if cmd in ("python", "python3") and words[1:3] == ["-m", "pip"]:
            cmd = "pip"
        if cmd == "git" and len(words) > 1 and words[1] in ("clone", "fetch", "pull", "submodule"):
            cmd = f"git {words[1]}"
        if cmd in PACKAGE_TOOLS:
            plan.needs_build.append(f"{ins}: runs {cmd!r}, which installs packages")
            return
        if cmd in NETWORK_TOOLS or cmd.startswith("git "):
            plan.needs_build.append(f"{ins}: runs {cmd!r}, which fetches from the network")
            return
        if cmd in SERVICE_TOOLS:
            plan.needs_build.append(f"{ins}: runs {cmd!r}, which starts a service")
            return
        if cmd in SHELL_WORDS or "/" in words[0] or "$" in words[0]:
            continue
        if shutil.which(cmd, path=HOST_PATH) is None:
            plan.needs_build.append(f"{ins}: runs {cmd!r}, which the host's base tools lack")
            return
    if ins.heredocs and heredoc_only:
        body = "\n".join(ins.heredocs.values())
        plan.setup.append(
            f"cd {shlex.quote(plan.workdir)} && {_exports(plan.env)}bash -c {shlex.quote(body)}"
        )
    elif ins.heredocs:
        plan.needs_build.append(f"{ins}: a here-document fed to a command needs a build")
    else:
        where_run = plan.workdir if plan.workdir != "/" else "/app"
        plan.setup.append(f"cd {shlex.quote(where_run)} && {_exports(plan.env)}{script}")


def _exports(env: dict[str, str]) -> str:
    extra = {k: v for k, v in env.items() if k != "PATH" or v != df.DEFAULT_PATH}
    return "".join(f"export {k}={shlex.quote(v)}; " for k, v in extra.items())


def _copy(
    env_dir: Path,
    ins: df.Instruction,
    plan: ImagePlan,
    patterns: list[tuple[bool, re.Pattern[str]]],
    variables: dict[str, str],
    where: str,
) -> None:
    """A ``COPY``/``ADD``: files written into ``/app`` (globs, ``.dockerignore``, here-docs,
    local archives unpacked by ``ADD``); a copy elsewhere is a reason for a build."""
    if "from" in ins.flags:
        raise UnsupportedHarborTask(f"{where}: COPY --from needs another image or stage", "multi-stage")
    words = [df.expand(w, variables) for w in ins.words()]
    if len(words) < 2:
        raise UnsupportedHarborTask(f"{where}: {ins.kind} needs a source and a destination", "dockerfile")
    *sources, dest = words
    if any("://" in s or s.startswith("git@") for s in sources):
        raise UnsupportedHarborTask(f"{where}: {ins.kind} from a URL needs the network", "network")
    target = df.join_dest(plan.workdir if plan.workdir != "/" else "/", dest)
    if not (target.rstrip("/") == "/app" or target.startswith("/app/")):
        plan.needs_build.append(f"{ins}: copies to {target}, outside /app")
        return
    rel_dest = target.rstrip("/").removeprefix("/app").lstrip("/")
    heredoc_sources = [s for s in sources if s.startswith("<<")]
    for marker in heredoc_sources:
        name = re.sub(r"^<<-?[\"']?(\w+)[\"']?$", r"\1", marker)
        body = ins.heredocs.get(name, "")
        rel = f"{rel_dest}/{name}" if (dest.endswith("/") or len(sources) > 1) else rel_dest
        plan.files[rel.lstrip("/")] = body.encode()
    sources = [s for s in sources if not s.startswith("<<")]
    matched = [m for s in sources for m in df.context_sources(env_dir, s, patterns)]
    into_dir = dest.endswith("/") or len(matched) > 1 or rel_dest == ""
    base = env_dir.resolve()
    for source in matched:
        src = env_dir / source
        if not src.resolve().is_relative_to(base):
            raise UnsupportedHarborTask(f"{where}: {source} leaves environment/", "symlink")
        if src.is_symlink():
            raise UnsupportedHarborTask(f"{where}: {source} is a symlink", "symlink")
        if ins.kind == "ADD" and src.is_file() and df.is_archive(source):
            _unpack(src, rel_dest, plan, where)
            continue
        for entry in df.context_files(env_dir, source, patterns):
            path = src / entry if entry else src
            if path.is_symlink():
                raise UnsupportedHarborTask(f"{where}: {source}/{entry} is a symlink", "symlink")
            if not entry:
                rel = f"{rel_dest}/{src.name}" if into_dir else rel_dest
            else:
                rel = "/".join(x for x in (rel_dest, entry) if x)
            plan.files[rel.lstrip("/")] = path.read_bytes()
            if os.stat(path).st_mode & 0o111 or ins.flags.get("chmod", "").endswith(("5", "7")):
                plan.executables.append("/app/" + rel.lstrip("/"))
            _check_size(plan, where)


def _unpack(archive: Path, rel_dest: str, plan: ImagePlan, where: str) -> None:
    """``ADD`` of a local tar archive: its regular files and folders, unpacked (links and
    paths leaving the destination refused)."""
    try:
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = os.path.normpath(member.name.lstrip("/"))
                if name == "." or name.startswith(".."):
                    continue
                if member.isdir():
                    plan.files["/".join(x for x in (rel_dest, name) if x) + "/"] = b""
                elif member.isfile():
                    data = tar.extractfile(member)
                    rel = "/".join(x for x in (rel_dest, name) if x)
                    plan.files[rel] = data.read() if data else b""
                    if member.mode & 0o111:
                        plan.executables.append(f"/app/{rel}")
                    _check_size(plan, where)
                else:
                    raise UnsupportedHarborTask(
                        f"{where}: {archive.name} holds a link or device ({member.name})", "symlink"
                    )
    except (tarfile.TarError, OSError, io.UnsupportedOperation) as err:
        raise UnsupportedHarborTask(f"{where}: cannot unpack {archive.name} ({err})", "dockerfile") from None


def _check_size(plan: ImagePlan, where: str) -> None:
    if sum(len(v) for v in plan.files.values()) > MAX_CONTEXT_BYTES:
        raise UnsupportedHarborTask(
            f"{where}: the build context is larger than {MAX_CONTEXT_BYTES >> 20} MB", "too-large"
        )


#: Registry paths in front of Docker Hub's official images (``public.ecr.aws/docker/library/python``).
MIRRORED_LIBRARY = re.compile(r"^(?:[a-z0-9.-]+\.[a-z]+(?::\d+)?/)?(?:docker/)?library/")


def _check_base(name: str, plan: ImagePlan) -> None:
    """The ``FROM`` image must map to a Debian base (:func:`~harness_gym.envs.terminal.rootfs_base.map_base`;
    toolchain images such as ``golang`` or ``eclipse-temurin`` map to the suite whose own package
    of the tool is nearest, said in the build log)."""
    from harness_gym.envs.terminal.rootfs_base import Unbuildable, map_base

    plan.base_image = MIRRORED_LIBRARY.sub("", plan.base_image)
    try:
        map_base(plan.base_image)
    except Unbuildable as err:
        raise UnsupportedHarborTask(
            f"{name}: environment/Dockerfile: {err.reason}", "registry-image"
        ) from None


def _build_steps(folder: Path, plan: ImagePlan) -> tuple[Any, ...]:
    """The Dockerfile as :class:`~harness_gym.envs.terminal.rootfs_steps.BuildStep` values, checked
    buildable (a mapped base, URLs inside the package registries); rejects what cannot be built."""
    from harness_gym.envs.terminal.rootfs_base import Unbuildable
    from harness_gym.envs.terminal.rootfs_steps import BuildStep, check_buildable

    where = f"{folder.name}: environment/Dockerfile"
    workdir = plan.workdir.rstrip("/") or "/"
    if workdir.split("/")[1] in ("tmp", "dev", "proc", "sys", "run"):
        raise UnsupportedHarborTask(
            f"{where}: the working directory is {plan.workdir}, inside a folder each episode "
            "makes afresh; the episode's writable folder is /app",
            "workdir",
        )
    env_dir = folder / "environment"
    patterns = df.read_dockerignore(env_dir)
    variables: dict[str, str] = {"PATH": df.DEFAULT_PATH}
    current = "/"
    steps: list[Any] = []
    try:
        _convert(plan, env_dir, patterns, variables, current, steps)
    except df.DockerfileError as err:
        raise UnsupportedHarborTask(f"{where}: {err}", "dockerfile") from None
    if workdir != "/" and workdir != "/app" and not workdir.startswith("/app/"):
        # The episode's one writable folder is /app: the image's working directory becomes a
        # link to it, holding what the build left there.
        quoted = shlex.quote(workdir)
        steps.append(
            BuildStep(
                "RUN",
                (
                    f"set -e; mkdir -p /app; if [ -d {quoted} ] && [ ! -L {quoted} ]; then "
                    f"cp -a {quoted}/. /app/ && rm -rf {quoted}; fi; "
                    f"mkdir -p $(dirname {quoted}); ln -sfn /app {quoted}",
                ),
                0,
                f"(harness-gym) WORKDIR {workdir} -> /app",
            )
        )
    try:
        check_buildable(plan.base_image, steps, env_dir)
    except Unbuildable as err:
        raise UnsupportedHarborTask(f"{where}: {err.reason}", "unbuildable") from None
    return tuple(steps)


def _convert(
    plan: ImagePlan,
    env_dir: Path,
    patterns: list[tuple[bool, re.Pattern[str]]],
    variables: dict[str, str],
    current: str,
    steps: list[Any],
) -> None:
    """Append the build steps of ``plan``'s instructions to ``steps``."""
    from harness_gym.envs.terminal.rootfs_steps import BuildStep

    for ins in plan.instructions:
        shown = f"{ins.kind} {ins.args}"[:300]

        def step(kind: str, *args: str, ins: df.Instruction = ins, shown: str = shown) -> None:
            steps.append(BuildStep(kind, tuple(args), ins.line, shown))

        if ins.kind == "ARG":
            for key, value in df.parse_assignments(ins, variables).items():
                variables.setdefault(key, value)
        elif ins.kind == "ENV":
            pairs = df.parse_assignments(ins, variables)
            variables.update(pairs)
            step("ENV", *(f"{k}={v}" for k, v in pairs.items()))
        elif ins.kind == "WORKDIR":
            current = df.join_dest(current, df.expand(ins.args.strip(), variables))
            step("WORKDIR", current)
        elif ins.kind == "USER":
            step("USER", df.expand(ins.args.strip(), variables))
        elif ins.kind == "RUN":
            step("RUN", _run_script(ins))
        elif ins.kind in ("COPY", "ADD"):
            _copy_steps(env_dir, ins, patterns, variables, current, step, len(steps))


def _run_script(ins: df.Instruction) -> str:
    """The shell text a ``RUN`` runs: its exec form joined, a here-document-only ``RUN``'s
    body, or the command with its here-documents written inline."""
    form = ins.exec_form
    if form is not None:
        return shlex.join(form)
    if not ins.heredocs:
        return ins.args
    if re.fullmatch(r"\s*(<<-?[\"']?\w+[\"']?\s*)+", ins.args):
        return "\n".join(ins.heredocs.values())
    tail = "".join(f"{body}{name}\n" for name, body in ins.heredocs.items())
    return re.sub(r"<<-?[\"']?(\w+)[\"']?", r"<<'\1'", ins.args) + "\n" + tail


def _copy_steps(
    env_dir: Path,
    ins: df.Instruction,
    patterns: list[tuple[bool, re.Pattern[str]]],
    variables: dict[str, str],
    workdir: str,
    step: Any,
    index: int,
) -> None:
    """A ``COPY``/``ADD`` as build steps: globs and ``.dockerignore`` applied here, a
    here-document written by a ``RUN``, a local archive unpacked by ``tar``."""
    words = [df.expand(w, variables) for w in ins.words()]
    if len(words) < 2:
        raise UnsupportedHarborTask(
            f"{env_dir.parent.name}: {ins}: needs a source and a destination", "dockerfile"
        )
    *sources, dest = words
    target = df.join_dest(workdir, dest)
    flags = [f"--chown={ins.flags['chown']}"] if ins.flags.get("chown") else []
    into = dest.endswith("/") or len(sources) > 1
    for source in sources:
        if source.startswith("<<"):
            name = re.sub(r"^<<-?[\"']?(\w+)[\"']?$", r"\1", source)
            path = f"{target.rstrip('/')}/{name}" if into else target
            body = ins.heredocs.get(name, "")
            step(
                "RUN",
                f"mkdir -p {shlex.quote(os.path.dirname(path))} && "
                f"cat > {shlex.quote(path)} <<'HG_EOF'\n{body}HG_EOF",
            )
            continue
        if "://" in source or source.startswith("git@"):
            raise UnsupportedHarborTask(
                f"{env_dir.parent.name}: {ins}: {ins.kind} from a URL needs the network", "network"
            )
        for match in df.context_sources(env_dir, source, patterns):
            if ins.kind == "ADD" and (env_dir / match).is_file() and df.is_archive(match):
                stash = f"/opt/.hg-add-{index}"
                step("COPY", match, f"{stash}/")
                name = shlex.quote(f"{stash}/{os.path.basename(match)}")
                step(
                    "RUN",
                    f"mkdir -p {shlex.quote(target)} && tar -xf {name} -C {shlex.quote(target)} "
                    f"&& rm -rf {stash}",
                )
                continue
            files = df.context_files(env_dir, match, patterns)
            whole = (env_dir / match).is_dir() and len(files) == _count_files(env_dir / match)
            if not (env_dir / match).is_dir() or whole:
                many = into or len(sources) > 1
                step("COPY", *flags, match, f"{target.rstrip('/')}/" if many else target)
                continue
            for rel in files:  # .dockerignore leaves some of the folder out: file by file
                dest_file = f"{target.rstrip('/')}/{rel}"
                step("COPY", *flags, f"{match.rstrip('/')}/{rel}" if match != "." else rel, dest_file)


def _count_files(folder: Path) -> int:
    return sum(
        len(files) + sum(os.path.islink(os.path.join(d, x)) for x in dirs)
        for d, dirs, files in os.walk(folder)
    )


# -- safe copies -------------------------------------------------------------------------------


def _toml() -> Any:
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise ImportError("reading task.toml on Python 3.10 needs tomli: pip install tomli") from None
    return tomllib


def _no_symlink(folder: Path, rel: str) -> None:
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


def _tests_files(tests: Path, name: str, what: str = "tests") -> list[tuple[str, bool]]:
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


def _copy_tests(tests: Path, dest: Path, name: str) -> None:
    """Copy ``tests/`` without following symlinks (each file opened with ``O_NOFOLLOW``);
    a later folder's files replace an earlier one's (a step's tests over the task's)."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel, is_dir in _tests_files(tests, name):
        target = dest / rel
        if is_dir:
            target.mkdir(mode=0o755, exist_ok=True)
            continue
        fd = os.open(tests / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise UnsupportedHarborTask(f"{name}: tests/{rel} is not a regular file", "bad-file")
            target.write_bytes(f.read(MAX_TESTS_BYTES + 1))
            mode = os.fstat(f.fileno()).st_mode
        os.chmod(target, 0o755 if mode & 0o111 else 0o644)
