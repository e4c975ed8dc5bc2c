"""Writing report sections as documents: Markdown (images as relative files) and a
self-contained HTML page (images embedded as data URIs, folded sections as ``<details>``), and
the number formatting of their tables.

Its own module because it knows only :class:`~harness_gym.analysis.report_section.Section`,
not what a sweep is: the report (:mod:`harness_gym.analysis.report`) builds the sections and
hands them here.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness_gym.analysis.report_section import Section


def _pretty(df: Any) -> Any:
    out = df.copy()
    for column in out.columns:
        if out[column].dtype.kind == "f":
            out[column] = [("-" if v != v else f"{v:.2f}") for v in out[column]]
    return out


def _md_table(df: Any) -> str:
    if not len(df):
        return "_(none)_\n"
    cells = [[str(c) for c in df.columns]] + [
        [_md_cell(v) for v in row] for row in df.itertuples(index=False)
    ]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "|".join("---" for _ in cells[0]) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in cells[1:]]
    return "\n".join(lines) + "\n"


def _md_cell(value: Any) -> str:
    text = "-" if value is None or (isinstance(value, float) and value != value) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _markdown(title: str, sections: Sequence[Section]) -> str:
    """The Markdown report: collapsed sections print as ordinary ones (a plain-text record that
    every Markdown reader shows the same way); parts are one heading level down."""
    parts = [f"# {title}\n"]
    for s in sections:
        parts.extend(_markdown_section(s, 2))
    return "\n".join(parts)


def _markdown_section(s: Section, level: int) -> list[str]:
    parts = [f"{'#' * level} {s.title}\n"]
    parts.extend(t + "\n" for t in s.text)
    if s.image:
        parts.append(f"![{s.title}]({s.image})\n")
    for caption, table in s.tables:
        if caption:
            parts.append(f"**{caption}**\n")
        parts.append(_md_table(table))
    if s.raw_markdown:
        parts.append(s.raw_markdown)
    for part in s.parts:
        parts.extend(_markdown_section(part, min(level + 1, 6)))
    return parts


_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.05em; }
h1, h2, h3, h4, th { overflow-wrap: anywhere; }
img { max-width: 100%; height: auto; display: block; margin: 1em 0; }
.hg-table { max-width: 100%; overflow-x: auto; margin: 0.5em 0 1.5em; }
table { border-collapse: collapse; font-size: 0.8em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.5em; text-align: left; }
th { background: #f4f4f4; } code { background: #f4f4f4; padding: 0 0.2em; }
table.hg-links { display: block; max-width: 100%; overflow-x: auto; margin: 0.5em 0 1.5em; }
table.hg-links td a { text-decoration: none; }
details.hg-fold { margin: 1em 0; }
details.hg-fold > summary { cursor: pointer; color: #444; }
details.hg-fold > summary > h2, details.hg-fold > summary > h3, details.hg-fold > summary > h4 {
  display: inline; margin: 0; border: 0; }
details.hg-fold[open] > summary { margin-bottom: 0.5em; }
"""


def _inline(text: str) -> str:
    """Escape text and turn `code` spans into <code>."""
    pieces = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(pieces))


def _html(title: str, sections: Sequence[Section], out: Path) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for s in sections:
        body.extend(_html_section(s, 2, out))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _html_section(s: Section, level: int, out: Path) -> list[str]:
    """A section's HTML; a collapsed one is a closed ``<details>`` whose summary is its heading.
    Tables sit in a horizontally scrollable box, so a wide one never widens the page."""
    h = min(level, 6)
    heading = f"<h{h}>{html.escape(s.title)}</h{h}>"
    body = [f'<details class="hg-fold"><summary>{heading}</summary>' if s.collapsed else heading]
    body.extend(f"<p>{_inline(t)}</p>" for t in s.text)
    if s.image:
        data = base64.b64encode((out / s.image).read_bytes()).decode("ascii")
        body.append(f'<img alt="{html.escape(s.title)}" src="data:image/png;base64,{data}">')
    for caption, table in s.tables:
        if caption:
            body.append(f"<p><strong>{html.escape(caption)}</strong></p>")
        shown = table.to_html(index=False, na_rep="-", border=0, escape=True) if len(table) else ""
        body.append(f'<div class="hg-table">{shown}</div>' if len(table) else "<p>(none)</p>")
    if s.raw_html:
        body.append(s.raw_html)
    for part in s.parts:
        body.extend(_html_section(part, level + 1, out))
    if s.collapsed:
        body.append("</details>")
    return body
