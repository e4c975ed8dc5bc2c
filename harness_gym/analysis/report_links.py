"""The report's links to the episodes behind its numbers (the viewer, :mod:`harness_gym.analysis.viewer`).

:func:`episode_links_section` writes the run's viewer folder (``RUN_DIR/view``) and returns a
section of links: each largest effect opens the episodes of that agent under that level whose
outcome differs from their partner's one factor away (one more click opens a pair side by
side); each worst harness opens its episodes; each heatmap cell (task x factor level) opens the
episodes it averages.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

from harness_gym.analysis.report_section import Section
from harness_gym.analysis.viewer import view_link, write_view


class _Link(NamedTuple):
    """A table cell that links ``text`` to ``href``; every other cell is plain text."""

    href: str
    text: str


def _cell(value: str | _Link, markdown: bool) -> str:
    """One cell, escaped as a whole: names from the run's files are text, never markup."""
    if markdown:
        if isinstance(value, _Link):
            return f"[{_md_text(value.text)}]({quote(value.href, safe=_URL_SAFE)})"
        return _md_text(value)
    if isinstance(value, _Link):
        return f'<a href="{html.escape(value.href, quote=True)}">{html.escape(value.text)}</a>'
    return html.escape(value)


def _md_text(text: str) -> str:
    # Markdown readers render raw HTML: escape it, and the characters that end a cell or a link.
    out = html.escape(str(text), quote=False).replace("|", "/").replace("\n", " ")
    return out.replace("[", "&#91;").replace("]", "&#93;")


_URL_SAFE = "/#=&%.-_~:;,+!*'"  # "(", ")" and spaces are quoted: they would end the link


def _table(header: Sequence[str], rows: Sequence[Sequence[str | _Link]], markdown: bool) -> str:
    if markdown:
        cells = [[_md_text(h) for h in header], *([_cell(c, True) for c in r] for r in rows)]
        lines = ["| " + " | ".join(cells[0]) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in cells[1:]]
        return "\n".join(lines) + "\n"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_cell(c, False)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="hg-links"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def episode_links_section(
    rows: Any,
    sweep_dir: Path,
    out_dir: Path,
    factors: Sequence[str],
    levels: dict[str, list[str]],
    agents: Sequence[str],
    top_effects: Any,
    worst: Any,
) -> Section:
    """Write the viewer folder and return the section that links the report to it."""
    from harness_gym.analysis.sweep.spec import SweepError

    try:
        write_view(sweep_dir)
    except SweepError as err:  # nothing to view (a multi-agent sweep): say so, no links
        return Section("Episodes behind the numbers", [f"No viewer: {err}."])
    except OSError as err:  # a read-only run folder: the report is still written, without links
        return Section(
            "Episodes behind the numbers",
            [
                f"The viewer could not be written into the run folder ({err}); run `harness-gym view "
                "RUN_DIR --out FOLDER` to browse the episodes."
            ],
        )
    link = lambda **s: view_link(out_dir, sweep_dir, **s)  # noqa: E731
    parts: dict[bool, list[str]] = {True: [], False: []}
    for md in (False, True):
        out = parts[md]
        effects = []
        for _, r in top_effects.iterrows() if len(top_effects) else []:
            href = link(agent=r["agent"], factor=r["factor"], level=r["level"], differs=1)
            size = str(r.get("effect (pp)", ""))
            effects.append([str(r["agent"]), _Link(href, f"{r['factor']}={r['level']}"), size])
        if effects:
            out.append("**Largest effects**\n" if md else "<p><strong>Largest effects</strong></p>")
            header = ["agent", "episodes whose outcome flips with this level", "effect (pp)"]
            out.append(_table(header, effects, md))
        worst_rows = []
        for r in worst.itertuples(index=False) if len(worst) else []:
            if r.harnesses < 2:
                continue
            worst_rows.append(
                [
                    str(r.agent),
                    str(r.task_id),
                    _Link(link(agent=r.agent, task=r.task_id, harness=r.worst_harness), str(r.worst_harness)),
                    _Link(link(agent=r.agent, task=r.task_id, harness=r.best_harness), str(r.best_harness)),
                ]
            )
        if worst_rows:
            title = "Worst harness per task"
            out.append(f"**{title}**\n" if md else f"<p><strong>{title}</strong></p>")
            out.append(_table(["agent", "task", "worst harness", "best harness"], worst_rows, md))
        ok = rows[rows["error"].isna()]
        for agent in agents:
            g = ok[ok["agent"] == agent]
            if g.empty:
                continue
            columns = [(f, lv) for f in factors for lv in levels.get(f, [])]
            grid = []
            for task in sorted(g["task_id"].unique()):
                t = g[g["task_id"] == task]
                cells: list[str | _Link] = [str(task)]
                for f, lv in columns:
                    s = t[t[f"level_{f}"] == lv]["success"]
                    href = link(agent=agent, task=task, factor=f, level=lv)
                    cells.append(_Link(href, f"{100 * s.mean():.0f}") if len(s) else "-")
                grid.append(cells)
            title = f"Success (%) by task and factor level: {agent}"
            out.append(f"**{_md_text(title)}**\n" if md else f"<p><strong>{html.escape(title)}</strong></p>")
            out.append(_table(["task", *(f"{f}={lv}" for f, lv in columns)], grid, md))
    text = [
        "Every number below links to the episodes behind it in the run's viewer (`view/index.html`, "
        "also `harness-gym view` on the run folder): a largest effect opens the episodes of that agent "
        "under that level whose outcome differs from their partner's (the same task and seed under the "
        "harness that differs in that factor only); click one to see the pair side by side, with the "
        "first step where the actions diverge marked. Only recorded episodes show their steps "
        "(`--trajectories`)."
    ]
    return Section(
        "Episodes behind the numbers",
        text,
        raw_html="\n".join(parts[False]),
        raw_markdown="\n".join(parts[True]),
    )
