"""A tiny page model: a tree of elements with refs, tags, text and attributes.

Tasks build a :class:`Page`, mutate its elements as actions arrive, and emit
:meth:`Page.to_field` as the ``page`` field. Refs are small integers handed out in build
order; hidden elements are left out of the field (and cannot be acted on).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Tags that accept ``type``.
TEXT_INPUTS = frozenset({"input", "textarea"})


@dataclass
class Element:
    """One node of the page tree."""

    ref: int
    tag: str
    text: str = ""
    value: str | None = None
    checked: bool | None = None
    options: list[str] | None = None
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Element] = field(default_factory=list)
    visible: bool = True
    parent: Element | None = field(default=None, repr=False, compare=False)

    def shown(self) -> bool:
        """Visible, and so are all its ancestors."""
        node: Element | None = self
        while node is not None:
            if not node.visible:
                return False
            node = node.parent
        return True

    def to_field(self) -> dict[str, Any]:
        """The element as JSON-like data; empty attributes are left out."""
        out: dict[str, Any] = {"ref": self.ref, "tag": self.tag}
        if self.text:
            out["text"] = self.text
        if self.value is not None:
            out["value"] = self.value
        if self.checked is not None:
            out["checked"] = self.checked
        if self.options is not None:
            out["options"] = list(self.options)
        if self.attrs:
            out.update(self.attrs)
        if self.children:
            kids = [c.to_field() for c in self.children if c.visible]
            if kids:
                out["children"] = kids
        return out

    def walk(self) -> list[Element]:
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out


class Page:
    """A forest of elements with unique refs."""

    def __init__(self) -> None:
        self.roots: list[Element] = []
        self._next_ref = 1
        self._by_ref: dict[int, Element] = {}

    def add(self, tag: str, text: str = "", parent: Element | None = None, **kw: Any) -> Element:
        """Create an element (ref assigned in build order) under ``parent`` or at the top."""
        element = Element(self._next_ref, tag, text, parent=parent, **kw)
        self._next_ref += 1
        self._by_ref[element.ref] = element
        (parent.children if parent is not None else self.roots).append(element)
        return element

    def get(self, ref: int) -> Element | None:
        """The element with this ref if it exists and it and all its ancestors are visible."""
        element = node = self._by_ref.get(ref)
        while node is not None:  # Element.shown, inlined: this runs at every step
            if not node.visible:
                return None
            node = node.parent
        return element

    def visible(self) -> list[Element]:
        """Visible elements in document order."""
        out: list[Element] = []
        stack = self.roots[::-1]
        while stack:  # depth first, children in order; a hidden node hides its subtree
            node = stack.pop()
            if node.visible:
                out.append(node)
                if node.children:
                    stack.extend(node.children[::-1])
        return out

    def to_field(self) -> list[dict[str, Any]]:
        return [e.to_field() for e in self.roots if e.visible]

    def state(self) -> list[dict[str, Any]]:
        """Every element, hidden ones included, for the task-state digest."""

        def full(e: Element) -> dict[str, Any]:
            return {
                "ref": e.ref,
                "tag": e.tag,
                "text": e.text,
                "value": e.value,
                "checked": e.checked,
                "options": e.options,
                "attrs": e.attrs,
                "visible": e.visible,
                "children": [full(c) for c in e.children],
            }

        return [full(e) for e in self.roots]
