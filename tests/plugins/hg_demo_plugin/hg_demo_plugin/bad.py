"""Tasks that break the package's task rules, and a format whose name clashes with a built-in."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym import Action, StepResult
from harness_gym.core.tools import ToolStyle
from hg_demo_plugin.styles import SLASH
from hg_demo_plugin.tasks import PickLargest


class LazyOracle(PickLargest):
    """Its oracle submits the first number: optimal only when that one is the largest."""

    task_id = "LazyOracle"

    def oracle(self) -> Action:
        return Action.of("submit") if self.selected is not None else Action.of("pick", index=0)


class Frozen(PickLargest):
    """Ignores the seed: every instance is the same."""

    task_id = "Frozen"

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(np.random.default_rng(0))


def render_json_again(fields: Any) -> str:
    return str(list(fields))


class Generous(PickLargest):
    """Any action wins: a random agent always succeeds."""

    task_id = "Generous"

    def step(self, action: Action) -> StepResult:
        self.done = self.won = True
        return StepResult(reward=1.0, terminated=True, success=True)


class Forgetful(PickLargest):
    """Its snapshot does not bring the selection back."""

    task_id = "Forgetful"

    def snapshot(self) -> Any:
        return list(self.numbers)

    def restore(self, snapshot: Any) -> None:
        self.numbers = list(snapshot)


class ClickButton(PickLargest):
    """Takes the id of a built-in task."""

    task_id = "ClickButton"


class EarlyWin(PickLargest):
    """Reports success as soon as the largest number is selected, before the episode ends."""

    task_id = "EarlyWin"

    def step(self, action: Action) -> StepResult:
        result = super().step(action)
        early = action.name == "pick" and self.numbers[action["index"]] == max(self.numbers)
        return StepResult(reward=result.reward, terminated=result.terminated, success=result.success or early)


#: A tool style that takes a built-in style's name.
PYTHON_AGAIN = ToolStyle("python", SLASH.write, SLASH.read, "Write /tool arg=value.")
