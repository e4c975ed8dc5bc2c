"""Sweep reports: a Markdown and a self-contained HTML summary with PNG plots.

:func:`build_report` reads a sweep folder (:mod:`harness_gym.analysis.sweep`) and writes, to
``DIR/report/`` by default:

* ``success_heatmap.png``: success rate per task (rows) and harness factor level (columns);
* ``marginal_effects.png``: each factor level's effect on success (its deviation from the
  factor's average, :mod:`harness_gym.analysis.effects`: paired flips when the sweep has them,
  else a least-squares model), with 95% cluster-robust t intervals over (task, seed);
* ``variance.png``: how much of the variance in success is task, harness (split by the same
  model into factor main effects, interactions and the rest), task x harness, seed (the task
  instance) and the residual: a sums-of-squares decomposition;
* ``ceiling_vs_deployed.png``: per task, the ceiling and each agent's deployed return;
* ``harness_spread.png``: per task, the worst, mean and best harness's success rate;
* for language-model agents, a section on tokens, latency, invalid and truncated replies,
  error kinds, cost per success and which harness to deploy under
  (:mod:`harness_gym.analysis.lm_report`; ``lm_summary.csv``, ``lm_by_factor.csv``,
  ``lm_deploy.csv``);
* for a harness-search folder (:mod:`harness_gym.analysis.search`), a first section with
  ``search_trajectory.png`` and the test-seed tables (:mod:`harness_gym.analysis.search.report`);
* ``report.md`` (images as relative files), ``report.html`` (images embedded as data URIs, so
  the one file can be mailed or moved), and CSV tables (``mismatch.csv``,
  ``marginal_effects.csv``, ``variance.csv``, ``worst_harness.csv``).

Crashed cells (rows with an ``error``) are left out of every statistic and listed at the end.

This module assembles the report: it computes the tables, orders the sections and writes the
files. The numbers it computes itself are in :mod:`harness_gym.analysis.report_stats`, the
plots in :mod:`harness_gym.analysis.report_plots`, the summary, design and effects sections in
:mod:`~harness_gym.analysis.report_summary`, :mod:`~harness_gym.analysis.report_design` and
:mod:`~harness_gym.analysis.report_effects`, and the Markdown and HTML writing in
:mod:`harness_gym.analysis.report_render`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_gym.analysis.extremes import pretty as worst_pretty
from harness_gym.analysis.extremes import worst_harness
from harness_gym.analysis.report_design import _design_text
from harness_gym.analysis.report_effects import (
    _effect_rows,
    _effects_diagnostics,
    _effects_method,
    _effects_tables,
    _effects_text,
    _top_effects,
)
from harness_gym.analysis.report_plots import (
    plot_ceiling_vs_deployed,
    plot_harness_spread,
    plot_heatmap,
    plot_marginal_effects,
    plot_variance,
)
from harness_gym.analysis.report_render import _html, _markdown, _pretty
from harness_gym.analysis.report_section import Section, method
from harness_gym.analysis.report_stats import _levels, _variance_wide, variance_decomposition
from harness_gym.analysis.report_summary import _summary_section


@dataclass
class Report:
    """The files a report wrote."""

    out_dir: Path
    markdown: Path
    html: Path
    plots: dict[str, Path]
    tables: dict[str, Path]


def build_report(
    sweep_dir: str | Path,
    out_dir: str | Path | None = None,
    title: str | None = None,
    reference: str | None = None,
) -> Report:
    """Write the Markdown and HTML report of a sweep folder (default into ``sweep_dir/report``).

    ``reference`` names the agent whose success stands in for each harness's ceiling
    (:mod:`harness_gym.analysis.reference`); its section comes right after the overall table.
    """
    from harness_gym.analysis.mismatch import mismatch_table, side_by_side
    from harness_gym.analysis.sweep import load_rows, read_meta

    sweep_dir = Path(sweep_dir)
    meta = read_meta(sweep_dir)
    rows = _as_sweep_rows(load_rows(sweep_dir), meta)
    out = Path(out_dir) if out_dir is not None else sweep_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    factors = [f for f in meta.get("factors", []) if f"level_{f}" in rows]
    agents = list(dict.fromkeys(meta.get("agents", []))) or list(dict.fromkeys(rows["agent"]))
    errors = rows[rows["error"].notna()]

    by_cell = mismatch_table(rows)
    by_task = mismatch_table(rows, by=("agent", "task_id"))
    by_agent = mismatch_table(rows, by=("agent",))
    from harness_gym.analysis.effects import factor_effects

    levels = {f: _levels(rows, f, meta) for f in factors}
    design = meta.get("design") or None
    effect_rows, effects_source = _effect_rows(rows, sweep_dir)
    estimated = factor_effects(effect_rows, factors, design=design, levels=levels)
    effects = estimated.table
    models = estimated.models
    if not models:  # paired flips: the variance split still needs each agent's model
        models = factor_effects(effect_rows, factors, levels=levels, replicates=1).models
    variance = variance_decomposition(rows, model=models)
    worst = worst_harness(rows)
    tables = {
        "mismatch.csv": by_cell,
        "mismatch_by_task.csv": by_task,
        "marginal_effects.csv": effects,
        "marginal_effects_by_task.csv": estimated.by_task,
        "effects_heterogeneity.csv": estimated.heterogeneity,
        "effects_fit.csv": estimated.fit,
        "effects_bases.csv": estimated.bases,
        "variance.csv": variance,
        "worst_harness.csv": worst,
    }
    table_paths = {}
    for name, table in tables.items():
        table.to_csv(out / name, index=False)
        table_paths[name] = out / name

    plots = {
        "success_heatmap.png": plot_heatmap(rows, factors, agents, out / "success_heatmap.png", levels),
        "marginal_effects.png": plot_marginal_effects(effects, factors, agents, out / "marginal_effects.png"),
        "variance.png": plot_variance(variance, agents, out / "variance.png"),
        "ceiling_vs_deployed.png": plot_ceiling_vs_deployed(by_task, agents, out / "ceiling_vs_deployed.png"),
        "harness_spread.png": plot_harness_spread(worst, agents, out / "harness_spread.png"),
    }

    has_ceiling = bool(rows["ceiling"].notna().any())
    n_seeds = len(meta.get("seeds", []))
    if meta.get("kind") == "multiagent":
        meta = {
            **meta,
            "tasks": list(dict.fromkeys(rows["task_id"])),
            "harnesses": list(dict.fromkeys(rows["harness_name"])),
            "subset": "multi-agent sweep: each harness is an env's channel between the agents",
        }
    summary = (
        f"Sweep `{meta['sweep_id']}`: agents {', '.join(f'`{a}`' for a in agents)}; "
        f"{len(meta.get('tasks', []))} task(s); {len(meta.get('harnesses', []))} harness(es) "
        f"(`{meta.get('subset')}` of {_space_name(meta.get('space'))}); {n_seeds} seed(s); "
        f"{len(rows):,} of {meta.get('n_cells', len(rows)):,} cells finished, {len(errors)} crashed."
    )
    sections = [
        Section(
            "Overall",
            [summary],
            tables=[("", _pretty(side_by_side(by_agent)))],
            parts=[
                method(
                    "How the intervals are computed",
                    [
                        "Means with 95% intervals: Wilson for values in [0, 1] at the number of task "
                        "instances (task, seed) when the row pools harnesses (they share instances), "
                        "Student t otherwise; see docs/sweeps-and-reports.md."
                    ],
                )
            ],
        ),
        Section(
            "Success by task and harness factor level",
            [
                "Each cell is the success rate of the episodes whose harness takes that level "
                "(over the other factors' levels in the sweep and over seeds)."
            ],
            image="success_heatmap.png",
        ),
        Section("Design", _design_text(design, len(meta.get("harnesses", []))), collapsed=True),
        Section(
            "Marginal effect of each factor level",
            effects_source + _effects_text(estimated, design),
            image="marginal_effects.png",
            tables=_effects_tables(estimated),
            parts=[
                method(
                    "How the effects are estimated, and the model's diagnostics",
                    _effects_method(estimated),
                    _effects_diagnostics(estimated),
                )
            ],
        ),
        Section(
            "Where the variance comes from",
            image="variance.png",
            tables=[("", _pretty(_variance_wide(variance)))],
            parts=[
                method(
                    "What the components are",
                    [
                        "Sums of squares of success per agent: task; harness, split by the effects model "
                        "into factor main effects, the two-factor interactions in the model, and other "
                        "harness differences; task x harness; the seed (the task instance); and the "
                        "residual (harness x instance). A large harness share means the harness, not "
                        "the task, decides success."
                    ],
                )
            ],
        ),
        Section(
            "Ceiling vs deployed return",
            [
                "Ceiling: the best return any policy reaches through the harness (exact search). "
                "Deployed: the agent's return. Mismatch = ceiling - deployed, paired per seed. "
                "Per (task, harness) rows are in `mismatch.csv`."
                if has_ceiling
                else "Ceilings were not computed (the sweep ran without them); only deployed returns."
            ],
            image="ceiling_vs_deployed.png",
            tables=[("", _pretty(side_by_side(by_task)))],
        ),
        Section(
            "Worst harness per task",
            [
                "The harness with the lowest success rate for each task and agent, next to the mean and "
                "the best; the names are shown only where the spread survives the test below, otherwise "
                "the row is a tie and the names would rank noise."
            ],
            image="harness_spread.png",
            tables=[("", worst_pretty(worst))],
            parts=[
                method(
                    "How the intervals and the test are computed",
                    [
                        "Success intervals are simultaneous over the task's harnesses (Wilson at level "
                        "1 - 0.05/K), so they still cover after picking the extreme. Whether the spread "
                        "best - worst is more than noise is a permutation test that shuffles outcomes "
                        "among the harnesses within each task instance (exact when the harnesses are "
                        "interchangeable, and aware of the pick), Holm-adjusted over the agent's tasks "
                        "(family-wise error 5%). Wins / losses: seeds where only the best / only the "
                        "worst succeeded."
                    ],
                ),
                method("Harnesses (each one's factor levels)", tables=[("", _harness_table(meta))]),
            ],
        ),
    ]
    from harness_gym.analysis.lm_report import lm_section
    from harness_gym.analysis.search.report import PLOT as SEARCH_PLOT
    from harness_gym.analysis.search.report import is_search_folder, search_section

    lm, lm_tables = lm_section(rows, factors, levels)
    if lm is not None:  # right after the overall table: what the model cost and where to deploy it
        sections.insert(1, lm)
        for name, table in lm_tables.items():
            table.to_csv(out / name, index=False)
            table_paths[name] = out / name
    _add_parse_and_links(sections, rows, sweep_dir, out, factors, levels, agents, effects, worst, table_paths)
    if reference is not None:
        from harness_gym.analysis.reference import reference_section

        section, ref_tables = reference_section(rows, reference)
        sections.insert(1, section)
        for name, table in ref_tables.items():
            table.to_csv(out / name, index=False)
            table_paths[name] = out / name
    if is_search_folder(sweep_dir):  # a harness-search folder: its section comes first
        sections.insert(0, search_section(sweep_dir, out))
        if (out / SEARCH_PLOT).exists():
            plots[SEARCH_PLOT] = out / SEARCH_PLOT
    sections.insert(0, _summary_section(agents, estimated, worst, by_agent))
    if len(errors):
        shown = errors[["index", "agent", "task_id", "harness_name", "seed", "error"]].head(20)
        sections.append(
            Section(
                "Crashed cells",
                [f"{len(errors)} cell(s) recorded an error and are left out of every statistic (first 20)."],
                tables=[("", shown)],
            )
        )
    title = title or "harness-gym sweep report"
    md_path, html_path = out / "report.md", out / "report.html"
    md_path.write_text(_markdown(title, sections))
    html_path.write_text(_html(title, sections, out))
    return Report(out, md_path, html_path, plots, table_paths)


def _as_sweep_rows(rows: Any, meta: dict[str, Any]) -> Any:
    """A multi-agent sweep's rows in the single-agent report's shape: the harness of a row is
    the channel between the agents (``channel_id``; its levels are the ``level_`` columns), the
    ceiling unknown. Other sweeps' rows are returned as they are."""
    if meta.get("kind") != "multiagent" or "harness_name" in rows:
        return rows
    rows = rows.copy()
    key = rows["channel_id"] if "channel_id" in rows else rows["harness_id"]
    rows["harness_name"] = [f"{e}:{k}" for e, k in zip(rows.get("env_id", key), key)]
    rows["harness_id"] = rows["harness_name"]
    for column in ("ceiling", "wall_time"):
        if column not in rows:
            rows[column] = float("nan")
    return rows


def _add_parse_and_links(
    sections: list[Section],
    rows: Any,
    sweep_dir: Path,
    out: Path,
    factors: Sequence[str],
    levels: dict[str, list[str]],
    agents: Sequence[str],
    effects: Any,
    worst: Any,
    table_paths: dict[str, Path],
) -> None:
    """The parse-status section (after the effects) and the links to the viewer (last)."""
    from harness_gym.analysis.parse_report import parse_status_section
    from harness_gym.analysis.report_links import episode_links_section

    parse, parse_tables = parse_status_section(rows, factors)
    if parse is not None:
        titles = [s.title for s in sections]
        at = next((i + 1 for i, t in enumerate(titles) if t.startswith("Marginal effect")), len(sections))
        sections.insert(at, parse)
        for name, table in parse_tables.items():
            table.to_csv(out / name, index=False)
            table_paths[name] = out / name
    sections.append(
        episode_links_section(rows, sweep_dir, out, factors, levels, agents, _top_effects(effects), worst)
    )


def _space_name(space: Any) -> str:
    if isinstance(space, str):
        return f"`{space}`"
    return f"a {len((space or {}).get('factors', {}))}-factor space"


def _harness_table(meta: dict[str, Any]) -> Any:
    import pandas as pd

    specs = meta.get("harness_specs", [])
    return pd.DataFrame.from_records(
        [{"harness": h["name"], "id": h["id"], **h.get("levels", {})} for h in specs]
    )
