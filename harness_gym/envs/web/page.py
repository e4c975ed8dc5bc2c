"""A tiny page model: a tree of elements with refs, tags, text and attributes.

Tasks build a :class:`Page`, mutate its elements as actions arrive, and emit
:meth:`Page.to_field` as the ``page`` field. Refs are small integers handed out in build
order; hidden elements are left out of the field (and cannot be acted on).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from harness_gym.core.task import state_text

#: A JSON string as ``state_text`` writes it (ASCII, escaped), for values known to be a str.
_string = json.encoder.encode_basestring_ascii

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
        return [_element_state(e) for e in self.roots]

    def state_text(self) -> str:
        """``state_text(self.state())`` (the canonical JSON the task-state digest hashes),
        written straight from the elements: the same text, about twice as fast as building
        the dicts and encoding them (every reset digests its page)."""
        return "[" + ",".join([_element_state_text(e) for e in self.roots]) + "]"


def _element_state(e: Element) -> dict[str, Any]:
    return {
        "ref": e.ref,
        "tag": e.tag,
        "text": e.text,
        "value": e.value,
        "checked": e.checked,
        "options": e.options,
        "attrs": e.attrs,
        "visible": e.visible,
        "children": [_element_state(c) for c in e.children],
    }


#: JSON's constants, for values known to be None or a bool.
_CONSTANTS = {None: "null", True: "true", False: "false"}


def _element_state_text(e: Element) -> str:
    """``state_text(_element_state(e))``: its keys in sorted order, scalars written directly."""
    if not _plain(e):  # a value of another type than Element declares: the encoder writes it
        return state_text(_element_state(e))
    kids = ",".join([_element_state_text(c) for c in e.children])
    return (
        f'{{"attrs":{state_text(e.attrs) if e.attrs else "{}"},"checked":{_CONSTANTS[e.checked]},'
        f'"children":[{kids}],"options":{"null" if e.options is None else state_text(e.options)},'
        f'"ref":{e.ref!r},"tag":{_string(e.tag)},"text":{_string(e.text)},'
        f'"value":{"null" if e.value is None else _string(e.value)},"visible":{_CONSTANTS[e.visible]}}}'
    )


def _plain(e: Element) -> bool:
    """Whether ``e``'s values have the exact types its fields declare (what is written directly)."""
    return (
        type(e.ref) is int
        and type(e.tag) is str
        and type(e.text) is str
        and (e.value is None or type(e.value) is str)
        and (e.checked is None or type(e.checked) is bool)
        and type(e.visible) is bool
        and type(e.attrs) is dict
    )
