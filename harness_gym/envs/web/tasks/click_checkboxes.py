"""click-checkboxes: check exactly the named checkboxes (possibly none), then press Submit."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.web.base import WebTask
from harness_gym.envs.web.page import Element
from harness_gym.envs.web.words import WORDS, pick


class ClickCheckboxes(WebTask):
    task_id = "ClickCheckboxes"
    description = "Check exactly the checkboxes the instruction names and submit the form."
    max_steps = 8

    def build(self, rng: np.random.Generator) -> None:
        labels = pick(rng, WORDS, int(rng.integers(2, 7)))
        if rng.random() < 0.5:
            labels = [w.capitalize() for w in labels]
        self.title = "Checkboxes"
        form = self.page.add("form")
        self.boxes = [self.page.add("checkbox", label, parent=form, checked=False) for label in labels]
        self.submit = self.page.add("button", "Submit", parent=form)
        k = 0 if rng.random() < 0.15 else int(rng.integers(1, min(3, len(self.boxes)) + 1))
        chosen = sorted(int(i) for i in rng.choice(len(self.boxes), size=k, replace=False))
        self.wanted = [self.boxes[i] for i in chosen]
        order = [b.text for b in self.wanted]
        rng.shuffle(order)
        self.targets = order
        if not order:
            self.instruction = "Select nothing and click Submit."
        else:
            self.instruction = f"Select {', '.join(order)} and click Submit."

    def on_click(self, element: Element) -> None:
        super().on_click(element)
        if element is self.submit:
            self.finish(all(bool(b.checked) == self._wanted(b) for b in self.boxes))

    def _wanted(self, box: Element) -> bool:
        return any(box is w for w in self.wanted)

    def oracle(self) -> Action:
        for box in self.boxes:
            if bool(box.checked) != self._wanted(box):
                return Action.of("click", ref=box.ref)
        return Action.of("click", ref=self.submit.ref)

    def extra_state(self) -> dict[str, Any]:
        return {"targets": self.targets, "target_refs": [b.ref for b in self.wanted]}
