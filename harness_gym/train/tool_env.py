"""The native-tool counterpart of the rollout: a harness env as TRL's ``environment_factory``.

TRL's ``GRPOTrainer(environment_factory=...)`` makes one instance per rollout, calls
``reset(**row)`` (its string is appended to the prompt), exposes the instance's public
methods as tools (their names, type hints and Google-style docstrings become the function
schemas the chat template renders), runs the tool calls the model emits, and scores the
rollout with ``get_reward()``. :func:`tool_environment` builds such a class for one harness:
one method per tool the harness exposes, named and described as the harness names and
describes it; a call is written back in the harness's syntax and parsed by the env, so the
invalid-action policy, the budget and the ceiling are the harness's.

Limits of this route, which is why :class:`~harness_gym.train.lm_rollout.HarnessRollout` is
the default: TRL lists an environment's methods in alphabetical order (the harness's
``tool_order`` is not honoured), a harness's tools must have names that are Python
identifiers, a group plays one harness (``within`` grouping only: use a ``dict`` of
factories keyed by the row's ``environment`` column for several harnesses), and the model
must emit tool calls its chat template can parse.
"""

from __future__ import annotations

import inspect
import keyword
from typing import Any

from harness_gym.core.harness import Harness

_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}


def tool_environment(task: str, harness: Harness) -> type:
    """A class for ``environment_factory``: the harness's tools over an env of ``task``.

    Instances keep their env; ``reset(seed=..., **row)`` starts an episode on the row's seed.
    """
    from harness_gym.core.registry import make_env

    probe = make_env(task, harness)
    tools = probe.bound.openai_tools
    probe.close()
    namespace: dict[str, Any] = {
        "__doc__": f"{task} under harness {harness.id}, its tools as methods.",
        "__init__": _init(task, harness),
        "reset": _reset,
        "get_reward": _get_reward,
        "harness_tool_order": tuple(t["function"]["name"] for t in tools),
    }
    for tool in tools:
        fn = tool["function"]
        name = fn["name"]
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_") or name in namespace:
            raise ValueError(
                f"harness {harness.id} names a tool {name!r}, which cannot be a method name; "
                "environment_factory needs tool names that are Python identifiers"
            )
        namespace[name] = _tool_method(name, fn)
    return type(f"{task}Tools", (), namespace)


def _init(task: str, harness: Harness) -> Any:
    def __init__(self: Any) -> None:
        from harness_gym.core.registry import make_env

        self.env = make_env(task, harness)
        self.episode_return = 0.0
        self.done = True

    return __init__


def _reset(self: Any, seed: int = 0, **_: Any) -> str:
    observation, _info = self.env.reset(seed=int(seed))
    self.episode_return = 0.0
    self.done = False
    return observation


def _get_reward(self: Any) -> float:
    return float(self.episode_return)


def _tool_method(name: str, function: dict[str, Any]) -> Any:
    """A method ``name(self, **arguments) -> str`` with the signature and docstring TRL reads."""
    properties = function.get("parameters", {}).get("properties", {})
    required = set(function.get("parameters", {}).get("required", []))

    def call(self: Any, **arguments: Any) -> str:
        if self.done:
            raise RuntimeError("the episode has ended; no more actions")
        text = self.env.bound.write_call(name, arguments)
        observation, reward, terminated, truncated, _info = self.env.step(text)
        self.episode_return += float(reward)
        self.done = bool(terminated or truncated)
        return observation

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    lines = [function.get("description") or f"The {name} action.", "", "Args:"]
    for arg, schema in properties.items():
        kind = _TYPES.get(schema.get("type", "string"), str)
        default = inspect.Parameter.empty if arg in required else None
        params.append(
            inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
        )
        annotations[arg] = kind
        lines.append(f"    {arg}: {schema.get('description') or arg}")
    if not properties:
        lines = lines[:-2]
    lines += ["", "Returns:", "    The observation after the action."]
    call.__name__ = call.__qualname__ = name
    call.__doc__ = "\n".join(lines)
    call.__annotations__ = annotations
    call.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    return call
