"""Agents named by a string, so sweeps can rebuild them in worker processes.

An agent spec is one of:

====================  ==========================================================================
``random``            uniform over the legal actions (as the harness writes them)
``oracle``            the task oracle, written through the harness (reaches the ceiling)
``oracle@PRESET``     the task oracle written in the action syntax of harness preset ``PRESET``
                      (e.g. ``oracle@Json``) until a harness error message corrects it: a
                      perfect policy with one harness's habits (:class:`StyledOracleAgent`)
``sb3:DIR``           a saved Stable-Baselines3 model: ``harness_gym.baselines.sb3.load_agent``
``text:DIR``          a saved text policy: ``harness_gym.baselines.text_policy.load_agent``
``llm``               the embedded language model (SmolLM2-135M-Instruct), in process
``hf:PATH``           a Hugging Face model folder, in process
``openai:MODEL@URL``  a model on an OpenAI-compatible server (vLLM, llama.cpp, hosted APIs);
                      options after ``?``, e.g. ``llm?temperature=0.7`` (:mod:`harness_gym.llm.spec`)
``MODULE:FACTORY``    any callable ``FACTORY(env) -> Agent`` in an importable module
``FILE.py:FACTORY``   the same, from a Python file
``NAME``              an agent a plugin registers (entry point group ``harness_gym.agents``, or
                      ``harness_gym.core.plugins.register_agent`` in an ``--import`` module)
====================  ==========================================================================

An *Agent* has ``reset(seed)`` and ``act(observation, info) -> str`` (see
:class:`harness_gym.baselines.agents.Agent`). Runners call ``reset(seed)`` with the episode
seed before every episode, so a seeded agent is deterministic per episode. In the Python API a
callable ``factory(env) -> Agent`` may be passed directly; worker processes import it by
``module:qualname``, so it must be defined at the top level of an importable module (or run
the sweep with ``workers=0``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

AGENT_FORMS = (
    "random",
    "oracle",
    "oracle@PRESET",
    "sb3:DIR",
    "text:DIR",
    "llm",
    "hf:PATH",
    "openai:MODEL@URL",
    "MODULE:FACTORY",
    "FILE.py:FACTORY",
    "NAME (a plugin's agent)",
)

#: Model hooks: spec prefix -> (module providing ``load_agent(path, env) -> Agent``, extra to
#: install). Without ``load_agent`` the module's own loader is used: ``sb3.load(path).agent()``,
#: ``TextPolicyAgent(TextPolicy.load(path / "policy.pt"))``.
MODEL_HOOKS = {
    "sb3": ("harness_gym.baselines.sb3", "sb3"),
    "text": ("harness_gym.baselines.text_policy", "torch"),
}

AgentFactory = Callable[[gym.Env], Any]


class AgentSpecError(ValueError):
    """An agent spec that names no agent this package can build."""


def _forms() -> str:
    return ", ".join(AGENT_FORMS)


@dataclass(frozen=True)
class AgentSpec:
    """A parsed agent spec: ``name`` is what rows record, ``kind`` how to build it."""

    name: str
    kind: str  # random | oracle | oracle@ | model | llm | callable | plugin
    target: str = ""
    obj: Any = field(default=None, compare=False, repr=False)

    def validate(self) -> None:
        """Fail now, with a clear message, if the agent cannot be built (imports, paths)."""
        self.factory()

    def factory(self) -> AgentFactory:
        """A callable ``factory(env) -> Agent``."""
        if self.kind == "random":
            from harness_gym.baselines.agents import RandomAgent

            return lambda env: RandomAgent()
        if self.kind == "oracle":
            from harness_gym.baselines.agents import OracleAgent

            return OracleAgent
        if self.kind == "oracle@":
            from harness_gym.core.presets import get_preset

            preset = get_preset(self.target)
            return lambda env: StyledOracleAgent(env, preset)
        if self.kind == "model":
            return _model_factory(self.name.split(":", 1)[0], self.target)
        if self.kind == "llm":
            from harness_gym.llm.spec import agent_factory, parse_llm_spec

            return agent_factory(parse_llm_spec(self.target))
        if self.kind == "callable":
            return self.obj if self.obj is not None else _import_target(self.target)
        if self.kind == "plugin":
            from harness_gym.core.plugins import failures_note, find_agent

            factory = find_agent(self.target)
            if factory is None:
                raise AgentSpecError(f"unknown agent {self.target!r}: no plugin has it{failures_note()}")
            return factory
        raise AssertionError(self.kind)

    @property
    def batched(self) -> bool:
        """Whether rollouts should keep many episodes in flight and batch this agent's
        requests (language models): such cells run in the sweep's own process."""
        return self.kind == "llm"

    def portable(self) -> AgentSpec:
        """The same spec with file and directory paths made absolute (for worker processes)."""
        if self.kind == "model":
            return AgentSpec(self.name, self.kind, str(Path(self.target).resolve()), self.obj)
        if self.kind == "callable" and self.obj is None:
            where, _, attr = self.target.rpartition(":")
            if _is_file(where):
                return AgentSpec(self.name, self.kind, f"{Path(where).resolve()}:{attr}")
        return self

    def build(self, env: gym.Env) -> Any:
        """Build the agent for ``env`` and check it speaks the agent protocol.

        A user's factory (``MODULE:FACTORY``, a file, a plugin) that raises is an
        :class:`AgentSpecError` naming it; the built-in agents' errors propagate (bugs)."""
        factory = self.factory()
        if self.kind in ("callable", "plugin"):
            try:
                agent = factory(env)
            except Exception as err:  # noqa: BLE001 - the user's code
                raise AgentSpecError(f"agent {self.name!r}: its factory raised {_user_error(err)}") from None
        else:
            agent = factory(env)
        missing = [m for m in ("reset", "act") if not callable(getattr(agent, m, None))]
        if missing:
            raise AgentSpecError(
                f"agent {self.name!r} built a {type(agent).__name__} without {' and '.join(missing)}(); "
                "an agent needs reset(seed) and act(observation, info) -> str"
            )
        return agent


def parse_agent(spec: str | AgentSpec | Callable[..., Any]) -> AgentSpec:
    """Parse an agent spec (string, :class:`AgentSpec` or factory callable) and validate it.

    Raises:
        AgentSpecError: unknown name, missing file or directory, import failure, or a
            ``MODULE:FACTORY`` that is not callable; the message lists the valid forms.
    """
    if isinstance(spec, AgentSpec):
        parsed = spec
    elif callable(spec) and not isinstance(spec, str):
        module = getattr(spec, "__module__", None) or "__main__"
        qualname = getattr(spec, "__qualname__", None) or type(spec).__name__
        parsed = AgentSpec(f"{module}:{qualname}", "callable", f"{module}:{qualname}", obj=spec)
    elif isinstance(spec, str):
        parsed = _parse_string(spec.strip())
    else:
        raise AgentSpecError(
            f"an agent is a spec string or a factory callable, got {type(spec).__name__}; forms: {_forms()}"
        )
    parsed.validate()
    return parsed


def make_agent(spec: str | AgentSpec | Callable[..., Any], env: gym.Env) -> Any:
    """Build the agent a spec names for ``env``."""
    return parse_agent(spec).build(env)


def _parse_string(spec: str) -> AgentSpec:
    if spec in ("random", "oracle"):
        return AgentSpec(spec, spec)
    if spec.startswith("oracle@"):
        from harness_gym.core.harness import HarnessSpecError
        from harness_gym.core.presets import PRESETS, get_preset

        try:
            get_preset(spec.split("@", 1)[1])
        except HarnessSpecError:
            raise AgentSpecError(
                f"unknown agent {spec!r}: oracle@PRESET takes a preset name, one of {list(PRESETS)}"
            ) from None
        return AgentSpec(spec, "oracle@", spec.split("@", 1)[1])
    from harness_gym.llm.spec import LLMSpecError, is_llm_spec, parse_llm_spec

    if is_llm_spec(spec):
        try:
            parsed = parse_llm_spec(spec)
        except LLMSpecError as err:
            raise AgentSpecError(str(err)) from None
        return AgentSpec(parsed.name, "llm", parsed.text)  # named without how it is reached
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in MODEL_HOOKS:
        if not rest:
            raise AgentSpecError(f"agent {spec!r} names no directory; write {prefix}:DIR")
        if not Path(rest).exists():
            raise AgentSpecError(f"agent {spec!r}: no saved model at {rest!r} (path not found)")
        return AgentSpec(spec, "model", rest)
    if sep and rest and prefix:
        return AgentSpec(spec, "callable", spec)
    from harness_gym.core.plugins import AGENTS, failures_note, find_agent

    if not sep and find_agent(spec) is not None:
        return AgentSpec(spec, "plugin", spec)
    plugins = f"; plugin agents: {sorted(AGENTS)}" if AGENTS else ""
    raise AgentSpecError(f"unknown agent {spec!r}; valid forms: {_forms()}{plugins}{failures_note()}")


def _model_factory(prefix: str, path: str) -> AgentFactory:
    """``module.load_agent(path, env)``; without it, the module's own loader (cached per process)."""
    module_name, extra = MODEL_HOOKS[prefix]
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise AgentSpecError(
            f"agent '{prefix}:{path}' needs {module_name}, which failed to import ({err}); "
            f"install the extra: pip install 'harness-gym[{extra}]'"
        ) from None
    load = getattr(module, "load_agent", None)
    if callable(load):
        return lambda env: load(path, env)
    if prefix == "sb3" and callable(getattr(module, "load", None)):
        return lambda env: _loaded(prefix, path, lambda: module.load(path)).agent()
    if prefix == "text" and hasattr(module, "TextPolicy") and hasattr(module, "TextPolicyAgent"):
        file = Path(path) / "policy.pt" if Path(path).is_dir() else Path(path)
        return lambda env: module.TextPolicyAgent(_loaded(prefix, path, lambda: module.TextPolicy.load(file)))
    raise AgentSpecError(f"{module_name} has no load_agent(path, env) function")


_MODELS: dict[tuple[str, str], Any] = {}


def _loaded(prefix: str, path: str, load: Callable[[], Any]) -> Any:
    key = (prefix, str(Path(path).resolve()))
    if key not in _MODELS:
        _MODELS[key] = load()
    return _MODELS[key]


def _import_target(target: str) -> AgentFactory:
    where, _, attr = target.rpartition(":")
    try:
        if _is_file(where):
            module = _load_file(Path(where))
        else:
            module = importlib.import_module(where)
    except AgentSpecError:
        raise
    except ImportError as err:
        raise AgentSpecError(
            f"unknown agent {target!r}: cannot import module {where!r} ({err}); valid forms: {_forms()}"
        ) from None
    except Exception as err:  # noqa: BLE001 - the user's code: a syntax error, a raise on import
        raise AgentSpecError(f"agent {target!r}: importing {where!r} failed: {_user_error(err)}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AgentSpecError(f"unknown agent {target!r}: {where!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise AgentSpecError(f"agent {target!r} is a {type(obj).__name__}, not a factory(env) -> Agent")
    return obj


def _user_error(err: BaseException) -> str:
    """An exception from the user's code on one line, with the file and line of a syntax error."""
    if isinstance(err, SyntaxError):
        return f"SyntaxError: {err.msg} ({err.filename}, line {err.lineno})"
    return f"{type(err).__name__}: {err}"


def _is_file(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def _load_file(path: Path) -> Any:
    """Import a Python file once per process and version (keyed by its path and mtime)."""
    if not path.is_file():
        raise AgentSpecError(f"agent file {str(path)!r} not found")
    resolved = path.resolve()
    stamp = f"{resolved}:{resolved.stat().st_mtime_ns}"  # an edited file is imported anew
    name = "harness_gym_agent_" + hashlib.sha1(stamp.encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, resolved)
    if loader_spec is None or loader_spec.loader is None:
        raise AgentSpecError(f"cannot import agent file {str(path)!r}")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception:
        del sys.modules[name]
        raise
    return module


class StyledOracleAgent:
    """The task oracle with one harness's habits: a small model of harness mismatch.

    It writes the oracle's action in a fixed harness's syntax (``style``) whatever the env's
    harness, until the harness shows it an error message (``invalid_action="feedback"``);
    from then on, for the rest of the episode, it writes in the harness's own syntax, as a
    language model might after reading the error. So it succeeds where the deployed harness
    parses its habits, or shows errors and leaves budget for one wasted step.
    """

    def __init__(self, env: gym.Env, style: Any) -> None:
        from harness_gym.core.env import unwrap_harness_env

        self.env = unwrap_harness_env(env, "StyledOracleAgent")
        self.style = style
        self.name = "oracle@" + style.id
        self._bound: dict[Any, Any] = {}
        self.adapted = False

    def reset(self, seed: int | None = None) -> None:
        self.adapted = False

    def act(self, observation: str, info: dict[str, Any]) -> str:
        if info.get("last_error") and self.env.harness.invalid_action == "feedback":
            self.adapted = True
        if self.adapted:
            return self.env.oracle_action()
        task = self.env.task
        key = (tuple(task.field_names), id(task.action_specs))
        if key not in self._bound:
            self._bound[key] = self.style.bind(task.field_names, task.action_specs)
        return self._bound[key].format_action(task.oracle())
