"""Perturbation wrappers: Gymnasium wrappers that change the harness of a HarnessEnv.

Each wrapper applies one pure :class:`~harness_gym.core.perturbations.Perturbation` to the
wrapped env's harness spec, now and at every reset; none edits rendered strings. Wrappers
compose in any order, and a stack equals applying its perturbations to the spec directly,
innermost first::

    env = ReorderFields(RestyleTools(gym.make("harness_gym/EnterText-Json-v0"), "xml"))
    # same env as make_env("EnterText", Harness(tool_style="xml", field_order="reversed"))

``info["perturbations"]`` lists what was applied. A wrapper keeps its perturbation to
itself and sends it down with each reset (:class:`~harness_gym.core.env.HarnessRequest`), so
the env it wraps is unchanged: one env can sit under several stacks, and ``env.reset()``
still presents ``env``'s own harness. ``wrapper.harness`` is the harness the stack presents.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from harness_gym.core import perturbations as P
from harness_gym.core.env import HarnessRequest, presented_harness, unwrap_harness_env
from harness_gym.core.perturbations import Perturbation
from harness_gym.wrappers.harness_wrapper import HarnessWrapper


class PerturbHarness(HarnessWrapper):
    """Apply any perturbation (a pure ``Harness -> Harness`` function) to the stack's harness.

    The perturbed harness is checked against the task now: a perturbation that makes an
    invalid harness raises :class:`~harness_gym.core.harness.HarnessSpecError` here.
    """

    def __init__(self, env: gym.Env, perturbation: Perturbation) -> None:
        super().__init__(env)
        self.perturbation = perturbation
        task = self.harness_env.task
        perturbation(presented_harness(env)).bind(task.field_names, task.action_specs)

    def harness_request(self, request: HarnessRequest) -> HarnessRequest:
        # The wrappers above come later in the order: this one applies before theirs.
        return dataclasses.replace(request, perturbations=(self.perturbation, *request.perturbations))

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(**kwargs)
        info["perturbations"] = [*info.get("perturbations", []), str(self.perturbation)]
        return obs, info


class ReorderFields(PerturbHarness):
    """Reorder observation fields: ``"reversed"``, an explicit permutation, or ``"shuffle"``.

    ``"shuffle"`` draws a permutation of the task's fields from ``seed`` once.
    """

    def __init__(self, env: gym.Env, order: str | Sequence[str] = "reversed", seed: int | None = None):
        if order == "reversed":
            perturbation = P.reverse_fields()
        elif order == "shuffle":
            if seed is None:
                raise ValueError("ReorderFields(order='shuffle') needs a seed")
            perturbation = P.shuffle_fields(unwrap_harness_env(env, "ReorderFields").task.field_names, seed)
        elif isinstance(order, str):
            raise ValueError(f"order must be 'reversed', 'shuffle' or a list of field names, got {order!r}")
        else:
            perturbation = P.permute_fields(order)
        super().__init__(env, perturbation)


class RenameTools(PerturbHarness):
    """Show tools under new names, e.g. ``RenameTools(env, {"click": "tap"})``."""

    def __init__(self, env: gym.Env, mapping: Mapping[str, str]) -> None:
        super().__init__(env, P.rename_tools(mapping))


class RenameArguments(PerturbHarness):
    """Show arguments under new names, e.g. ``RenameArguments(env, {"ref": "node"})``."""

    def __init__(self, env: gym.Env, mapping: Mapping[str, str]) -> None:
        super().__init__(env, P.rename_args(mapping))


class ChangeToolNaming(PerturbHarness):
    """Switch the naming scheme: canonical, synonyms or opaque."""

    def __init__(self, env: gym.Env, naming: str) -> None:
        super().__init__(env, P.change_naming(naming))


class RestyleTools(PerturbHarness):
    """Change how actions are written: json, xml, python or command."""

    def __init__(self, env: gym.Env, style: str) -> None:
        super().__init__(env, P.restyle_tools(style))


class ReorderTools(PerturbHarness):
    """List tools in another order: canonical, reversed, alphabetical or explicit."""

    def __init__(self, env: gym.Env, order: str | Sequence[str] = "reversed") -> None:
        super().__init__(env, P.reorder_tools(order))


class RewriteDescriptions(PerturbHarness):
    """Rewrite the tool descriptions: full, terse or none."""

    def __init__(self, env: gym.Env, level: str) -> None:
        super().__init__(env, P.rewrite_descriptions(level))


class Reformat(PerturbHarness):
    """Change the observation format."""

    def __init__(self, env: gym.Env, obs_format: str) -> None:
        super().__init__(env, P.reformat(obs_format))


class ChangeControl(PerturbHarness):
    """Change control: ``step_budget``, ``invalid_action`` and/or ``history_window``."""

    def __init__(self, env: gym.Env, **changes: Any) -> None:
        super().__init__(env, P.set_control(**changes))


class DropTools(PerturbHarness):
    """Hide tools from the agent. Unlike the others, this can lower the ceiling."""

    def __init__(self, env: gym.Env, tools: Sequence[str]) -> None:
        super().__init__(env, P.drop_tools(tools))
