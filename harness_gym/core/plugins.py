"""Plugins: tasks, observation formats, tool styles and agents from other packages.

A package extends harness-gym through entry points (in its ``pyproject.toml``)::

    [project.entry-points."harness_gym.tasks"]
    CountDown = "my_pkg.tasks:CountDown"          # a Task subclass (or a list of them)
    [project.entry-points."harness_gym.formats"]
    toml_like = "my_pkg.formats:render_toml_like" # fields -> text: a new obs_format level
    [project.entry-points."harness_gym.tool_styles"]
    slash = "my_pkg.styles:SLASH"                 # a harness_gym.core.tools.ToolStyle (or Style)
    [project.entry-points."harness_gym.agents"]
    greedy = "my_pkg.agents:make_greedy"          # factory(env) -> Agent, spec "greedy"
    [project.entry-points."harness_gym.families"]
    support = "my_pkg.family:register"            # calls register_family(...): tasks, presets, options

``import harness_gym`` loads the task and family plugins, so that their ``harness_gym/<Task>-...-v0`` ids
work in a plain ``gym.make``; a failure there is reported by the next :func:`load_plugins`
call (the CLI's, as a warning line). The other kinds load when something needs them: the CLI
starts a verb, or a level is not among the built-in ones (:class:`LiveLevels`). Code that is not installed is
imported by name (:func:`import_modules`, the CLI's ``--import MODULE``); the names are kept
in ``HARNESS_GYM_IMPORT`` so worker processes import them too. A plugin that fails to load
(import error, wrong kind of object, a name that clashes with a built-in level) is reported in
one line naming it (:func:`load_errors`) and the other plugins still load.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib import metadata

#: Entry-point group of each kind of plugin.
GROUPS: dict[str, str] = {
    "tasks": "harness_gym.tasks",
    "families": "harness_gym.families",
    "formats": "harness_gym.formats",
    "tool_styles": "harness_gym.tool_styles",
    "agents": "harness_gym.agents",
}

#: Environment variable listing modules to import in every process (comma-separated).
IMPORT_VAR = "HARNESS_GYM_IMPORT"

#: Agents registered by name (``harness-gym eval --agent NAME``): name -> factory(env) -> Agent.
AGENTS: dict[str, Callable[[Any], Any]] = {}


class PluginError(Exception):
    """A plugin or ``--import`` module that cannot be loaded; the message names it."""


class PluginLoadWarning(UserWarning):
    """A plugin failed to load; the others did."""


@dataclass(frozen=True)
class PluginFailure:
    """One plugin that did not load: where it was declared and why."""

    group: str
    name: str
    value: str
    distribution: str
    reason: str

    def __str__(self) -> str:
        where = f" from {self.distribution}" if self.distribution else ""
        return (
            f"plugin {self.name!r} ({self.group} = {self.value!r}{where}) failed to load and is "
            f"skipped: {self.reason}"
        )


_loaded_groups: set[str] = set()
_imported: list[str] = []
_failures: list[PluginFailure] = []
_deferred: list[PluginFailure] = []
_loading = False


def register_agent(name: str, factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Make ``factory(env) -> Agent`` available as the agent spec ``name``."""
    if not callable(factory):
        raise PluginError(f"agent {name!r} must be a factory(env) -> Agent, got {type(factory).__name__}")
    if name in RESERVED_AGENT_NAMES or ":" in name or "@" in name or "?" in name:
        raise PluginError(
            f"agent name {name!r} clashes with a built-in agent spec ({', '.join(RESERVED_AGENT_NAMES)}, "
            "or a name with ':', '@' or '?'); choose another name"
        )
    existing = AGENTS.get(name)
    if existing is not None and existing is not factory:
        raise PluginError(f"agent {name!r} is already registered by {_qualname(existing)}")
    AGENTS[name] = factory
    return factory


#: Agent spec words the package itself reads; a plugin agent cannot take them.
RESERVED_AGENT_NAMES = ("random", "oracle", "llm")


def find_agent(name: str) -> Callable[[Any], Any] | None:
    """The factory registered as ``name`` (loading plugins first if needed), or ``None``."""
    if name not in AGENTS:
        load_plugins()
    return AGENTS.get(name)


# -- importing modules by name -------------------------------------------------------------


def import_modules(names: Iterable[str]) -> list[str]:
    """Import modules by name (the CLI's ``--import``) and remember them for worker processes.

    Raises:
        PluginError: a module is not installed (or not on ``PYTHONPATH``) or fails on import.
    """
    done = []
    for name in names:
        name = name.strip()
        if not name:
            raise PluginError("--import needs a module name such as my_package.tasks")
        _import(name, "--import")
        if name not in _imported:
            _imported.append(name)
        done.append(name)
    listed = [m for m in os.environ.get(IMPORT_VAR, "").split(",") if m]
    os.environ[IMPORT_VAR] = ",".join(dict.fromkeys([*listed, *done]))
    return done


def import_env_module(env_id: str) -> str:
    """For Gymnasium's ``module:id`` form, import ``module`` (which registers the id); return the id.

    Raises:
        PluginError: the module cannot be imported.
    """
    module, sep, bare = env_id.partition(":")
    if not sep:
        return env_id
    if not module or not bare:
        raise PluginError(f"env id {env_id!r}: write MODULE:ENV_ID, e.g. my_pkg.envs:harness_gym/Count-v0")
    _import(module, f"env id {env_id!r}")
    import_modules([module])
    return bare


def _import(name: str, what: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name and (name == err.name or name.startswith(err.name + ".")):
            raise PluginError(
                f"{what}: no module named {name!r} (install its package, or add its folder to PYTHONPATH)"
            ) from None
        raise PluginError(f"{what}: module {name!r} failed to import: {_reason(err)}") from None
    except Exception as err:  # noqa: BLE001 - any error in someone else's module is reported
        raise PluginError(f"{what}: module {name!r} failed to import: {_reason(err)}") from None


# -- entry points --------------------------------------------------------------------------


def load_plugins(
    kinds: Sequence[str] | None = None, warn: bool = True, defer: bool = False
) -> list[PluginFailure]:
    """Load every installed plugin of ``kinds`` (default: all) once per process.

    Also imports the modules named in ``HARNESS_GYM_IMPORT``. Returns the failures of this call;
    each also becomes a :class:`PluginLoadWarning` unless ``warn`` is false (the CLI prints them
    as ``harness-gym: warning:`` lines instead). With ``defer`` (``import harness_gym`` loads
    the task plugins so) this call reports nothing and the next call returns its failures.
    """
    global _loading
    if _loading:
        return []
    _loading = True
    new: list[PluginFailure] = []
    try:
        for module in [m for m in os.environ.get(IMPORT_VAR, "").split(",") if m]:
            if module not in _imported:
                _imported.append(module)
                try:
                    _import(module, IMPORT_VAR)
                except PluginError as err:
                    new.append(PluginFailure(IMPORT_VAR, module, module, "", str(err)))
        for kind in kinds or list(GROUPS):
            if kind not in GROUPS:
                raise ValueError(f"unknown plugin kind {kind!r}; kinds: {list(GROUPS)}")
            if kind in _loaded_groups:
                continue
            _loaded_groups.add(kind)
            for entry in _entry_points(GROUPS[kind]):
                failure = _load_entry(kind, entry)
                if failure is not None:
                    new.append(failure)
    finally:
        _loading = False
    _failures.extend(new)
    if defer:
        _deferred.extend(new)
        return []
    new, _deferred[:] = [*_deferred, *new], []
    if warn:
        for failure in new:
            warnings.warn(str(failure), PluginLoadWarning, stacklevel=2)
    return new


def load_errors() -> list[PluginFailure]:
    """Every plugin that failed to load in this process so far."""
    return list(_failures)


def failures_note() -> str:
    """A sentence for "unknown ..." errors when some plugin failed to load, else ``""``."""
    if not _failures:
        return ""
    return "; note: " + "; ".join(str(f) for f in _failures)


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    if not _may_declare(group):
        return []
    from importlib import metadata

    found = metadata.entry_points(group=group)
    seen: dict[tuple[str, str], metadata.EntryPoint] = {}
    for entry in found:  # the same distribution on sys.path twice lists its entry points twice
        seen.setdefault((entry.name, entry.value), entry)
    return sorted(seen.values(), key=lambda e: (e.name, e.value))


def _may_declare(group: str) -> bool:
    """Whether a distribution on ``sys.path`` may declare entry points of ``group``.

    A look at the ``*.dist-info`` / ``*.egg-info`` ``entry_points.txt`` files that
    ``importlib.metadata`` reads, so that ``import harness_gym`` does not import it (about a
    tenth of the import time) when no plugin is installed. What it cannot look through (a zip
    on ``sys.path``, a finder of distributions other than the path finder) answers yes.
    """
    import sys
    from importlib.machinery import PathFinder

    if any(hasattr(f, "find_distributions") and f is not PathFinder for f in sys.meta_path):
        return True
    header = f"[{group}]"
    for entry in sys.path:
        folder = entry or os.curdir
        if os.path.isfile(folder):
            return True
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                try:
                    with open(os.path.join(folder, name, "entry_points.txt"), encoding="utf-8") as fh:
                        if header in fh.read():
                            return True
                except OSError:
                    continue
    return False


def _load_entry(kind: str, entry: metadata.EntryPoint) -> PluginFailure | None:
    dist = getattr(getattr(entry, "dist", None), "name", "") or ""

    def failure(reason: str) -> PluginFailure:
        return PluginFailure(entry.group, entry.name, entry.value, dist, reason)

    try:
        obj = entry.load()
    except Exception as err:  # noqa: BLE001 - a broken plugin must not stop the others
        return failure(_reason(err))
    try:
        _loader(kind)(entry.name, obj)
    except (PluginError, ValueError, TypeError) as err:
        return failure(str(err))
    except Exception as err:  # noqa: BLE001
        return failure(_reason(err))
    return None


#: How each kind of plugin is registered: kind -> loader(entry point name, loaded object). The
#: module that owns a kind's registry installs its loader (:func:`set_loader`), so this module
#: imports none of them (the registry, the formats and the tool styles all import this one).
_REGISTER: dict[str, Callable[[str, Any], Any]] = {"agents": register_agent}


def set_loader(kind: str, loader: Callable[[str, Any], Any]) -> None:
    """Install how plugins of ``kind`` register: ``loader(name, obj)`` raises
    :class:`PluginError` (or ``ValueError`` / ``TypeError``) on an object of the wrong kind."""
    if kind not in GROUPS:
        raise ValueError(f"unknown plugin kind {kind!r}; kinds: {list(GROUPS)}")
    _REGISTER[kind] = loader


def _loader(kind: str) -> Callable[[str, Any], Any]:
    try:
        return _REGISTER[kind]
    except KeyError:  # the owning module installs it on import, and harness_gym imports them all
        raise RuntimeError(f"no loader for {kind!r} plugins is installed; import harness_gym first") from None


def _reason(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', type(obj).__name__)}"


# -- levels that include the plugins' --------------------------------------------------------


class LiveLevels(Collection[str]):
    """The level names of a registry (formats, tool styles), plugins included.

    A name not among the registered ones loads the plugins of ``kind`` before the answer, so
    a harness spec or YAML file naming a plugin's level validates without an explicit import.
    """

    def __init__(self, registry: Mapping[str, Any], kind: str) -> None:
        self.registry = registry
        self.kind = kind

    def __contains__(self, name: object) -> bool:
        if name in self.registry:
            return True
        load_plugins([self.kind])
        return name in self.registry

    def __iter__(self) -> Iterator[str]:
        load_plugins([self.kind])
        return iter(list(self.registry))

    def __len__(self) -> int:
        load_plugins([self.kind])
        return len(self.registry)

    def __repr__(self) -> str:
        return f"LiveLevels({list(self.registry)!r})"
