"""The sweep report's own statistics: the variance decomposition of success (its harness part
split by the effects model), the marginal-effects table, and the finished rows and level order
the report's tables and plots share.

Its own module because these are numbers, computed from the rows before anything is drawn or
written: the plots (:mod:`harness_gym.analysis.report_plots`) and the report
(:mod:`harness_gym.analysis.report`) read them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

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
    :class:`~harness_gym.analysis.effects_model.Model` of the sweep's harnesses, or one per agent
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


def _variance_wide(variance: Any) -> Any:
    if not len(variance):
        return variance
    wide = variance.pivot(index="agent", columns="component", values="share")
    wide = wide.reindex(columns=list(COMPONENTS)).reset_index()
    return wide


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
