"""click-link: click the link whose text the instruction names, among paragraphs of words."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.web.base import WebTask
from harness_gym.envs.web.page import Element, Page
from harness_gym.envs.web.words import WORDS, pick


def link_paragraphs(rng: np.random.Generator, page: Page, parent: Element, links: list[str]) -> list[Element]:
    """Add 1-3 paragraphs of random words to ``parent`` with ``links`` (in order) as ``a`` elements."""
    count = int(rng.integers(1, min(3, len(links)) + 1))
    cuts = sorted(int(c) for c in rng.choice(np.arange(1, len(links)), size=count - 1, replace=False))
    out: list[Element] = []
    for start, stop in zip([0, *cuts], [*cuts, len(links)], strict=True):
        para = page.add("p", parent=parent)
        for text in links[start:stop]:
            if rng.random() < 0.8:
                page.add("span", " ".join(pick(rng, WORDS, int(rng.integers(1, 5)))), parent=para)
            out.append(page.add("a", text, parent=para))
        if rng.random() < 0.6:
            page.add("span", " ".join(pick(rng, WORDS, int(rng.integers(1, 5)))), parent=para)
    return out


class ClickLink(WebTask):
    task_id = "ClickLink"
    description = "Click the link with a given text inside paragraphs of words and other links."
    max_steps = 3

    def build(self, rng: np.random.Generator) -> None:
        texts = pick(rng, WORDS, int(rng.integers(2, 7)))
        self.title = "Links"
        box = self.page.add("div", attrs={"id": "area"})
        links = link_paragraphs(rng, self.page, box, texts)
        self.link = links[int(rng.integers(len(links)))]
        self.target = self.link.text
        self.instruction = f'Click on the link "{self.target}".'

    def on_click(self, element: Element) -> None:
        if element.tag == "a":
            self.finish(element is self.link)

    def oracle(self) -> Action:
        return Action.of("click", ref=self.link.ref)

    def extra_state(self) -> dict[str, Any]:
        return {"target": self.target, "target_ref": self.link.ref}
