"""Sweep reports: a Markdown and a self-contained HTML summary with PNG plots.

:func:`build_report` reads a sweep folder (:mod:`harness_gym.analysis.sweep`) and writes, to
``DIR/report/`` by default:

* ``success_heatmap.png``: success rate per task (rows) and harness factor level (columns);
* ``marginal_effects.png``: each factor level's effect on success (its deviation from the
  factor's average, :mod:`harness_gym.analysis.effects`: paired flips when the sweep has them,
  else a least-squares model), with 95% cluster-bootstrap intervals;
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
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_gym.analysis.extremes import pretty as worst_pretty
from harness_gym.analysis.extremes import worst_harness
from harness_gym.analysis.report_section import Section, method

PLOTS = (
    "success_heatmap.png",
    "marginal_effects.png",
    "variance.png",
    "ceiling_vs_deployed.png",
    "harness_spread.png",
)
COMPONENTS = (
    "task",
    "harness: factor main effects",
    "harness: factor interactions",
    "harness: other",
    "task x harness",
    "seed (within task)",
    "residual",
)
#: The components that together are the harness's share.
HARNESS_PARTS = COMPONENTS[1:4]


# -- statistics --------------------------------------------------------------------------------


def _ok(rows: Any) -> Any:
    ok = rows[rows["error"].isna()].copy()
    ok["success"] = ok["success"].astype(float)
    ok["episode_return"] = ok["episode_return"].astype(float)
    return ok


def marginal_effects(
    rows: Any,
    factors: Sequence[str],
    design: dict[str, Any] | None = None,
    levels: dict[str, list[str]] | None = None,
) -> Any:
    """Per agent, factor and level: the effect on success (deviation from the factor's average)
    with a 95% interval and the estimator that made it
    (:func:`~harness_gym.analysis.effects.factor_effects`)."""
    from harness_gym.analysis.effects import factor_effects

    return factor_effects(rows, factors, design=design, levels=levels).table


def variance_decomposition(rows: Any, value: str = "success", model: Any = None) -> Any:
    """Sums of squares of ``value`` per agent: task; harness, split by ``model`` (an
    :class:`~harness_gym.analysis.effects.Model` of the sweep's harnesses, or one per agent
    in a dict, as :func:`~harness_gym.analysis.effects.factor_effects` fits them) into factor
    main effects, the model's interactions and the rest; task x harness; seed within task (the task
    instance); and the residual (harness x instance), with their shares of the total.

    Without a model the whole harness part is "harness: other". For a complete sweep (every
    task x harness x seed cell present) the parts add up to the total exactly; with missing
    cells (crashes) they are an approximation, clipped at zero.
    """
    import pandas as pd

    from harness_gym.analysis.effects_model import harness_sums_of_squares

    ok = _ok(rows)
    records = []
    for agent, g in ok.groupby("agent", sort=False):
        mine = model.get(agent) if isinstance(model, dict) else model
        row_of = {h: i for i, h in enumerate(mine.harnesses)} if mine is not None else {}
        y = g[value].astype(float)
        grand = y.mean()
        total = float(((y - grand) ** 2).sum())
        m_task = g.groupby("task_id")[value].transform("mean")
        m_harness = g.groupby("harness_id")[value].transform("mean")
        m_th = g.groupby(["task_id", "harness_id"])[value].transform("mean")
        m_ts = g.groupby(["task_id", "seed"])[value].transform("mean")
        per = g.groupby("harness_name", sort=False)[value].agg(["mean", "size"])
        use = mine if mine is not None and all(h in row_of for h in per.index) else None
        if use is not None:
            sub = use.subset([row_of[h] for h in per.index])
            split = harness_sums_of_squares(per["mean"].to_numpy(float), per["size"].to_numpy(float), sub)
        else:
            harness_ss = float(((m_harness - grand) ** 2).sum())
            split = {"main": 0.0, "interactions": 0.0, "rest": harness_ss}
        parts = {
            "task": float(((m_task - grand) ** 2).sum()),
            "harness: factor main effects": split["main"],
            "harness: factor interactions": split["interactions"],
            "harness: other": split["rest"],
            "task x harness": float(((m_th - m_task - m_harness + grand) ** 2).sum()),
            "seed (within task)": float(((m_ts - m_task) ** 2).sum()),
        }
        parts["residual"] = max(0.0, total - sum(parts.values()))
        for name in COMPONENTS:
            records.append(
                {
                    "agent": agent,
                    "component": name,
                    "sum_sq": parts[name],
                    "share": parts[name] / total if total > 0 else math.nan,
                }
            )
    return pd.DataFrame.from_records(records, columns=["agent", "component", "sum_sq", "share"])


# -- plots -------------------------------------------------------------------------------------


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(
        figsize=(max(4.0, min(width, 40.0)), max(2.5, min(height, 40.0))), dpi=100, layout="constrained"
    )


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, format="png")
    return path


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()


def plot_heatmap(
    rows: Any,
    factors: Sequence[str],
    agents: Sequence[str],
    path: Path,
    levels: dict[str, list[str]] | None = None,
) -> Path:
    """Success rate, task x (factor = level), one panel per agent."""
    import numpy as np

    ok = _ok(rows)
    levels = levels or {f: _levels(rows, f) for f in factors}
    tasks = sorted(ok["task_id"].unique()) or ["(none)"]
    columns = [(f, lv) for f in factors for lv in levels.get(f, [])]
    fig = _figure(3.5 + 0.28 * len(columns), 1.6 + len(agents) * (0.6 + 0.26 * len(tasks)))
    axes = fig.subplots(len(agents), 1, squeeze=False, sharex=True)[:, 0]
    annotate = len(agents) * len(tasks) * len(columns) <= 600
    image = None
    for ax, agent in zip(axes, agents):
        g = ok[ok["agent"] == agent]
        if g.empty or not columns:
            _empty(ax, f"{agent}: no finished episodes")
            continue
        grid = np.full((len(tasks), len(columns)), np.nan)
        for j, (f, lv) in enumerate(columns):
            rates = g[g[f"level_{f}"] == lv].groupby("task_id")["success"].mean()
            for i, task in enumerate(tasks):
                if task in rates.index:
                    grid[i, j] = rates[task]
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto", interpolation="nearest")
        ax.set_yticks(range(len(tasks)), tasks, fontsize=7)
        ax.set_title(f"success rate: {agent}", fontsize=9)
        edges = np.cumsum([len(levels.get(f, [])) for f in factors])[:-1]
        for x in edges:
            ax.axvline(x - 0.5, color="white", linewidth=1.5)
        if annotate:
            for (i, j), v in np.ndenumerate(grid):
                if v == v:
                    color = "black" if v > 0.6 else "white"
                    ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=5, color=color)
    axes[-1].set_xticks(range(len(columns)), [f"{f}={lv}" for f, lv in columns], rotation=90, fontsize=6)
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.6, label="success rate")
    return _save(fig, path)


def plot_marginal_effects(effects: Any, factors: Sequence[str], agents: Sequence[str], path: Path) -> Path:
    """Each level's effect (deviation from the factor's average, percentage points), 95% intervals."""
    labels = list(dict.fromkeys(zip(effects["factor"], effects["level"]))) if len(effects) else []
    order = {f: i for i, f in enumerate(factors)}
    labels.sort(key=lambda fl: order.get(fl[0], 0))
    fig = _figure(3 + 0.3 * len(labels), 4.2)
    ax = fig.subplots()
    if not labels:
        _empty(ax, "no finished episodes")
        return _save(fig, path)
    x_of = {fl: i for i, fl in enumerate(labels)}
    width = 0.7 / max(1, len(agents))
    markers = "osD^v<>p*h"
    for k, agent in enumerate(agents):
        e = effects[(effects["agent"] == agent) & effects["effect_low"].notna()]  # withheld: not drawn
        xs = [x_of[(f, lv)] - 0.35 + width * (k + 0.5) for f, lv in zip(e["factor"], e["level"])]
        y = 100 * e["effect"].to_numpy()
        err = [
            100 * (e["effect"] - e["effect_low"]).to_numpy(),
            100 * (e["effect_high"] - e["effect"]).to_numpy(),
        ]
        ax.errorbar(
            xs,
            y,
            yerr=err,
            fmt=markers[k % len(markers)],
            markersize=4,
            capsize=2,
            linewidth=0.8,
            label=agent,
        )
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(labels)), [f"{f}={lv}" for f, lv in labels], rotation=90, fontsize=6)
    factor_of = [f for f, _ in labels]
    for i in range(1, len(labels)):
        if factor_of[i] != factor_of[i - 1]:
            ax.axvline(i - 0.5, color="lightgrey", linewidth=0.8)
    ax.set_ylabel("effect on success (pp)")
    estimators = ", ".join(dict.fromkeys(effects["estimator"])) if "estimator" in effects else ""
    ax.set_title(
        f"effect of each harness factor level ({estimators}; 95% intervals; withheld ones not drawn)",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def plot_variance(variance: Any, agents: Sequence[str], path: Path) -> Path:
    """Stacked shares of the sum of squares of success, one bar per agent."""
    import numpy as np

    fig = _figure(7, 1.8 + 0.45 * len(agents))
    ax = fig.subplots()
    colors = ["#4C72B0", "#DD8452", "#F0B27A", "#FAD7A0", "#C44E52", "#55A868", "#BBBBBB"]
    left = np.zeros(len(agents))
    for comp, color in zip(COMPONENTS, colors):
        shares = []
        for agent in agents:
            v = variance[(variance["agent"] == agent) & (variance["component"] == comp)]["share"]
            shares.append(float(v.iloc[0]) if len(v) and v.iloc[0] == v.iloc[0] else 0.0)
        ax.barh(range(len(agents)), shares, left=left, color=color, label=comp)
        left += np.asarray(shares)
    for i in range(len(agents)):
        if left[i] == 0:
            ax.text(0.01, i, "no variance in success", va="center", fontsize=7)
    ax.set_yticks(range(len(agents)), list(agents), fontsize=8)
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("share of the variance in success")
    ax.set_title("where the variance in success comes from", fontsize=9)
    fig.legend(fontsize=7, ncol=4, loc="outside lower center", frameon=False)
    return _save(fig, path)


def plot_ceiling_vs_deployed(by_task: Any, agents: Sequence[str], path: Path) -> Path:
    """Per task: mean ceiling and each agent's deployed return, with 95% intervals."""
    import numpy as np

    tasks = list(dict.fromkeys(by_task["task_id"])) if len(by_task) else []
    fig = _figure(5 + 0.15 * len(tasks) * (1 + len(agents)), 4.5)
    ax = fig.subplots()
    if not tasks:
        _empty(ax, "no finished episodes")
        return _save(fig, path)
    series: list[tuple[str, Any]] = []
    ceil = by_task.groupby("task_id", sort=False)[["ceiling", "ceiling_low", "ceiling_high"]].first()
    if ceil["ceiling"].notna().any():
        series.append(("ceiling", ceil.reindex(tasks).rename(columns=lambda c: c.replace("ceiling", "v"))))
    for agent in agents:
        d = by_task[by_task["agent"] == agent].set_index("task_id")[
            ["deployed", "deployed_low", "deployed_high"]
        ]
        series.append(
            (f"deployed: {agent}", d.reindex(tasks).rename(columns=lambda c: c.replace("deployed", "v")))
        )
    width = 0.8 / len(series)
    x = np.arange(len(tasks))
    for k, (label, d) in enumerate(series):
        v = d["v"].to_numpy(dtype=float)
        err = [
            np.nan_to_num(v - d["v_low"].to_numpy(dtype=float)),
            np.nan_to_num(d["v_high"].to_numpy(dtype=float) - v),
        ]
        ax.bar(
            x - 0.4 + width * (k + 0.5),
            np.nan_to_num(v),
            width,
            yerr=err,
            capsize=2,
            label=label,
            color="#999999" if label == "ceiling" else None,
            error_kw={"linewidth": 0.8},
        )
    ax.set_xticks(x, tasks, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("mean return")
    ax.set_title("ceiling vs deployed return per task (the gap is the mismatch)", fontsize=9)
    fig.legend(fontsize=7, loc="outside lower center", ncol=min(4, len(series)), frameon=False)
    return _save(fig, path)


def plot_harness_spread(worst: Any, agents: Sequence[str], path: Path) -> Path:
    """Per task: the worst and best harness's success rate (a bar) and the mean (a dot)."""
    import numpy as np

    tasks = list(dict.fromkeys(worst["task_id"])) if len(worst) else []
    fig = _figure(5 + 0.15 * len(tasks) * max(1, len(agents)), 4.5)
    ax = fig.subplots()
    if not tasks:
        _empty(ax, "no finished episodes")
        return _save(fig, path)
    width = 0.8 / max(1, len(agents))
    x = np.arange(len(tasks))
    for k, agent in enumerate(agents):
        w = worst[worst["agent"] == agent].set_index("task_id").reindex(tasks)
        lo, hi = w["worst_success"].to_numpy(dtype=float), w["best_success"].to_numpy(dtype=float)
        xs = x - 0.4 + width * (k + 0.5)
        bars = ax.bar(
            xs, np.nan_to_num(hi - lo), width * 0.9, bottom=np.nan_to_num(lo), alpha=0.6, label=agent
        )
        if "different" in w:  # a spread that is noise after Holm is drawn faint and hatched
            for bar, differ in zip(bars.patches, w["different"].fillna(False)):
                if not differ:
                    bar.set_alpha(0.2)
                    bar.set_hatch("//")
        ax.plot(
            xs,
            w["mean_success"].to_numpy(dtype=float),
            "o",
            markersize=3,
            color=bars.patches[0].get_facecolor(),
            markeredgecolor="black",
            markeredgewidth=0.5,
        )
    ax.set_xticks(x, tasks, rotation=45, ha="right", fontsize=7)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("success rate")
    ax.set_title(
        "per task: worst to best harness (hatched: not significant), mean (dot)",
        fontsize=9,
    )
    fig.legend(fontsize=7, loc="outside lower center", ncol=min(4, len(agents)), frameon=False)
    return _save(fig, path)


def _levels(rows: Any, factor: str, meta: dict[str, Any] | None = None) -> list[str]:
    """A factor's level names in the space's order (else in order of appearance)."""
    from harness_gym.core.space import level_name

    column = f"level_{factor}"
    seen = list(dict.fromkeys(rows[column].dropna())) if column in rows else []
    space = (meta or {}).get("space")
    if isinstance(space, dict) and factor in space.get("factors", {}):
        ordered = [level_name(v) for v in space["factors"][factor]]
        return [lv for lv in ordered if lv in seen] + [lv for lv in seen if lv not in ordered]
    return seen


# -- documents ---------------------------------------------------------------------------------


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


def _summary_section(agents: Sequence[str], estimated: Any, worst: Any, by_agent: Any) -> Section:
    """What a reader acts on, per agent, in one line each: the factors that matter (interval and
    the design's caveat), the largest harness gap the data support, ceiling vs mismatch. Every
    number is one the sections below print."""
    lines = []
    for agent in agents:
        parts = [
            _summary_effects(estimated, agent),
            _summary_gap(worst, agent),
            _summary_mismatch(by_agent, agent),
        ]
        lines.append(f"`{agent}`: " + " ".join(p for p in parts if p))
    return Section("Summary", lines or ["No finished episodes."])


def _summary_effects(estimated: Any, agent: str) -> str:
    table = estimated.table
    mine = table[table["agent"] == agent] if len(table) else table
    top = _top_effects(mine, n=3)
    said = [
        f"{f}={lv} {e} pp" + (" (holds at the flip bases)" if estimated.unmet else "")
        for f, lv, e in zip(top["factor"], top["level"], top["effect (pp)"])
    ]
    if len(mine) and "aliased_with" in mine:
        al = mine[(mine["aliased_with"].fillna("") != "") & mine["effect_low"].notna()]
        if len(al):
            r = al.sort_values("p_holm", kind="stable").iloc[0]
            said.append(
                f"{r['factor']}={r['level']} or {r['aliased_with']} {100 * r['effect']:+.1f} "
                f"[{100 * r['effect_low']:+.1f}, {100 * r['effect_high']:+.1f}] pp "
                f"(Holm p {r['p_holm']:.2g}; this design cannot tell a main effect from that "
                "interaction; foldover separates them)"
            )
    withheld = sorted(set(mine[mine["effect_low"].isna()]["factor"])) if len(mine) else []
    text = ("Factors that matter: " + "; ".join(said) + ".") if said else "No factor effect is significant."
    if withheld:
        text += f" Withheld (see Marginal effects): {', '.join(withheld)}."
    return text


def _summary_gap(worst: Any, agent: str) -> str:
    w = worst[worst["agent"] == agent] if len(worst) else worst
    if not len(w):
        return ""
    real = w[w["different"].fillna(False).astype(bool)] if "different" in w else w.iloc[0:0]
    if not len(real):
        return "No task's best-to-worst harness gap is beyond noise."
    r = real.sort_values("spread", ascending=False, kind="stable").iloc[0]
    return (
        f"Largest harness gap: {r['task_id']}, best `{r['best_harness']}` {100 * r['best_success']:.0f}% vs "
        f"worst `{r['worst_harness']}` {100 * r['worst_success']:.0f}% ({100 * r['spread']:.0f} pp; "
        f"beyond noise in {len(real)} of {len(w)} task(s))."
    )


def _summary_mismatch(by_agent: Any, agent: str) -> str:
    a = by_agent[by_agent["agent"] == agent] if len(by_agent) else by_agent
    if not len(a) or a["ceiling"].isna().all():
        return ""
    r = a.iloc[0]
    return (
        f"Ceiling {r['ceiling']:.2f}, deployed {r['deployed']:.2f}, mismatch {r['mismatch']:.2f} "
        f"[{r['mismatch_low']:.2f}, {r['mismatch_high']:.2f}]."
    )


def _effect_rows(rows: Any, sweep_dir: Path) -> tuple[Any, list[str]]:
    """The rows factor effects may be estimated from, and a sentence saying which.

    A sweep's rows are a design: all of them. A harness search's are adaptive (each harness
    played the dev seeds its race gave it, chosen by what earlier seeds showed), so effects
    come only from the test seeds, which the search never looked at, and only from the
    harnesses that played every one of them on every task (shared seeds, no filled cells).
    Fewer than two such harnesses: no rows, and the sentence says so.
    """
    from harness_gym.analysis.search.report import is_search_folder

    if not is_search_folder(sweep_dir):
        return rows, []
    import json

    import pandas as pd

    from harness_gym.analysis.search.run import SEARCH_FILE

    spec = json.loads((sweep_dir / SEARCH_FILE).read_text(encoding="utf-8"))
    spec = spec.get("spec", spec)
    test = {int(s) for s in spec.get("test_seeds", [])}
    ok = rows[rows["error"].isna()] if "error" in rows else rows
    on_test = ok[ok["seed"].astype(int).isin(test)]
    cells = len(test) * on_test["task_id"].nunique()
    # Distinct (task, seed) instances each (agent, harness) played on the test seeds.
    played = (
        on_test.drop_duplicates(["agent", "harness_name", "task_id", "seed"])
        .groupby(["agent", "harness_name"])["seed"]
        .size()
    )
    full = {key for key, n in played.items() if cells and n >= cells}
    mask = [(a, h) in full for a, h in zip(on_test["agent"], on_test["harness_name"])]
    keep = on_test.loc[pd.Series(mask, index=on_test.index, dtype=bool)]
    harnesses = keep["harness_name"].nunique()
    if harnesses < 2:
        return keep.iloc[0:0], [
            "Search folder: factor effects are not estimated. The search's own rows are adaptive (each "
            "harness played the dev seeds its race gave it), and fewer than two harnesses played every "
            "test seed; run a sweep of a design after the search (harness-gym sweep --space ... "
            "--subset foldover) to measure them."
        ]
    return keep, [
        f"Search folder: factor effects come only from the {harnesses} harnesses that played every one of "
        f"the {len(test)} test seeds on every task (the search never looked at those seeds, and every "
        "harness compared played the same instances); the dev rows are adaptive and left out. A few "
        "harnesses chosen by a search separate few factors: a sweep of a design after the search "
        "(--subset foldover) measures them all."
    ]


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


def _top_effects(effects: Any, n: int = 10) -> Any:
    """The largest effects that stay significant after Holm's correction (family-wise error 5%
    over each agent's level effects), with their intervals and adjusted p-values (no rows: an
    empty table with the same columns)."""
    if not len(effects):
        import pandas as pd

        return pd.DataFrame(columns=["agent", "factor", "level", "n", "effect (pp)", "estimator"])
    keep = effects["effect"].notna() & effects["effect_low"].notna()
    if "significant" in effects:
        keep &= effects["significant"].astype(bool)
    e = (
        effects[keep]
        .assign(size=lambda d: d["effect"].abs())
        .sort_values("size", ascending=False, kind="stable")
        .head(n)
    )
    out = e[["agent", "factor", "level", "n"]].copy()
    out["effect (pp)"] = [
        f"{100 * s:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        for s, lo, hi in zip(e.effect, e.effect_low, e.effect_high)
    ]
    if "p_holm" in e:
        out["p (Holm)"] = [f"{p:.2g}" for p in e["p_holm"]]
    out["estimator"] = e["estimator"]
    return out


def _effects_text(estimated: Any, design: dict[str, Any] | None) -> list[str]:
    """What the effects mean, how sure they are, what is withheld and why, in words."""
    from harness_gym.analysis.effects import PAIRED

    table = estimated.table
    lines: list[str] = []
    if estimated.estimator == PAIRED and estimated.unmet:
        shown = "; ".join(f"{f} = {', '.join(lv)}" for f, lv in estimated.unmet.items())
        lines.append(
            "Flip effects hold at the base harnesses: each is averaged over the bases' levels of the other "
            f"factors. No base takes {shown}; an interaction with these levels (e.g. a factor that matters "
            "only when another takes one of them) cannot show here. Flips of more base points "
            "(balanced:N+flips) or a design clear of interactions (foldover) measure them."
        )
    lines += [f"Warning: {w}." for w in estimated.warnings]
    bases = getattr(estimated, "bases", None)
    if estimated.estimator == PAIRED and bases is not None and len(bases):
        lines.append(
            "Each factor flipped at two or more bases is tested for an effect that differs between "
            "bases (an interaction with the factors they differ in; Holm over each agent's factors): "
            + (
                "; ".join(
                    f"`{a}` {f}" for a, f, d in zip(bases["agent"], bases["factor"], bases["differs"]) if d
                )
                or "none differs"
            )
            + "."
        )
    for agent in dict.fromkeys(table["agent"]) if len(table) else []:
        none = estimated.no_effect.get(agent, [])
        exact = set(estimated.exact_zero.get(agent, []))
        if not none:
            continue
        where = " at the base harnesses" if estimated.estimator == PAIRED and estimated.unmet else ""
        parts = []
        if exact:
            names = ", ".join(f for f in none if f in exact)
            parts.append(
                f"no paired episode differed{where} for {names}"
                if estimated.estimator == PAIRED
                else f"every task instance gives exactly zero effect of {names}"
            )
        rest = [f for f in none if f not in exact]
        if rest:
            parts.append(
                f"no detectable effect{where} of " + ", ".join(_with_power(estimated, agent, f) for f in rest)
            )
        lines.append(
            f"`{agent}`: " + "; ".join(parts) + ": no level significant after Holm's correction, overall or "
            "in any task, and no task x factor heterogeneity found. Smaller effects may exist; the "
            "minimum detectable effect (80% power) is the size these tests would have seen."
        )
    het = estimated.heterogeneity
    if het is not None and len(het) and het["heterogeneous"].any():
        flagged = het[het["heterogeneous"]]
        lines.append(
            "Effects that differ by task (one-way test over tasks, Holm over each agent's factors): "
            + "; ".join(f"`{a}` {f}" for a, f in zip(flagged["agent"], flagged["factor"]))
            + ". An overall effect of these factors averages tasks that disagree; see the task table."
        )
    return lines


def _effects_method(estimated: Any) -> list[str]:
    """How the effects and their intervals are made (the folded part under the effects)."""
    table = estimated.table
    clusters = int(table["clusters"].max()) if len(table) and "clusters" in table else 0
    return [
        "A level's effect is its success rate's deviation from the average over the factor's levels, in "
        "percentage points; the difference between two levels is the difference of their effects. Each "
        "(task, seed) cluster has its own value of every effect (the estimators are linear in the "
        f"harness means); the 95% interval is Student's t over the {clusters} clusters (cluster-robust, "
        "with the small-sample correction), or, where every cluster gives the same value, an exact "
        "bound from how often a cluster could differ unseen. Largest effects lists the effects that stay "
        "significant after Holm's correction: family-wise error 5% over each agent's level effects.",
        _estimator_text(estimated.estimator),
    ]


def _aliased_effects(effects: Any) -> Any:
    """Effects of completely aliased factors, printed as what they are: "main effect or
    interaction" (the design cannot tell them apart), with their interval and Holm p."""
    if not len(effects) or "aliased_with" not in effects:
        return effects.iloc[0:0]
    e = effects[(effects["aliased_with"].fillna("") != "") & effects["effect_low"].notna()]
    out = e[["agent", "level"]].copy()
    out.insert(1, "main effect or", [f"{f} or {pairs}" for f, pairs in zip(e["factor"], e["aliased_with"])])
    out["effect (pp)"] = [
        f"{100 * s:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        for s, lo, hi in zip(e.effect, e.effect_low, e.effect_high)
    ]
    out["p (Holm)"] = [f"{p:.2g}" for p in e["p_holm"]]
    return out


def _with_power(estimated: Any, agent: str, factor: str) -> str:
    """``factor (would see +/-X pp overall, +/-Y pp within a task)``: the minimum detectable
    effects of the "no detectable effect" statement."""
    overall, task = getattr(estimated, "detectable", {}).get((agent, factor), (math.nan, math.nan))
    sizes = []
    if overall == overall:
        sizes.append(f"+/-{100 * overall:.0f} pp overall")
    if task == task:
        sizes.append(f"+/-{100 * task:.0f} pp within a task")
    return f"{factor} (minimum detectable effect {', '.join(sizes)})" if sizes else factor


def _effects_tables(estimated: Any) -> list[tuple[str, Any]]:
    tables = [
        ("Largest effects (significant after Holm's correction)", _pretty(_top_effects(estimated.table)))
    ]
    aliased = _aliased_effects(estimated.table)
    if len(aliased):
        tables.append(
            (
                "Main effect or interaction (completely aliased in this design, never called a main "
                "effect; --subset foldover separates them)",
                aliased,
            )
        )
    by_task = estimated.by_task
    if by_task is not None and len(by_task) and by_task["significant"].any():
        t = by_task[by_task["significant"]].assign(size=lambda d: d["effect"].abs())
        t = t.sort_values("size", ascending=False, kind="stable").head(12)
        out = t[["agent", "task_id", "factor", "level"]].copy()
        out["effect (pp)"] = [
            f"{100 * s:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
            for s, lo, hi in zip(t.effect, t.effect_low, t.effect_high)
        ]
        out["p (Holm)"] = [f"{p:.2g}" for p in t["p_holm"]]
        tables.append(
            ("Task-level effects (significant after Holm's correction over the agent's task rows)", out)
        )
    return tables


def _effects_diagnostics(estimated: Any) -> list[tuple[str, Any]]:
    """The effects model's diagnostics (the lack-of-fit table), shown folded."""
    fit = estimated.fit
    if fit is None or not len(fit):
        return []
    shown = fit.copy()
    shown["lack_of_fit_p"] = [("-" if p != p else f"{p:.2g}") for p in shown["lack_of_fit_p"]]
    return [("Lack of fit of the main-effects model", shown)]


def _design_text(design: dict[str, Any] | None, n_harnesses: int) -> list[str]:
    """What the design is and how balanced, in words."""
    if not design:
        return [f"{n_harnesses} harness(es); the sweep did not record its design (an older sweep)."]
    lines = [
        f"{design.get('n', n_harnesses)} harness(es): {design['kind']} ({design.get('construction', '')})."
    ]
    base = design.get("base")
    if base:
        lines.append(
            f"Base points: {base['n']}, a {base['kind']} ({base.get('construction', '')}); "
            + _balance_text(base.get("balance"))
        )
        lines.append(
            f"{len(design.get('flips', []))} one-factor flips (mode {design.get('mode')}): each pairs a "
            "base harness with a copy that changes one factor. The effects come from these pairs, so the "
            "base points need not fit a main-effects model themselves."
        )
    elif design.get("balance"):
        lines.append(_balance_text(design["balance"]))
    aliasing = design.get("interaction_aliasing")
    if not base and aliasing is not None:
        lines.append(
            "Main effects are clear of two-factor interactions (resolution IV or more)."
            if aliasing < 1e-9
            else "Main effects are aliased with two-factor interactions (largest alias coefficient "
            f"{aliasing:.2f}): an interaction would show up as a main effect. Where an interaction lies "
            "wholly inside a main effect (complete aliasing) no test on this design can tell them "
            "apart: that effect is printed as 'main effect or interaction' and never called "
            "significant as a main effect. Where part of it shows in the residual but the main effect "
            "moves more than that part, the effect is re-estimated with the interaction in the "
            "model, or withheld where the design cannot hold both. The rest is left to each agent's "
            "lack-of-fit check (below). --subset foldover separates main effects from two-factor "
            "interactions."
        )
    return lines


def _balance_text(balance: dict[str, Any] | None) -> str:
    if not balance:
        return ""
    if balance.get("orthogonal"):
        return "balanced: every pair of levels of every two factors appears equally often."
    return (
        f"not balanced: level counts of a factor differ by up to {balance['level_imbalance']}, pair counts "
        f"deviate from the balanced value by up to {balance['pair_deviation']:.2f}, the largest "
        f"|correlation| between two factors' contrast columns is {balance['max_correlation']:.2f} and "
        f"the D-efficiency of the main-effects model {_d_efficiency_text(balance)} "
        "(0 and 100% for an orthogonal array)."
    )


def _d_efficiency_text(balance: dict[str, Any]) -> str:
    """``is X%``, or why it is not a number: fewer points than the main-effects model has
    parameters (not defined), or enough points whose model columns are aliased (0)."""
    d_eff, n, p = balance.get("d_efficiency"), balance.get("n"), balance.get("parameters")
    if d_eff is None or d_eff != d_eff:
        return (
            f"is not defined: {n} point(s) cannot fit its {p} parameters"
            if p
            else "is not defined: too few points to fit it"
        )
    if d_eff == 0:  # a sweep.json written before "parameters" was recorded says 0 for both cases
        too_few = f"{n} point(s) for {p} parameters" if p and n is not None and n < p else ""
        return (
            f"is not defined: {too_few}"
            if too_few
            else "is 0%: its columns are aliased in these points (or the points are fewer than its "
            "parameters), so it cannot be fit from them alone"
        )
    return f"is {d_eff:.1f}%"


def _estimator_text(estimator: str) -> str:
    from harness_gym.analysis.effects import PAIRED

    if estimator == PAIRED:
        return (
            "Estimator: paired flips. Each flip compares two harnesses that differ in one factor "
            "on the same (task, seed); level effects are the least-squares fit of those paired "
            "differences, averaged over the base harnesses. Interactions cannot leak into them: a "
            "factor the agent ignores has exactly zero differences."
        )
    return (
        "Estimator: least squares on the harnesses' mean success with every factor's main effect "
        "(effect coding). Its estimates hold when the two-factor interactions are zero or orthogonal "
        "to them; a lack-of-fit test of this model per agent decides it from the data. Where the "
        "model does not fit, the factors whose main effect moves with the interactions carrying the "
        "misfit are named and get no interval. Aliasing the test cannot see is settled from the design "
        "(see Design): completely aliased effects read 'main effect or interaction'."
    )


def _variance_wide(variance: Any) -> Any:
    if not len(variance):
        return variance
    wide = variance.pivot(index="agent", columns="component", values="share")
    wide = wide.reindex(columns=list(COMPONENTS)).reset_index()
    return wide


def _harness_table(meta: dict[str, Any]) -> Any:
    import pandas as pd

    specs = meta.get("harness_specs", [])
    return pd.DataFrame.from_records(
        [{"harness": h["name"], "id": h["id"], **h.get("levels", {})} for h in specs]
    )


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
