"""PickLargest: select the largest of five numbers, then submit."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym import Action, ActionSpec, Param, StepResult, Task


class PickLargest(Task):
    task_id = "PickLargest"
    description = "Select the largest of five numbers, then submit."
    field_names = ("instruction", "numbers", "selected")
    action_specs = (
        ActionSpec("pick", "Select a number by its position.", (Param("index", "int", "Position, from 0."),)),
        ActionSpec("submit", "Submit the selected number."),
    )
    max_steps = 6

    def reset(self, rng: np.random.Generator) -> None:
        self.numbers = [int(n) for n in rng.choice(100, size=5, replace=False)]
        self.selected: int | None = None
        self.done = self.won = False

    def fields(self) -> dict[str, Any]:
        return {
            "instruction": "Select the largest number, then submit.",
            "numbers": list(self.numbers),
            "selected": self.selected,
        }

    def legal_actions(self) -> list[Action]:
        if self.done:
            return []
        return [*(Action.of("pick", index=i) for i in range(5)), Action.of("submit")]

    def check(self, action: Action) -> str | None:
        if action.name == "pick" and not 0 <= action["index"] < 5:
            return "index must be 0 to 4"
        if action.name == "submit" and self.selected is None:
            return "select a number before submitting"
        return None

    def step(self, action: Action) -> StepResult:
        if action.name == "pick":
            self.selected = action["index"]
        else:
            self.done = True
            self.won = self.numbers[self.selected] == max(self.numbers)
        return StepResult(reward=float(self.won), terminated=self.done, success=self.won)

    def oracle(self) -> Action:
        best = self.numbers.index(max(self.numbers))
        return Action.of("submit") if self.selected == best else Action.of("pick", index=best)

    def state(self) -> dict[str, Any]:
        return {"numbers": self.numbers, "selected": self.selected, "done": self.done, "won": self.won}
