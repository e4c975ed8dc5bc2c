"""The worst and best harness per (agent, task), and whether they really differ.

Picking the lowest and the highest of K success rates picks noise: under an agent that no
harness affects, K harnesses on 10 seeds spread from about 0.1 to 0.9. So each row carries:

* the worst and best harness's success rate with a *simultaneous* 95% Wilson interval (the
  Bonferroni level 1 - 0.05 / K over the task's K harnesses), so the interval of the selected
  extreme still covers its true rate;
* the paired comparison best vs worst on the seeds both played: wins (best succeeded, worst
  failed), losses, the exact McNemar p value, and that p value Holm-adjusted over **every
  pair of harnesses on every task of that agent** (family-wise error at 5%): ``different``
  says whether the best beats the worst after that adjustment. The extreme pair is one of the
  family, so picking it does not inflate the error.

When nothing differs the names are ties (the table says so rather than ranking them).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

from harness_gym.analysis.stats import holm, mcnemar_exact, wilson

ALPHA = 0.05
COLUMNS = [
    "agent",
    "task_id",
    "worst_harness",
    "worst_harness_id",
    "worst_success",
    "worst_low",
    "worst_high",
    "mean_success",
    "best_harness",
    "best_success",
    "best_low",
    "best_high",
    "spread",
    "wins",
    "losses",
    "p_value",
    "p_holm",
    "different",
    "harnesses",
    "episodes_per_harness",
]


def simultaneous_z(k: int, confidence: float = 1 - ALPHA) -> float:
    """The normal quantile of a two-sided interval at level 1 - (1 - confidence) / k."""
    return float(NormalDist().inv_cdf(1 - (1 - confidence) / (2 * max(1, k))))


def worst_harness(rows: Any) -> Any:
    """Per agent and task: worst and best harness (lowest / highest success, then return, then
    name), simultaneous intervals, the mean over harnesses, and the Holm-adjusted exact paired
    test of best against worst (see the module doc). Crashed rows are left out."""
    import pandas as pd

    ok = rows[rows["error"].isna()].copy()
    ok["success"] = ok["success"].astype(float)
    ok["episode_return"] = ok["episode_return"].astype(float)
    records: list[dict[str, Any]] = []
    for agent, by_agent in ok.groupby("agent", sort=False):
        family: list[float] = []  # every pair's p value, all tasks of this agent
        picked: list[tuple[dict[str, Any], int]] = []
        for task, g in by_agent.groupby("task_id", sort=False):
            per = (
                g.groupby(["harness_name", "harness_id"], sort=False)
                .agg(success=("success", "mean"), ret=("episode_return", "mean"), n=("success", "size"))
                .reset_index()
            )
            ordered = per.sort_values(["success", "ret", "harness_name"], kind="stable").reset_index(
                drop=True
            )
            worst, best = ordered.iloc[0], ordered.iloc[-1]
            # Harness x seed outcomes (first row per cell), 0 where missing, with a presence mask.
            wide = g.pivot_table(index="harness_id", columns="seed", values="success", aggfunc="first")
            wide = wide.reindex(list(ordered["harness_id"]))
            present = wide.notna().to_numpy(dtype=float)
            wins = (wide.fillna(0).to_numpy() >= 0.5).astype(float) * present
            only = wins @ ((1 - wins) * present).T  # only[i, j]: i succeeded, j failed
            k = len(ordered)
            pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
            b, w = k - 1, 0
            at = len(family) + pairs.index((w, b)) if k > 1 else -1
            family.extend(mcnemar_exact(int(only[i, j]), int(only[j, i])) for i, j in pairs)
            z = simultaneous_z(k)
            n_w, n_b = int(worst["n"]), int(best["n"])
            w_lo, w_hi = wilson(float(worst["success"]) * n_w, n_w, z)
            b_lo, b_hi = wilson(float(best["success"]) * n_b, n_b, z)
            picked.append(
                (
                    {
                        "agent": agent,
                        "task_id": task,
                        "worst_harness": worst["harness_name"],
                        "worst_harness_id": worst["harness_id"],
                        "worst_success": float(worst["success"]),
                        "worst_low": w_lo,
                        "worst_high": w_hi,
                        "mean_success": float(per["success"].mean()),
                        "best_harness": best["harness_name"],
                        "best_success": float(best["success"]),
                        "best_low": b_lo,
                        "best_high": b_hi,
                        "spread": float(best["success"] - worst["success"]),
                        "wins": int(only[b, w]) if k > 1 else 0,
                        "losses": int(only[w, b]) if k > 1 else 0,
                        "p_value": family[at] if at >= 0 else math.nan,
                        "harnesses": k,
                        "episodes_per_harness": int(worst["n"]),
                    },
                    at,
                )
            )
        adjusted = holm(family)
        for record, at in picked:
            record["p_holm"] = adjusted[at] if at >= 0 else math.nan
            record["different"] = bool(at >= 0 and adjusted[at] < ALPHA)
            records.append(record)
    return pd.DataFrame.from_records(records, columns=COLUMNS)


def verdict(row: Any) -> str:
    """One word for a table row: do the worst and best harness differ (after Holm)?"""
    if row["different"]:
        return "differ"
    if row["spread"] == 0:
        return "tie"
    return "no significant difference"


def pretty(table: Any) -> Any:
    """The report's table: names only where best and worst differ after Holm; else ties."""
    import pandas as pd

    def rate(m: float, lo: float, hi: float) -> str:
        return "-" if m != m else f"{m:.2f} [{lo:.2f}, {hi:.2f}]"

    rows = []
    for _, r in table.iterrows():
        differ = bool(r["different"])
        rows.append(
            {
                "agent": r["agent"],
                "task": r["task_id"],
                "worst harness": r["worst_harness"] if differ else "(tie)",
                "worst success": rate(r["worst_success"], r["worst_low"], r["worst_high"]),
                "mean": f"{r['mean_success']:.2f}",
                "best harness": r["best_harness"] if differ else "(tie)",
                "best success": rate(r["best_success"], r["best_low"], r["best_high"]),
                "best - worst": f"{r['spread']:+.2f}",
                "wins / losses": f"{r['wins']} / {r['losses']}",
                "Holm p": "-" if r["p_holm"] != r["p_holm"] else f"{r['p_holm']:.3f}",
                "verdict": verdict(r),
                "harnesses": r["harnesses"],
                "episodes each": r["episodes_per_harness"],
            }
        )
    return pd.DataFrame.from_records(rows)
