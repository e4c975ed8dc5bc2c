"""choose-list: choose the named item from a drop-down list, then press Submit."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.web.base import WebTask
from harness_gym.envs.web.page import Element
from harness_gym.envs.web.words import CAPITALIZED, CITIES, WORDS, one, pick


class ChooseList(WebTask):
    task_id = "ChooseList"
    description = "Choose the requested item from a drop-down list and submit the form."
    max_steps = 4

    def build(self, rng: np.random.Generator) -> None:
        pool = CITIES if rng.random() < 0.5 else CAPITALIZED
        options = pick(rng, pool, int(rng.integers(3, 9)))
        self.target = one(rng, options)
        self.title = "List"
        self.instruction = f"Select {self.target} from the list and click Submit."
        form = self.page.add("form")
        if rng.random() < 0.5:
            self.page.add("label", one(rng, WORDS).capitalize(), parent=form)
        self.list = self.page.add("select", parent=form, value=options[0], options=options)
        self.submit = self.page.add("button", "Submit", parent=form)

    def on_click(self, element: Element) -> None:
        if element is self.submit:
            self.finish(self.list.value == self.target)

    def oracle(self) -> Action:
        if self.list.value != self.target:
            return Action.of("select", ref=self.list.ref, option=self.target)
        return Action.of("click", ref=self.submit.ref)

    def extra_state(self) -> dict[str, Any]:
        return {"target": self.target}
