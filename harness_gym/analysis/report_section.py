"""One part of a report: a heading, text, an optional plot and tables.

Its own module so that the sweep report (:mod:`harness_gym.analysis.report`) and the parts it
embeds (:mod:`harness_gym.analysis.search.report`) both build sections without importing
each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Section:
    """One part of the report: a heading, text, an optional plot and tables."""

    title: str
    text: list[str] = field(default_factory=list)
    image: str | None = None
    tables: list[tuple[str, Any]] = field(default_factory=list)
    #: Already-written HTML / Markdown after the tables (links the report builds itself).
    raw_html: str = ""
    raw_markdown: str = ""
