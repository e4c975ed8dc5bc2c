"""The sweep report's PNG plots: the success heatmap, the marginal effects, the variance
shares, ceiling vs deployed return and the per-task harness spread.

Its own module because drawing is one concern (matplotlib, imported only when a plot is
drawn) apart from the numbers (:mod:`harness_gym.analysis.report_stats`) and the documents
(:mod:`harness_gym.analysis.report`) that embed the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness_gym.analysis.report_stats import COMPONENTS, _levels, _ok

PLOTS = (
    "success_heatmap.png",
    "marginal_effects.png",
    "variance.png",
    "ceiling_vs_deployed.png",
    "harness_spread.png",
)


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(
        figsize=(max(4.0, min(width, 40.0)), max(2.5, min(height, 40.0))), dpi=100, layout="constrained"
    )


#: The longest level label drawn under a plot's axis; a longer one (a tool-renaming level runs to
#: ~100 characters) keeps its start and end. Rotated labels take height: a figure reserves it
#: (:func:`_label_height`), else the layout collapses the axes and draws nothing legible.
LABEL_CHARS = 36


def _level_label(factor: str, level: Any) -> str:
    text = f"{factor}={level}"
    if len(text) <= LABEL_CHARS:
        return text
    keep = (LABEL_CHARS - 1) // 2
    return f"{text[:keep]}\u2026{text[-keep:]}"


def _label_height(labels: Sequence[str], fontsize: float = 6) -> float:
    """Inches that rotated tick labels of ``fontsize`` points take below an axis."""
    return 0.2 + 0.65 * fontsize / 72 * max((len(t) for t in labels), default=0)


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
    ticks = [_level_label(f, lv) for f, lv in columns]
    panels = len(agents) * (0.6 + 0.26 * len(tasks))
    fig = _figure(3.5 + 0.28 * len(columns), 1.2 + _label_height(ticks) + panels)
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
    axes[-1].set_xticks(range(len(columns)), ticks, rotation=90, fontsize=6)
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.6, label="success rate")
    return _save(fig, path)


def plot_marginal_effects(effects: Any, factors: Sequence[str], agents: Sequence[str], path: Path) -> Path:
    """Each level's effect (deviation from the factor's average, percentage points), 95% intervals."""
    labels = list(dict.fromkeys(zip(effects["factor"], effects["level"]))) if len(effects) else []
    order = {f: i for i, f in enumerate(factors)}
    labels.sort(key=lambda fl: order.get(fl[0], 0))
    ticks = [_level_label(f, lv) for f, lv in labels]
    fig = _figure(3 + 0.3 * len(labels), 3.2 + _label_height(ticks))
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
    if not effects["effect_low"].notna().any():
        note = ax.text(
            0.5,
            0.6,
            "every effect withheld:\nthis design cannot estimate them\n(see the Marginal effects table)",
            ha="center",
            va="center",
            fontsize=8,
            transform=ax.transAxes,
        )
        note.set_in_layout(False)
    ax.set_xticks(range(len(labels)), ticks, rotation=90, fontsize=6)
    factor_of = [f for f, _ in labels]
    for i in range(1, len(labels)):
        if factor_of[i] != factor_of[i - 1]:
            ax.axvline(i - 0.5, color="lightgrey", linewidth=0.8)
    ax.set_ylabel("effect on success (pp)")
    estimators = ", ".join(dict.fromkeys(effects["estimator"])) if "estimator" in effects else ""
    ax.set_title(
        f"effect of each harness factor level\n({estimators}; 95% intervals; withheld ones not drawn)",
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
