"""navigate-tree: expand folders of a file tree and click the named folder or file."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.web.base import WebTask
from harness_gym.envs.web.page import Element
from harness_gym.envs.web.words import TREE_NAMES


class NavigateTree(WebTask):
    task_id = "NavigateTree"
    description = "Expand folders of a file tree to find and click the named folder or file."
    max_steps = 8

    def build(self, rng: np.random.Generator) -> None:
        pool = TREE_NAMES
        names = [pool[int(i)] for i in rng.permutation(len(pool))]
        self.parents: dict[int, Element | None] = {}
        self.title = "File tree"
        tree = self.page.add("div", attrs={"role": "tree"})
        depth = int(rng.integers(2, 4))
        items = self._grow(rng, names, tree, None, 1, depth)
        deep = [e for e in items if self.parents[e.ref] is not None]
        choices = deep if rng.random() < 0.85 else items
        self.target = choices[int(rng.integers(len(choices)))]
        self.instruction = (
            "Navigate through the file tree. Find and click on the folder or file named "
            f'"{self.target.text}".'
        )

    def _grow(
        self,
        rng: np.random.Generator,
        names: list[str],
        box: Element,
        parent: Element | None,
        level: int,
        depth: int,
    ) -> list[Element]:
        """Add items under ``box`` (2-4 at the top); above the last level the first is a folder."""
        out: list[Element] = []
        count = int(rng.integers(2, 5)) if level == 1 else int(rng.integers(1, 4))
        for i in range(count):
            folder = level < depth and (i == 0 or rng.random() < 0.4)
            attrs = {"kind": "folder", "expanded": "false"} if folder else {"kind": "file"}
            item = self.page.add("treeitem", names.pop(), parent=box, attrs=attrs, visible=parent is None)
            self.parents[item.ref] = parent
            out.append(item)
            if folder:
                out.extend(self._grow(rng, names, item, item, level + 1, depth))
        order = rng.permutation(len(box.children))
        box.children[:] = [box.children[int(i)] for i in order]
        return out

    def on_click(self, element: Element) -> None:
        if element.tag != "treeitem":
            return
        if element is self.target:
            self.finish(True)
        elif element.attrs["kind"] == "file":
            self.finish(False)
        else:
            expanded = element.attrs["expanded"] == "false"
            element.attrs["expanded"] = "true" if expanded else "false"
            for child in element.children:
                child.visible = expanded

    def oracle(self) -> Action:
        path: list[Element] = []
        node = self.parents[self.target.ref]
        while node is not None:
            path.append(node)
            node = self.parents[node.ref]
        for folder in reversed(path):
            if folder.attrs["expanded"] == "false":
                return Action.of("click", ref=folder.ref)
        return Action.of("click", ref=self.target.ref)

    def extra_state(self) -> dict[str, Any]:
        return {"target": self.target.text, "target_ref": self.target.ref}
