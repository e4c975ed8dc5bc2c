"""enter-text: type a given word into the text field, then press Submit."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.web.base import WebTask
from harness_gym.envs.web.page import Element
from harness_gym.envs.web.words import WORDS, one, pick


class EnterText(WebTask):
    task_id = "EnterText"
    description = "Type the requested text into the input field and submit."
    max_steps = 6

    def build(self, rng: np.random.Generator) -> None:
        words = pick(rng, WORDS, 3)
        self.target = words[0] if rng.random() < 0.5 else words[0].capitalize()
        self.type_candidates = [self.target, *words[1:]]
        rng.shuffle(self.type_candidates)
        self.title = "Form"
        self.instruction = f'Enter "{self.target}" into the text field and press Submit.'
        form = self.page.add("form")
        if rng.random() < 0.5:
            self.page.add("label", one(rng, WORDS).capitalize(), parent=form)
        self.field = self.page.add("input", parent=form, value="", attrs={"type": "text"})
        self.submit = self.page.add("button", "Submit", parent=form)

    def on_click(self, element: Element) -> None:
        if element is self.submit:
            self.finish(self.field.value == self.target)

    def oracle(self) -> Action:
        if self.field.value != self.target:
            return Action.of("type", ref=self.field.ref, text=self.target)
        return Action.of("click", ref=self.submit.ref)

    def extra_state(self) -> dict[str, Any]:
        return {"target": self.target}
