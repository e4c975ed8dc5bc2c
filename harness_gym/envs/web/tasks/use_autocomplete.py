"""use-autocomplete: type a prefix, pick the matching suggestion, then press Submit."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.web.base import WebTask
from harness_gym.envs.web.page import Element
from harness_gym.envs.web.words import PLACES_AND_WORDS, pick


class UseAutocomplete(WebTask):
    task_id = "UseAutocomplete"
    description = "Use an autocomplete field to enter the item the instruction describes and submit."
    max_steps = 8
    legal_keys = ("Enter",)

    def build(self, rng: np.random.Generator) -> None:
        source = PLACES_AND_WORDS
        self.target = source[int(rng.integers(len(source)))]
        rest = [w for w in source if w != self.target]
        kin = [w for w in rest if w[0] == self.target[0]]
        others = pick(rng, kin, min(len(kin), int(rng.integers(2, 5))))
        others += pick(rng, [w for w in rest if w not in others], 36 - len(others))
        pool = sorted([self.target, *others])
        form = rng.random()
        suffix = self.target[-2:] if form < 0.4 else ""
        self.prefix = self.target[: int(rng.integers(1, 3) if suffix else rng.integers(2, 4))]
        if form < 0.7:
            while self.prefix != self.target and any(
                w.startswith(self.prefix) and w.endswith(suffix) for w in others
            ):
                self.prefix = self.target[: len(self.prefix) + 1]
            if any(w.startswith(self.prefix) and w.endswith(suffix) for w in others):
                form = 1.0
        if form < 0.4:
            self.instruction = f'Enter an item that starts with "{self.prefix}" and ends with "{suffix}".'
        elif form < 0.7:
            self.instruction = f'Enter an item that starts with "{self.prefix}".'
        else:
            self.instruction = f'Enter "{self.target}".'
        self.instruction += " Then press Submit."
        heads = {w[: len(self.prefix)] for w in others} - {self.prefix}
        self.type_candidates = [self.prefix, *pick(rng, sorted(heads), min(3, len(heads)))]
        rng.shuffle(self.type_candidates)
        self.title = "Autocomplete"
        form_box = self.page.add("form")
        self.page.add("label", "Tags:", parent=form_box, attrs={"for": "tags"})
        self.field = self.page.add("input", parent=form_box, value="", attrs={"id": "tags"})
        self.menu = self.page.add("ul", parent=form_box, attrs={"role": "listbox"}, visible=False)
        self.items = [self.page.add("li", w, parent=self.menu, visible=False) for w in pool]
        self.submit = self.page.add("button", "Submit", parent=form_box)

    def _suggest(self, text: str) -> None:
        head = text.lower()
        for item in self.items:
            item.visible = bool(head) and item.text.lower().startswith(head)
        self.menu.visible = any(item.visible for item in self.items)

    def on_type(self, element: Element, text: str) -> None:
        element.value = text
        self._suggest(text)

    def on_click(self, element: Element) -> None:
        if element is self.submit:
            self.finish(self.field.value == self.target)
        elif element.tag == "li":
            self.field.value = element.text
            self._suggest("")

    def on_press(self, key: str) -> None:
        if key == "Enter":
            self.finish(self.field.value == self.target)

    def oracle(self) -> Action:
        if self.field.value == self.target:
            return Action.of("click", ref=self.submit.ref)
        for item in self.items:
            if item.text == self.target and item.visible and self.menu.visible:
                return Action.of("click", ref=item.ref)
        return Action.of("type", ref=self.field.ref, text=self.prefix)

    def extra_state(self) -> dict[str, Any]:
        return {"target": self.target, "prefix": self.prefix}
