"""click-option: select the radio button with a given label, then press Submit."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.web.base import WebTask
from harness_gym.envs.web.page import Element
from harness_gym.envs.web.words import WORDS, one, pick


class ClickOption(WebTask):
    task_id = "ClickOption"
    description = "Select the radio button with a given label and submit the form."
    max_steps = 5

    def build(self, rng: np.random.Generator) -> None:
        labels = pick(rng, WORDS, int(rng.integers(2, 7)))
        if rng.random() < 0.5:
            labels = [w.capitalize() for w in labels]
        group = one(rng, WORDS)
        self.title = "Options"
        form = self.page.add("form")
        if rng.random() < 0.4:
            self.page.add("span", " ".join(pick(rng, WORDS, int(rng.integers(1, 4)))), parent=form)
        self.radios = [
            self.page.add("radio", label, parent=form, checked=False, attrs={"name": group})
            for label in labels
        ]
        self.radio = self.radios[int(rng.integers(len(self.radios)))]
        if rng.random() < 0.3:
            self.radios[int(rng.integers(len(self.radios)))].checked = True
        self.submit = self.page.add("button", "Submit", parent=form)
        self.target = self.radio.text
        self.instruction = f'Select "{self.target}" and click Submit.'

    def on_click(self, element: Element) -> None:
        super().on_click(element)
        if element is self.submit:
            self.finish(bool(self.radio.checked))

    def oracle(self) -> Action:
        if not self.radio.checked:
            return Action.of("click", ref=self.radio.ref)
        return Action.of("click", ref=self.submit.ref)

    def extra_state(self) -> dict[str, Any]:
        return {"target": self.target, "target_ref": self.radio.ref}
