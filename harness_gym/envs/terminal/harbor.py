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

This module loads and registers task folders; the rest is one concept per module: the
folder format (``task.toml``, steps, ``tests/`` and ``solution/`` files) in
:mod:`~harness_gym.envs.terminal.harbor_format`, what ``environment/`` asks of the sandbox in
:mod:`~harness_gym.envs.terminal.harbor_image`, the task's episodes in
:mod:`~harness_gym.envs.terminal.harbor_task` and verification (the verifier's tests and
environment, reading the reward, tampering) in :mod:`~harness_gym.envs.terminal.harbor_verify`.

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

import os
import re
from pathlib import Path
from typing import Any

from harness_gym.envs.terminal.catalog import HARBOR_DIRS_VARIABLE
from harness_gym.envs.terminal.harbor_format import (
    MAX_AGENT_SECONDS,
    UnsupportedHarborTask,
    check_config,
    network_policy,
    no_symlink,
    read_steps,
    resolve_env,
    task_description,
    toml_module,
    toml_section,
)
from harness_gym.envs.terminal.harbor_image import check_base, image_build_steps, read_environment
from harness_gym.envs.terminal.harbor_task import HarborTask
from harness_gym.envs.terminal.sandbox_limits import SandboxLimits
from harness_gym.envs.terminal.task import TerminalTask


def load_harbor_task(folder: str | Path) -> type[TerminalTask]:
    """A TerminalTask class for one Harbor task folder, or :class:`UnsupportedHarborTask`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UnsupportedHarborTask(f"{folder} is not a folder", "missing-files")
    if not (folder / "task.toml").is_file():
        raise UnsupportedHarborTask(f"{folder.name}: missing task.toml", "missing-files")
    no_symlink(folder, "task.toml")
    toml = toml_module()
    try:
        config = toml.loads((folder / "task.toml").read_text(encoding="utf-8"))
    except (toml.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UnsupportedHarborTask(
            f"{folder.name}: task.toml is not valid TOML ({err})", "bad-toml"
        ) from None
    check_config(folder.name, config)
    steps = read_steps(folder, config)
    plan = read_environment(folder, toml_section(config, "environment").get("workdir"))
    env = {
        **plan.env,
        **resolve_env(folder.name, toml_section(config, "environment").get("env"), "environment.env"),
    }
    check_base(folder.name, plan)
    build_steps = image_build_steps(folder, plan) if plan.needs_build else ()
    solution_env = resolve_env(folder.name, toml_section(config, "solution").get("env"), "solution.env")
    environment = toml_section(config, "environment")
    name = harbor_task_id(folder)
    metadata = toml_section(config, "metadata")
    per_step = int(metadata.get("max_steps", 20)) if str(metadata.get("max_steps", "")).isdigit() else 20
    memory = int(environment.get("memory_mb") or 4096) << 20
    attrs: dict[str, Any] = {
        "task_id": name,
        "description": task_description(config, folder),
        "folder": folder.resolve(),
        "plan": plan,
        "build_steps": build_steps,
        "built": None,
        "image_env": env,
        "solution_env": solution_env,
        "steps": tuple(steps),
        "reward_strategy": str(config.get("multi_step_reward_strategy") or "mean"),
        "network": network_policy(config),
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
    toml = toml_module()
    try:
        config = toml.loads((folder / "task.toml").read_text(encoding="utf-8"))
    except (OSError, toml.TOMLDecodeError, UnicodeDecodeError):
        config = {}
    plan = read_environment(folder, toml_section(config, "environment").get("workdir"))
    check_base(folder.name, plan)
    return plan.base_image, image_build_steps(folder, plan), folder / "environment"


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
