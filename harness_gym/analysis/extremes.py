"""The worst and best harness per (agent, task), and whether they really differ.

Picking the lowest and the highest of K success rates picks noise: under an agent that no
harness affects, K harnesses on 10 seeds spread from about 0.1 to 0.9. So each row carries:

* the worst and best harness's success rate with a *simultaneous* 95% Wilson interval (the
  Bonferroni level 1 - 0.05 / K over the task's K harnesses), so the interval of the selected
  extreme still covers its true rate;
* a test of "the spread best - worst is noise": a permutation test that shuffles the outcomes
  among the harnesses *within each task instance* (task, seed) and recomputes the spread of
  the extremes (:func:`spread_test`). It is exact under the null that the harnesses are
  interchangeable on every instance (an independent coin per cell, one coin per instance, or
  rare symmetric disagreements all qualify), pairs harnesses by instance, and already accounts
  for picking the extremes of K. Its p values are Holm-adjusted over the tasks of the agent
  (family-wise error 5%); ``different`` says whether the spread survives that;
* the paired counts of best vs worst on the seeds both played: wins (best succeeded, worst
  failed) and losses.

When nothing differs the names are ties (the table says so rather than ranking them).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

from harness_gym.analysis.stats import holm, wilson

ALPHA = 0.05
#: Permutations per spread test (p values resolve to 1 / (DRAWS + 1)).
DRAWS = 2000
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


def spread_test(outcomes: Any, draws: int = DRAWS, seed: int = 0) -> tuple[float, float]:
    """(spread, p): the range of the harnesses' success rates and its permutation p value.

    ``outcomes``: a harness x instance array of 0/1 with NaN where a harness did not play an
    instance. Each draw shuffles every instance's outcomes among the harnesses that played it
    (so each harness keeps its number of episodes and each instance its number of successes)
    and recomputes max - min of the rates; p = (1 + draws at least as spread) / (1 + draws).
    """
    import numpy as np

    x = np.asarray(outcomes, dtype=float)
    present = ~np.isnan(x)
    counts = present.sum(axis=1)
    keep = counts > 0
    x, present, counts = x[keep], present[keep], counts[keep]
    if len(x) < 2:
        return (0.0, 1.0)
    wins = np.where(present, x, 0.0)
    rates = wins.sum(axis=1) / counts
    observed = float(rates.max() - rates.min())
    successes = wins.sum(axis=0)  # per instance
    rng = np.random.default_rng(seed)
    hits, done = 0, 0
    while done < draws:
        b = min(250, draws - done)
        keys = rng.random((b, *x.shape))
        keys[:, ~present] = np.inf  # absent cells sort last and get nothing
        rank = keys.argsort(axis=1).argsort(axis=1)  # each cell's place within its instance
        shuffled = (rank < successes[None, None, :]) & present[None]
        r = shuffled.sum(axis=2) / counts[None, :]
        hits += int((r.max(axis=1) - r.min(axis=1) >= observed - 1e-12).sum())
        done += b
    return (observed, (1 + hits) / (1 + draws))


def worst_harness(rows: Any, draws: int = DRAWS) -> Any:
    """Per agent and task: worst and best harness (lowest / highest success, then return, then
    name), simultaneous intervals, the mean over harnesses, the spread test Holm-adjusted over
    the agent's tasks (see the module doc). Crashed rows are left out."""
    import pandas as pd

    ok = rows[rows["error"].isna()].copy()
    ok["success"] = ok["success"].astype(float)
    ok["episode_return"] = ok["episode_return"].astype(float)
    records: list[dict[str, Any]] = []
    for agent, by_agent in ok.groupby("agent", sort=False):
        mine: list[dict[str, Any]] = []
        for task, g in by_agent.groupby("task_id", sort=False):
            per = (
                g.groupby(["harness_name", "harness_id"], sort=False)
                .agg(success=("success", "mean"), ret=("episode_return", "mean"), n=("success", "size"))
                .reset_index()
            )
            ordered = per.sort_values(["success", "ret", "harness_name"], kind="stable")
            worst, best = ordered.iloc[0], ordered.iloc[-1]
            # Harness x seed outcomes (the first row of a repeated cell), NaN where not played.
            wide = g.pivot_table(index="harness_id", columns="seed", values="success", aggfunc="first")
            w_row, b_row = wide.loc[worst["harness_id"]], wide.loc[best["harness_id"]]
            both = w_row.notna() & b_row.notna()
            _, p = spread_test(wide.to_numpy(), draws)
            k = len(per)
            z = simultaneous_z(k)
            n_w, n_b = int(worst["n"]), int(best["n"])
            w_lo, w_hi = wilson(float(worst["success"]) * n_w, n_w, z)
            b_lo, b_hi = wilson(float(best["success"]) * n_b, n_b, z)
            mine.append(
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
                    "wins": int(((b_row >= 0.5) & (w_row < 0.5) & both).sum()),
                    "losses": int(((w_row >= 0.5) & (b_row < 0.5) & both).sum()),
                    "p_value": p if k > 1 else math.nan,
                    "harnesses": k,
                    "episodes_per_harness": n_w,
                }
            )
        tested = [r for r in mine if r["harnesses"] > 1]
        for r, q in zip(tested, holm([r["p_value"] for r in tested])):
            r["p_holm"] = q
        for r in mine:
            r.setdefault("p_holm", math.nan)
            r["different"] = bool(r["p_holm"] == r["p_holm"] and r["p_holm"] < ALPHA)
        records.extend(mine)
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
