"""A reference agent as the ceiling's stand-in: rank harnesses by ceiling, mismatch and both.

Exact ceilings exist for the web family only. Elsewhere (browser, terminal, Harbor tasks,
plugins) a stronger *reference* agent's success under a harness estimates its ceiling, and an
evaluated agent's mismatch is measured against it, paired per task instance (task, seed):

* ``ceiling`` (estimated): the reference's mean success under the harness;
* ``mismatch`` (estimated): the mean of the paired differences reference - agent;
* ``difference``: ceiling - mismatch, which equals the agent's measured success exactly
  (``deployed = ceiling - mismatch`` holds for the paired means). Its use is the split: which
  term decides the agent's ranking of harnesses.

Each harness is ranked by measured success, estimated ceiling, estimated mismatch (lower is
better) and their difference; each ranking is compared with the measured one by Spearman's rank
correlation, with a 95% bootstrap interval over task instances (all harnesses of a resample
share its instances, as they do in the sweep). A negative mismatch (the reference weaker than
the agent under a harness) is reported as such: ``weaker_reference`` is ``"yes"`` when the
mismatch's interval lies below 0 and ``"maybe"`` when only its mean does.

The rank-correlation interval is the union of the percentile and the basic bootstrap intervals
(:func:`_bootstrap_interval`): where harnesses nearly or exactly tie, noise scrambles their
order and the percentile interval alone covered the true correlation 74-81% of the time; the
union covered 91.5-99.5% on every design simulated at 60 instances over 200 seeds (separated,
0.02-0.05 gaps, exact ties), 6-38% wider (tests/test_reference.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness_gym.analysis.stats import Z95, mean_ci

#: The rankings compared with measured success, and the score each sorts by (higher first).
PREDICTORS = ("ceiling", "mismatch", "difference")
DEFAULT_BY = ("harness_name", "harness_id")
N_BOOT = 1_000


@dataclass
class ReferenceAnalysis:
    """Per-harness estimates and the rankings' agreement with measured success, per agent.

    ``table``: one row per (agent, harness): ``n`` (paired instances), ``success``, ``ceiling``,
    ``mismatch`` and ``difference`` with ``_low``/``_high`` 95% intervals, the ranks
    (``rank_success``, ``rank_ceiling``, ``rank_mismatch``, ``rank_difference``; 1 = best) and
    ``weaker_reference``. ``rankings``: one row per (agent, predictor): ``spearman`` with
    ``spearman_low``/``spearman_high``, the predictor's top pick and that harness's measured
    success, and the measured best.
    """

    reference: str
    by: tuple[str, ...]
    table: Any
    rankings: Any

    def summary(self) -> str:
        """Plain-text rankings, one block per agent (for the command line)."""
        lines = [f"reference agent (the ceiling's stand-in): {self.reference}"]
        for agent, part in self.table.groupby("agent", sort=False):
            lines.append(f"agent {agent}: harnesses ranked (1 = best)")
            cols = ["success", "ceiling", "mismatch", "difference"]
            for row in part.sort_values("rank_success").itertuples(index=False):
                row = row._asdict()
                name = " ".join(str(row[b]) for b in self.by[:1])
                cells = "  ".join(
                    f"{c} {_fmt(row[c], row[c + '_low'], row[c + '_high'])} (#{row['rank_' + c]:g})"
                    for c in cols
                )
                flag = {"yes": "  reference weaker (interval below 0)", "maybe": "  reference weaker?"}
                lines.append(f"  {name}: {cells}{flag.get(row['weaker_reference'], '')}")
            for r in self.rankings[self.rankings["agent"] == agent].itertuples(index=False):
                lines.append(
                    f"  rank by {r.predictor:10s} vs measured: Spearman "
                    f"{_fmt(r.spearman, r.spearman_low, r.spearman_high)}; top pick {r.top_pick} "
                    f"(measured {r.top_pick_success:.2f}; best {r.best:.2f})"
                )
        return "\n".join(lines)


def reference_analysis(
    rows: Any,
    reference: str,
    by: Sequence[str] = DEFAULT_BY,
    value: str = "success",
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> ReferenceAnalysis:
    """Estimate each harness's ceiling by ``reference`` and rank harnesses for every other agent.

    Args:
        rows: sweep rows (a DataFrame or a sweep folder) with ``agent``, ``task_id``, ``seed``,
            the ``by`` columns and ``value``; rows with an ``error`` are left out.
        reference: the ``agent`` name whose rows stand in for the ceiling.
        by: the columns that name a harness (the rows are pooled over tasks).
        value: ``success`` (default) or ``episode_return``.
        n_boot: bootstrap resamples of task instances for the rank correlations' intervals.
        seed: the bootstrap's seed.
    """
    import pandas as pd

    from harness_gym.analysis.mismatch import _frame

    df = _frame(rows)
    by = tuple(by)
    missing = [c for c in ("agent", "task_id", "seed", value, *by) if c not in df.columns]
    if missing:
        raise KeyError(f"no column(s) {missing} in the rows; columns: {list(df.columns)}")
    if "error" in df.columns:
        df = df[df["error"].isna()]
    agents = list(dict.fromkeys(df["agent"]))
    if reference not in agents:
        raise ValueError(
            f"reference agent {reference!r} has no rows; agents in the rows: {agents} "
            "(run the sweep with it as one of its --agent specs)"
        )
    evaluated = [a for a in agents if a != reference]
    if not evaluated:
        raise ValueError(f"only the reference {reference!r} has rows: add an agent to evaluate against it")
    df = df.assign(_h=_key(df, by), _i=_key(df, ("task_id", "seed")), _v=df[value].astype(float))
    ref = df[df["agent"] == reference].groupby(["_h", "_i"])["_v"].mean()
    names = df.drop_duplicates("_h").set_index("_h")[list(by)]
    rng = np.random.default_rng(seed)
    records, rankings = [], []
    for agent in evaluated:
        mine = df[df["agent"] == agent].groupby(["_h", "_i"])["_v"].mean()
        paired = pd.concat({"ref": ref, "agent": mine}, axis=1, join="inner")
        if paired.empty:
            raise ValueError(
                f"agent {agent!r} shares no (harness, task, seed) with the reference {reference!r}"
            )
        wide_ref = paired["ref"].unstack(0)
        wide_agent = paired["agent"].unstack(0)
        keep = wide_ref.columns[wide_ref.notna().all() & wide_agent.notna().all()]
        if len(keep) == 0:  # not every harness on every instance: keep the shared instances
            wide_ref, wide_agent = wide_ref.dropna(), wide_agent.dropna()
        else:
            wide_ref, wide_agent = wide_ref[keep].dropna(), wide_agent[keep].dropna()
        harnesses = list(wide_ref.columns)
        r, a = wide_ref.to_numpy(), wide_agent.to_numpy()
        scores = _scores(r, a)
        ranks = {k: _ranks(v) for k, v in scores.items()}
        for j, h in enumerate(harnesses):
            rec: dict[str, Any] = {"agent": agent, **names.loc[h].to_dict(), "n": r.shape[0]}
            for name, values in (("success", a[:, j]), ("ceiling", r[:, j]), ("mismatch", r[:, j] - a[:, j])):
                rec.update(_interval(name, values))
            rec.update(_interval("difference", a[:, j]))  # ceiling - mismatch, paired: the success
            for k in ranks:
                rec[f"rank_{k}"] = ranks[k][j]
            rec["weaker_reference"] = (
                "yes" if rec["mismatch_high"] < 0 else "maybe" if rec["mismatch"] < 0 else "no"
            )
            records.append(rec)
        boot = _bootstrap(r, a, n_boot, rng)
        best = float(scores["success"].max())
        for predictor in PREDICTORS:
            rho = spearman(scores[predictor], scores["success"])
            low, high = _bootstrap_interval(rho, boot[predictor])
            top = int(np.argmax(scores[predictor]))
            rankings.append(
                {
                    "agent": agent,
                    "predictor": predictor,
                    "spearman": rho,
                    "spearman_low": low,
                    "spearman_high": high,
                    "top_pick": str(names.loc[harnesses[top]].iloc[0]),
                    "top_pick_success": float(scores["success"][top]),
                    "best": best,
                }
            )
    return ReferenceAnalysis(reference, by, pd.DataFrame.from_records(records), pd.DataFrame(rankings))


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN when either side is constant."""
    rx, ry = _average_ranks(np.asarray(x, float)), _average_ranks(np.asarray(y, float))
    if rx.size < 2 or np.all(rx == rx[0]) or np.all(ry == ry[0]):
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def spearman_interval(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """Spearman of paired units and its 95% Fisher-z interval, for a handful of units.

    The variance of atanh(rho) is Bonett & Wright's (2000, Psychometrika 65) (1 + rho^2/2) /
    (n - 3). Resampling units instead (a percentile bootstrap) covered a known population
    Spearman 59% of the time from 6 units; this covers it at least ~93% of the time from 4 units
    on, for population values up to ~0.97 (tests/test_reference.py). Where the sample value is at
    the edge (|rho| >= 1 - 1/n^2) the interval reaches that edge. NaN interval below 4 units or
    when either side is constant.
    """
    rho = spearman(x, y)
    n = len(x)
    if n < 4 or rho != rho:
        return rho, math.nan, math.nan
    cap = 1 - 1 / n**2
    r = min(max(rho, -cap), cap)
    half = Z95 * math.sqrt((1 + r * r / 2) / (n - 3))
    low, high = math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half)
    return rho, (-1.0 if rho <= -cap else low), (1.0 if rho >= cap else high)


def _scores(r: np.ndarray, a: np.ndarray) -> dict[str, np.ndarray]:
    """Per-harness scores (higher = ranked better) from instance x harness matrices."""
    ceiling, success = r.mean(axis=0), a.mean(axis=0)
    mismatch = ceiling - success
    return {"success": success, "ceiling": ceiling, "mismatch": -mismatch, "difference": ceiling - mismatch}


def _bootstrap(r: np.ndarray, a: np.ndarray, n_boot: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Spearman of each predictor against success over ``n_boot`` resamples of the instances."""
    n = r.shape[0]
    picks = rng.integers(0, n, (n_boot, n))
    ceiling, success = r[picks].mean(axis=1), a[picks].mean(axis=1)  # (n_boot, harnesses)
    scores = {"ceiling": ceiling, "mismatch": success - ceiling, "difference": success}
    return {p: _rowwise_spearman(scores[p], success) for p in PREDICTORS}


def _rowwise_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman per row of two (draws, units) matrices; NaN where a row is constant."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x, axis=1), rankdata(y, axis=1)
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rx * ry).sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)


def _bootstrap_interval(rho: float, draws: np.ndarray) -> tuple[float, float]:
    """The union of the percentile and the basic (reflected) 95% bootstrap intervals.

    Where harnesses nearly tie, noise scrambles their order, so the sample Spearman sits nearer
    0 than the truth and its resamples nearer still: the percentile interval is shifted the wrong
    way; the basic interval corrects the shift but undercovers where the estimate is unbiased.
    Neither alone holds on both kinds of design; the union does (module docstring)."""
    draws = draws[~np.isnan(draws)]
    if draws.size == 0 or rho != rho:
        return (math.nan, math.nan)
    low, high = (float(q) for q in np.percentile(draws, [2.5, 97.5]))
    return (max(-1.0, min(low, 2 * rho - high)), min(1.0, max(high, 2 * rho - low)))


def _average_ranks(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return np.asarray(rankdata(x), float)


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1 = best (highest score); ties share the smallest rank."""
    from scipy.stats import rankdata

    return np.asarray(rankdata(-scores, method="min"), float)


def _interval(name: str, values: np.ndarray) -> dict[str, float]:
    mean, low, high = mean_ci(list(values))
    return {name: mean, f"{name}_low": low, f"{name}_high": high}


def _key(df: Any, columns: Sequence[str]) -> list[str]:
    return [repr(k) for k in zip(*(df[c] for c in columns))]


def _fmt(mean: float, low: float, high: float) -> str:
    if mean != mean:
        return "-"
    if low != low:
        return f"{mean:.2f}"
    return f"{mean:.2f} [{low:.2f}, {high:.2f}]"


def reference_section(rows: Any, reference: str) -> tuple[Any, dict[str, Any]]:
    """The report's section for ``reference``, and its tables by file name."""
    import pandas as pd

    from harness_gym.analysis.report_section import Section

    result = reference_analysis(rows, reference)
    t = result.table
    shown = pd.DataFrame(
        {
            "agent": t["agent"],
            "harness": t[result.by[0]],
            **{
                c: [_fmt(m, lo, hi) for m, lo, hi in zip(t[c], t[f"{c}_low"], t[f"{c}_high"])]
                for c in ("success", "ceiling", "mismatch")
            },
            **{f"rank by {c}": t[f"rank_{c}"].astype(int) for c in ("success", "ceiling", "mismatch")},
            "reference weaker": t["weaker_reference"],
        }
    )
    r = result.rankings
    ranks = pd.DataFrame(
        {
            "agent": r["agent"],
            "ranking by": r["predictor"],
            "Spearman with measured success": [
                _fmt(m, lo, hi) for m, lo, hi in zip(r["spearman"], r["spearman_low"], r["spearman_high"])
            ],
            "top pick": r["top_pick"],
            "its success": r["top_pick_success"].round(2),
            "best success": r["best"].round(2),
        }
    )
    weaker = t[t["weaker_reference"] != "no"]
    text = [
        f"`{reference}` stands in for each harness's ceiling: its success under a harness estimates "
        "the ceiling, and each other agent's mismatch is reference - agent, paired per task "
        "instance (95% intervals). Ceiling - mismatch equals the agent's measured success exactly; "
        "the rankings below say which term decides the agent's order of harnesses (Spearman with "
        "a 95% bootstrap interval over task instances; mismatch ranks lower first). See "
        "docs/choosing-a-harness.md for when to trust which.",
        (
            f"The reference is weaker than the agent (negative mismatch) on {len(weaker)} "
            f"(agent, harness) pair(s), {int((weaker['weaker_reference'] == 'yes').sum())} of them "
            "beyond the interval: there its success is no ceiling, and the ceiling ranking is a "
            "lower bound."
            if len(weaker)
            else "The reference is at least as strong as every agent under every harness "
            "(no negative mismatch)."
        ),
    ]
    section = Section(
        f"Reference agent as the ceiling's stand-in: {reference}",
        text,
        tables=[("Rankings against measured success", ranks), ("Per harness", shown)],
    )
    return section, {"reference.csv": t, "reference_rankings.csv": r}
