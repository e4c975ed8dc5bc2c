"""click-button: click the button whose label the instruction names."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.web.base import WebTask
from harness_gym.envs.web.page import Element
from harness_gym.envs.web.words import CAPITALIZED, WORDS, one, pick


class ClickButton(WebTask):
    task_id = "ClickButton"
    description = "Click the button with a given label among distractor buttons and text."
    max_steps = 3

    def build(self, rng: np.random.Generator) -> None:
        labels = pick(rng, CAPITALIZED, int(rng.integers(3, 7)))
        self.target = one(rng, labels)
        self.title = "Buttons"
        self.instruction = f'Click on the "{self.target}" button.'
        box = self.page.add("div", attrs={"id": "area"})
        for label in labels:
            if rng.random() < 0.4:
                self.page.add("span", one(rng, WORDS), parent=box)
            self.page.add("button", label, parent=box)

    def on_click(self, element: Element) -> None:
        if element.tag == "button":
            self.finish(element.text == self.target)

    def oracle(self) -> Action:
        ref = next(e.ref for e in self.page.visible() if e.tag == "button" and e.text == self.target)
        return Action.of("click", ref=ref)

    def extra_state(self) -> dict[str, Any]:
        return {"target": self.target}
