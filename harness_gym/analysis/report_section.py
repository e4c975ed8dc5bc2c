"""One part of a report: a heading, text, an optional plot and tables.

Its own module so that the sweep report (:mod:`harness_gym.analysis.report`) and the parts it
embeds (:mod:`harness_gym.analysis.search.report`) both build sections without importing
each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Section:
    """One part of the report: a heading, text, an optional plot and tables.

    ``collapsed``: the section is method prose or diagnostics, shown folded (a closed
    ``<details>`` in the HTML report, its title the summary a reader clicks); the Markdown
    report prints it as an ordinary section. ``parts``: sub-sections printed after this one's
    own content (typically a collapsed "method and diagnostics" part under a result).
    """

    title: str
    text: list[str] = field(default_factory=list)
    image: str | None = None
    tables: list[tuple[str, Any]] = field(default_factory=list)
    #: Already-written HTML / Markdown after the tables (links the report builds itself).
    raw_html: str = ""
    raw_markdown: str = ""
    collapsed: bool = False
    parts: list[Section] = field(default_factory=list)


def method(title: str, text: Sequence[str] = (), tables: Sequence[tuple[str, Any]] = ()) -> Section:
    """A collapsed part holding how a section's numbers are made (method prose, diagnostics)."""
    return Section(title, list(text), tables=list(tables), collapsed=True)
