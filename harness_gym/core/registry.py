"""Task registry and Gymnasium registration of every (task, preset) pair.

Tasks are registered by id (``register_task``). :func:`register_envs` then registers with
Gymnasium ``harness_gym/<Task>-<Preset>-v0`` for every task and every preset that applies to it
(:func:`~harness_gym.core.presets.preset_applies`: a convention written for web pages is not
registered with a shell task), and ``harness_gym/<Task>-v0``, which takes ``harness=`` (preset
name, dict, YAML path or Harness). Ids under the deprecated preset names stay registered for
one release (making one warns) but are not listed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import Harness, register_family_options
from harness_gym.core.plugins import PluginError, failures_note, load_plugins, set_loader
from harness_gym.core.presets import (
    DEPRECATED_PRESETS,
    FAMILY_ALSO,
    PRESETS,
    Preset,
    add_family_presets,
    preset_applies,
    preset_for_family,
    task_family,
)
from harness_gym.core.task import Task

NAMESPACE = "harness_gym"
#: What ``gym.make`` calls for a task of ``TASKS`` (imported only when an env is built).
ENTRY_POINT = "harness_gym.core.registry:make_env"
TASKS: dict[str, type[Task]] = {}
#: Tasks of families registered with :func:`register_family` (some kept out of ``TASKS``, which
#: lists the fast suite): task id -> (class, or its ``"module:Class"`` until it is first
#: needed, and the entry point that builds its envs). ``get_task`` and ``make_env`` know them
#: (:func:`family_task` gives the class); ``FAMILY_ENV_IDS`` lists their listed env ids.
FAMILY_TASKS: dict[str, tuple[type[Task] | str, str]] = {}
FAMILY_ENV_IDS: list[str] = []
#: The family of each task registered with :func:`register_family` (task id -> family name).
TASK_FAMILIES: dict[str, str] = {}


def register_task(task_cls: type[Task]) -> type[Task]:
    """Add a task class to the registry (usable as a class decorator)."""
    existing = TASKS.get(task_cls.task_id)
    if existing is not None and existing is not task_cls:
        raise ValueError(f"task id {task_cls.task_id!r} is already registered by {existing}")
    TASKS[task_cls.task_id] = task_cls
    return task_cls


def get_task(task_id: str) -> type[Task]:
    """The task class registered as ``task_id``, loading installed plugins if it is not yet."""
    if task_id not in TASKS and task_id in FAMILY_TASKS:
        return family_task(task_id)
    if task_id not in TASKS:
        load_plugins(["tasks", "families"])
    if task_id not in TASKS and task_id in FAMILY_TASKS:
        return family_task(task_id)
    try:
        return TASKS[task_id]
    except KeyError:
        raise KeyError(
            f"unknown task {task_id!r}; registered tasks: {sorted(TASKS)}{failures_note()}"
        ) from None


def family_task(task_id: str) -> type[Task]:
    """The class of a family's task, imported the first time it is needed."""
    task, entry_point = FAMILY_TASKS[task_id]
    if isinstance(task, str):
        module, _, name = task.partition(":")
        task = getattr(importlib.import_module(module), name)
        FAMILY_TASKS[task_id] = (task, entry_point)
    return task  # type: ignore[return-value]


def make_env(
    task: str | type[Task] | Task,
    harness: Harness | str | Mapping[str, Any] | Path | None = None,
    render_mode: str | None = None,
) -> HarnessEnv:
    """Build a HarnessEnv from a task id (or class/instance) and any harness form; a task of a
    family outside ``TASKS`` gets its family's env (e.g. a terminal task's sandboxed env)."""
    name = task if isinstance(task, str) else getattr(task, "task_id", None)
    family = FAMILY_TASKS.get(name) if name not in TASKS else None  # type: ignore[arg-type]
    if family is not None and (isinstance(task, str) or task is family_task(name)):  # type: ignore[arg-type]
        if family[1] == ENTRY_POINT:  # a family of plain HarnessEnvs
            return HarnessEnv(family_task(name), harness=harness, render_mode=render_mode)  # type: ignore[arg-type]
        maker = gym.envs.registration.load_env_creator(family[1])
        return maker(task=name, harness=harness, render_mode=render_mode)
    if isinstance(task, str):
        task = get_task(task)
    return HarnessEnv(task, harness=harness, render_mode=render_mode)


def env_id(task_id: str, preset: str | None = None) -> str:
    return f"{NAMESPACE}/{task_id}-{preset}-v0" if preset else f"{NAMESPACE}/{task_id}-v0"


def register_envs(task_ids: list[str] | None = None) -> list[str]:
    """Register ``<Task>-<Preset>-v0`` and ``<Task>-v0`` ids with Gymnasium; return them."""
    ids = []
    for task_id in task_ids or sorted(TASKS):
        for preset in [None, *_presets_for(TASKS[task_id])]:
            new_id = env_id(task_id, preset)
            if new_id not in gym.registry:
                add_env_spec(new_id, ENTRY_POINT, {"task": task_id, "harness": preset or "Json"})
            if preset not in DEPRECATED_PRESETS:
                ids.append(new_id)
    return ids


def add_env_spec(new_id: str, entry_point: str, kwargs: dict[str, Any]) -> None:
    """Put one id into Gymnasium's registry (a plain dict), replacing any spec it had.

    ``gym.register`` checks each new id against every registered one, so registering the
    package's thousands of ids through it costs seconds; these ids are built by
    :func:`env_id` (well formed, one version each), so the spec goes straight in. The entry
    point is a ``"module:callable"`` string: ``gym.make`` imports it only when it builds the env.
    """
    gym.registry[new_id] = EnvSpec(
        id=new_id, entry_point=entry_point, kwargs=kwargs, disable_env_checker=False
    )


def _presets_for(task: type[Task]) -> list[str]:
    """The presets registered with ``task``: those that apply, then the deprecated names."""
    return _with_deprecated([p for p in PRESETS if preset_applies(p, task)])


def _with_deprecated(current: list[str]) -> list[str]:
    return current + [old for old, new in DEPRECATED_PRESETS.items() if new in current]


def register_family(
    tasks: Sequence[type[Task]] | Mapping[str, str],
    entry_point: str = ENTRY_POINT,
    add_to_task_registry: bool = True,
    family: str | None = None,
    *,
    presets: Mapping[str, Harness | Preset | Mapping[str, Any]]
    | Callable[[], Mapping[str, Harness | Preset | Mapping[str, Any]]]
    | None = None,
    options: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
    also: Sequence[str] = (),
) -> list[str]:
    """Register a task family: its Gymnasium ids, its own presets and its own factors.

    Registers ``<Task>-v0`` and ``<Task>-<Preset>-v0`` for every preset the tasks take, made by
    ``entry_point`` (a ``"module:callable"`` taking ``task=, harness=, render_mode=``; by
    default a plain :class:`HarnessEnv`, or the family's env class whose
    :meth:`~harness_gym.core.env.HarnessEnv.bind_harness` applies its options). Idempotent; an
    id another entry point holds is replaced. Returns the ids. With ``add_to_task_registry``
    the tasks also join ``TASKS``.

    Args:
        tasks: the classes, or (so that registering imports none of them) a mapping of task id
            to ``"module:Class"`` with ``family=`` (such tasks stay out of ``TASKS``).
        family: the family name (default: the classes' declared ``Task.family``).
        presets: presets only this family's tasks take (name -> Harness, Preset or spec dict;
            or a callable returning that mapping, called once ``options`` is registered so
            that its harnesses may carry the family's own options): they join
            :data:`~harness_gym.core.presets.FAMILY_PRESETS`, get ids with every task, resolve
            as ``harness=`` names in the family's envs and show in ``harness-gym list presets``.
        options: the normalizer of the family's ``family_options: {family: {...}}`` (options
            -> normalized options; raises HarnessSpecError on a bad one).
        also: other families whose presets this family's tasks take too (the real-browser
            family takes the web family's: its tasks are web pages).

    A family outside the package registers itself from a ``harness_gym.families`` entry point
    (a callable run at ``import harness_gym``), so adding one edits no file of the package.
    """
    if isinstance(tasks, Mapping):
        if family is None or add_to_task_registry:
            raise ValueError(
                "tasks given as 'module:Class' names need family= and add_to_task_registry=False"
            )
    elif family is None:
        declared = {task_family(t) for t in tasks}
        family = declared.pop() if len(declared) == 1 else None
    if (presets or options or also) and family is None:
        raise ValueError(
            "register_family(presets=, options=, also=) needs family= (or tasks declaring one family)"
        )
    if also:
        FAMILY_ALSO[family] = tuple(also)  # type: ignore[index]
    if options is not None:
        register_family_options(family, options)  # type: ignore[arg-type]
    if callable(presets):
        presets = presets()
    own = add_family_presets(family, presets) if presets else []  # type: ignore[arg-type]
    if isinstance(tasks, Mapping):
        generic = _with_deprecated([p for p in PRESETS if preset_for_family(p, family)])  # type: ignore[arg-type]
        entries = [(task_id, path, generic + own) for task_id, path in tasks.items()]
    else:
        entries = [(task.task_id, task, _presets_for(task) + own) for task in tasks]
    ids = []
    for task_id, task, task_presets in entries:
        if family is not None:
            TASK_FAMILIES[task_id] = family
        if not (isinstance(task, str) and isinstance(FAMILY_TASKS.get(task_id, ("",))[0], type)):
            FAMILY_TASKS[task_id] = (task, entry_point)  # (a class already imported stays)
        if add_to_task_registry:
            register_task(task)  # type: ignore[arg-type]
        for preset in [None, *task_presets]:
            new_id = env_id(task_id, preset)
            spec = gym.registry.get(new_id)
            if spec is None or spec.entry_point != entry_point:
                add_env_spec(new_id, entry_point, {"task": task_id, "harness": preset or "Json"})
            if preset not in DEPRECATED_PRESETS:
                ids.append(new_id)
    plain = {env_id(task_id) for task_id, _, _ in entries}
    add_family_env_ids(i for i in ids if i not in plain)
    return ids


def family_of(task_id: str) -> str | None:
    """The family of a registered task id (declared, or given to :func:`register_family`)."""
    if task_id in TASK_FAMILIES:
        return TASK_FAMILIES[task_id]
    return task_family(TASKS[task_id]) if task_id in TASKS else None


def add_family_env_ids(ids: Iterable[str]) -> None:
    """Append ids to :data:`FAMILY_ENV_IDS`, each once."""
    listed = set(FAMILY_ENV_IDS)
    for new_id in ids:
        if new_id not in listed:
            listed.add(new_id)
            FAMILY_ENV_IDS.append(new_id)


def registered_env_ids() -> list[str]:
    """Every ``harness_gym/<Task>-<Preset>-v0`` id (the preset-less ids excluded), plugins' too."""
    load_plugins(["tasks"])
    return [env_id(t, p) for t in sorted(TASKS) for p in PRESETS if preset_applies(p, TASKS[t])]


def _register_task_plugin(name: str, obj: Any) -> None:
    """A ``harness_gym.tasks`` entry point: a Task subclass or a list of them."""
    tasks = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    if not tasks or not all(isinstance(t, type) and issubclass(t, Task) for t in tasks):
        raise PluginError(f"a harness_gym.tasks entry point must name a Task subclass or a list, got {obj!r}")
    for task in tasks:
        register_task(task)
    register_envs([t.task_id for t in tasks])


def _register_family_plugin(name: str, obj: Any) -> None:
    """A ``harness_gym.families`` entry point: a callable that registers a family (it calls
    :func:`register_family`)."""
    if not callable(obj):
        raise PluginError(f"a harness_gym.families entry point must name a callable, got {obj!r}")
    obj()


set_loader("tasks", _register_task_plugin)
set_loader("families", _register_family_plugin)
