"""click-tab-2: switch between tabs to find a link, then click it."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.web.base import WebTask
from harness_gym.envs.web.page import Element
from harness_gym.envs.web.tasks.click_link import link_paragraphs
from harness_gym.envs.web.words import WORDS, pick


class ClickTab(WebTask):
    task_id = "ClickTab"
    description = "Switch between tabs to find the link with a given text and click it."
    max_steps = 4

    def build(self, rng: np.random.Generator) -> None:
        count = int(rng.integers(2, 5))
        sizes = [int(rng.integers(2, 5)) for _ in range(count)]
        texts = pick(rng, WORDS, sum(sizes))
        self.title = "Tabs"
        bar = self.page.add("div", attrs={"id": "tabs"})
        self.tabs = [self.page.add("tab", f"Tab #{i + 1}", parent=bar) for i in range(count)]
        body = self.page.add("div", attrs={"id": "panels"})
        self.panels: list[Element] = []
        links: list[list[Element]] = []
        start = 0
        for i, size in enumerate(sizes):
            panel = self.page.add("div", parent=body, attrs={"id": f"tab-{i + 1}"})
            links.append(link_paragraphs(rng, self.page, panel, texts[start : start + size]))
            self.panels.append(panel)
            start += size
        self.show(self.tabs[0])
        self.target_tab = int(rng.integers(count))
        row = links[self.target_tab]
        self.link = row[int(rng.integers(len(row)))]
        self.target = self.link.text
        self.instruction = f'Switch between the tabs to find and click on the link "{self.target}".'

    def show(self, tab: Element) -> None:
        """Make ``tab`` the active tab: its panel shows, the others hide."""
        for other, panel in zip(self.tabs, self.panels, strict=True):
            active = other is tab
            panel.visible = active
            other.attrs = {"selected": "true"} if active else {}

    def on_click(self, element: Element) -> None:
        if element.tag == "tab":
            self.show(element)
        elif element.tag == "a":
            self.finish(element is self.link)

    def oracle(self) -> Action:
        if not self.panels[self.target_tab].visible:
            return Action.of("click", ref=self.tabs[self.target_tab].ref)
        return Action.of("click", ref=self.link.ref)

    def extra_state(self) -> dict[str, Any]:
        return {"target": self.target, "target_tab": self.target_tab, "target_ref": self.link.ref}
