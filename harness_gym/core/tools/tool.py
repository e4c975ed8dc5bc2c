"""A tool as a harness shows it: the display names of one canonical action.

A :class:`Tool` is what the styles read and write through (its shown name, argument names and
the canonical spec behind them); the :class:`~harness_gym.core.tools.toolbox.Toolbox` makes
one per action it exposes. It sits below the styles and the toolbox, which both use it.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness_gym.core.task import ActionSpec, Param


@dataclass(frozen=True)
class Tool:
    """One tool as a harness shows it: display names bound to a canonical action spec."""

    spec: ActionSpec
    name: str
    arg_names: tuple[str, ...]
    description: str
    arg_descriptions: tuple[str, ...]

    @property
    def params(self) -> tuple[Param, ...]:
        return self.spec.params
