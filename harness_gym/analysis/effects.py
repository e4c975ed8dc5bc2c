"""Factor effects of a sweep: what each harness factor level does to an agent, and how sure we are.

An *effect* of a level is its deviation from the average over the factor's levels (effect
coding): the effects of a factor's levels sum to zero, and the difference between two levels
is the difference of their effects. Two estimators, each named in every row it produces:

* ``paired flips``: the sweep ran one-factor flips (base harnesses and copies that change one
  factor, :func:`harness_gym.core.designs.flips`). Each flip gives, on every (task, seed), the
  difference between two levels with everything else held fixed; the level effects are the
  least-squares solution of those differences. Unbiased whatever the interactions: the
  estimate is the factor's average effect over the base harnesses.
* ``least squares``: otherwise, a linear model of the harnesses' mean outcome with every main
  effect and the two-way interactions the design can separate (added smallest first while
  the model keeps full rank). Main effects are unbiased when the omitted interactions are
  zero or orthogonal to them (an orthogonal array makes main effects orthogonal to each
  other); :class:`Model` lists what the design cannot separate, in words.

Intervals are cluster-robust over (task, seed): every estimator is linear in the harnesses'
means, so each task instance (cluster) has its own value of every effect, and the interval is
Student's t over those cluster values (:func:`~harness_gym.analysis.effects_inference.cluster_t`),
which keeps the pairing of harnesses on the same task instance. No resampling.

This module is the estimators and the :class:`Effects` they return. The model of harness
means lives in :mod:`harness_gym.analysis.effects_model`, what the design or the data cannot
separate (aliasing, lack of fit) in :mod:`harness_gym.analysis.effects_aliasing`, and the
intervals, tests and power in :mod:`harness_gym.analysis.effects_inference`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness_gym.analysis.effects_aliasing import (
    _aliased_with,
    _apply_aliasing,
    _fit_warnings,
    _lack_of_fit,
)
from harness_gym.analysis.effects_aliasing import alias_profile as alias_profile
from harness_gym.analysis.effects_inference import (
    ALPHA,
    Estimate,
    _one_way,
    cluster_t,
    holm,
    mean_zero_test,
    minimum_detectable,
)
from harness_gym.analysis.effects_inference import NO_VARIATION as NO_VARIATION
from harness_gym.analysis.effects_model import Model, _names, build_model, effect_coding

PAIRED = "paired flips"
LEAST_SQUARES = "least squares"
COLUMNS = [
    "agent",
    "factor",
    "level",
    "n",
    "effect",
    "effect_low",
    "effect_high",
    "p_value",
    "p_holm",
    "significant",
    "clusters",
    "estimator",
    "note",
    "aliased_with",
]


# -- the estimators ----------------------------------------------------------------------------

TASK_COLUMNS = [
    "agent",
    "task_id",
    "factor",
    "level",
    "effect",
    "effect_low",
    "effect_high",
    "p_value",
    "p_holm",
    "significant",
]
HETEROGENEITY_COLUMNS = ["agent", "factor", "tasks", "p_value", "p_holm", "heterogeneous"]
BASE_COLUMNS = ["agent", "factor", "bases", "p_value", "p_holm", "differs"]
FIT_COLUMNS = ["agent", "lack_of_fit_p", "residual_df", "fits", "interactions", "withheld"]


@dataclass
class Effects:
    """Effect rows (``table``), the estimator that made them, each agent's least-squares model
    (empty for paired flips), and warnings in words.

    ``by_task``: the same effects within each task; ``heterogeneity``: per agent and factor,
    whether its effects differ between tasks; ``fit``: per agent, the lack-of-fit check of the
    main-effects model (least squares); ``unmet``: for flips, the levels no base harness takes;
    ``bases``: for flips, per agent and factor, whether its effect differs between the bases;
    ``no_effect``: per agent, the factors the report may call without detectable effect (every
    level's interval printed, nothing significant overall or per task after Holm's correction,
    no heterogeneity); ``exact_zero``: of those, the ones no cluster moved at all.
    """

    table: Any
    estimator: str
    models: dict[str, Model]
    warnings: list[str]
    by_task: Any = None
    heterogeneity: Any = None
    fit: Any = None
    unmet: dict[str, list[str]] = field(default_factory=dict)
    bases: Any = None
    no_effect: dict[str, list[str]] = field(default_factory=dict)
    exact_zero: dict[str, list[str]] = field(default_factory=dict)
    #: (agent, factor) of ``no_effect`` -> (overall, within one task): the smallest level effect
    #: the tests had 80% power to call significant after Holm's correction
    detectable: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)


@dataclass
class _Grid:
    """One agent's outcomes as a (cluster, harness) table; NaN where a cell is missing."""

    y: np.ndarray
    harnesses: list[str]
    clusters: int
    tasks: np.ndarray  # the task of each cluster

    def filled(self) -> np.ndarray:
        """Missing cells replaced by their harness's mean (so each cluster has every harness)."""
        means = np.nanmean(np.where(np.isnan(self.y).all(axis=0), 0.0, self.y), axis=0)
        return np.where(np.isnan(self.y), means, self.y)

    def counts(self) -> np.ndarray:
        return (~np.isnan(self.y)).sum(axis=0).astype(float)

    def means(self) -> np.ndarray:
        counts = self.counts()
        return np.nansum(self.y, axis=0) / np.maximum(counts, 1.0)


def _grids(rows: Any, value: str) -> dict[str, _Grid]:
    import pandas as pd

    ok = rows[rows["error"].isna()] if "error" in rows else rows
    out = {}
    for agent in pd.unique(ok["agent"]):
        g = ok[ok["agent"] == agent]
        keys = pd.MultiIndex.from_arrays([g["task_id"], g["seed"]])
        cluster, uniques = keys.factorize()
        harness, names = pd.factorize(g["harness_name"])
        y = np.full((int(cluster.max()) + 1 if len(cluster) else 0, len(names)), np.nan)
        y[cluster, harness] = g[value].to_numpy(dtype=float)
        tasks = np.array([str(t) for t, _ in uniques], dtype=object)
        out[str(agent)] = _Grid(y, [str(n) for n in names], y.shape[0], tasks)
    return out


def _bounds(a: np.ndarray, y_range: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """The smallest and largest value ``a @ y`` can take for ``y`` in ``y_range`` per harness."""
    lo, hi = y_range
    return (np.minimum(a * lo, a * hi).sum(axis=1), np.maximum(a * lo, a * hi).sum(axis=1))


def factor_effects(
    rows: Any,
    factors: Sequence[str],
    design: Mapping[str, Any] | None = None,
    levels: Mapping[str, Sequence[str]] | None = None,
    value: str = "success",
    replicates: int | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    assume_no_interactions: bool = False,
) -> Effects:
    """Per agent, factor and level: the effect (deviation from the factor's average) with a
    small-sample cluster-robust interval and a Holm-adjusted p-value, from paired flips when
    ``design`` records them, else from the least-squares model of main effects and the two-way
    interactions the data select; per task, the same effects and a heterogeneity test.

    Every estimator here is linear in the harnesses' mean outcomes, so each (task, seed)
    cluster has its own value of every effect; intervals are t intervals over those cluster
    values (:func:`cluster_t`). ``replicates`` and ``seed`` are accepted for compatibility
    (the intervals need no resampling).

    Args:
        rows: sweep rows (:func:`harness_gym.analysis.sweep.load_rows`); rows with an ``error``
            are left out.
        factors: the factors (``level_<factor>`` columns).
        design: the sweep's design record (``sweep.json``'s ``design``); its ``flips`` list
            of ``[base harness, flipped harness, factor]`` selects the paired estimator.
        levels: each factor's level names in order (default: order of appearance).
        assume_no_interactions: trust the main-effects model (least squares): no main effect is
            labelled aliased, adjusted or withheld for aliasing (the lack-of-fit check still runs).
    """
    import pandas as pd

    del replicates, seed
    factors = [f for f in factors if f"level_{f}" in rows]
    ok = rows[rows["error"].isna()] if "error" in rows else rows
    seen = {f: list(pd.unique(ok[f"level_{f}"].dropna())) for f in factors}
    levels = {f: list((levels or {}).get(f) or seen[f]) for f in factors}
    for f in factors:  # levels the rows show but the list lacks
        levels[f] += [lv for lv in seen[f] if lv not in levels[f]]
    per_harness = ok.drop_duplicates("harness_name").set_index("harness_name")
    flips = list((design or {}).get("flips") or [])
    grids = _grids(ok, value)
    values = ok[value].to_numpy(dtype=float) if len(ok) else np.zeros(1)
    binary = bool(np.isin(values, (0.0, 1.0)).all())
    y_range = (0.0, 1.0) if binary else (float(np.nanmin(values)), float(np.nanmax(values)))
    span = float(y_range[1] - y_range[0]) or 1.0  # the outcome's range: the scale of "no variation"
    records: list[dict[str, Any]] = []
    task_records: list[dict[str, Any]] = []
    het_records: list[dict[str, Any]] = []
    fit_records: list[dict[str, Any]] = []
    base_records: list[dict[str, Any]] = []
    warnings: list[str] = []
    models: dict[str, Model] = {}
    unmet: dict[str, list[str]] = {}
    estimator = PAIRED if flips else LEAST_SQUARES
    for agent, grid in grids.items():
        codes = np.array(
            [[levels[f].index(per_harness.at[h, f"level_{f}"]) for f in factors] for h in grid.harnesses],
            dtype=np.int64,
        ).reshape(len(grid.harnesses), len(factors))
        withheld: dict[str, str] = {}
        aliased: dict[str, str] = {}
        adjusted: dict[str, str] = {}
        if not flips:
            counts, means = grid.counts(), grid.means()
            resid = np.where(~np.isnan(grid.y), grid.y - means, 0.0)
            noise = float((resid**2).sum() / max(counts.sum() - len(counts), 1))
            model = build_model(codes, factors, levels, means, counts, noise)
            model.harnesses = list(grid.harnesses)
            models[agent] = model  # with the interactions the data select: the variance split
            main = build_model(codes, factors, levels, interactions=False)
            linear = _least_squares_linear(main, counts)
            fit = _lack_of_fit(main, grid.filled(), span)
            if fit["fits"] is False:
                withheld = _aliased_with(main, fit["interactions"])
            if not assume_no_interactions:
                aliased, adjusted = _apply_aliasing(main, counts, linear, withheld)
            fit_records.append(
                {
                    "agent": agent,
                    "lack_of_fit_p": fit["p"],
                    "residual_df": fit["df"],
                    "fits": fit["fits"],
                    "interactions": "; ".join(f"{a} x {b}" for a, b in fit["interactions"]),
                    "withheld": "; ".join(withheld),
                }
            )
            warnings += _fit_warnings(agent, model, fit, withheld)
            if aliased:
                shown = "; ".join(f"{f} with {pairs}" for f, pairs in aliased.items())
                warnings.append(
                    f"{agent}: completely aliased in this design: {shown}. Each such effect is printed as "
                    "'main effect or interaction' and never called significant as a main effect (no "
                    "lack-of-fit test can see an interaction that lies inside the main effects); "
                    "--subset foldover separates them"
                )
        else:
            per_base: dict[str, list[np.ndarray]] = {}
            linear = _paired_linear(grid, flips, per_harness, factors, levels, per_base)
            unmet = _unmet_levels(flips, per_harness, factors, levels, grid.harnesses)
            base_records += _base_differences(agent, grid, per_base, span)
        records += _rows(
            agent, grid, linear, factors, levels, codes, y_range, confidence, withheld, estimator,
            aliased, adjusted,
        )  # fmt: skip
        skip = {**withheld, **aliased}
        tr, hr = _task_rows(agent, grid, linear, factors, levels, y_range, confidence, skip)
        task_records += tr
        het_records += hr
    table = pd.DataFrame.from_records(records, columns=COLUMNS)
    by_task = pd.DataFrame.from_records(task_records, columns=TASK_COLUMNS)
    heterogeneity = pd.DataFrame.from_records(het_records, columns=HETEROGENEITY_COLUMNS)
    fit_table = pd.DataFrame.from_records(fit_records, columns=FIT_COLUMNS)
    bases_table = pd.DataFrame.from_records(base_records, columns=BASE_COLUMNS)
    if flips:
        for r in base_records:
            if r["differs"]:
                warnings.append(
                    f"{r['agent']}: the effect of {r['factor']} differs between the base harnesses "
                    f"(p = {r['p_value']:.2g}, Holm-adjusted {r['p_holm']:.2g}): it interacts with factors "
                    "the bases differ in, so at levels no base takes its effect may differ again"
                )
        unlinked = sorted({r["factor"] for r in records if r["effect"] != r["effect"]})
        if unlinked:
            warnings.append(
                f"the flips of {_names(unlinked)} do not link every level to the others; "
                "those factors' effects are not estimated"
            )
    else:
        design_warnings = _merge_warnings({a: m.warnings() for a, m in models.items()}, keep_aliases=False)
        warnings = design_warnings + warnings
    effects = Effects(
        table, estimator, models, warnings, by_task, heterogeneity, fit_table, unmet, bases_table
    )
    effects.no_effect, effects.exact_zero = _without_effect(effects, grids, linear_zero=_exact_zeros(records))
    return effects


def _merge_warnings(per_agent: Mapping[str, list[str]], keep_aliases: bool = True) -> list[str]:
    """Warnings every agent shares once; the others prefixed with the agent's name. The
    design-only confounding warning is dropped unless ``keep_aliases`` (the data decide it)."""
    per_agent = {
        a: [w for w in ws if keep_aliases or ("confounded with" not in w and "cannot be separated" not in w)]
        for a, ws in per_agent.items()
    }
    lists = list(per_agent.values())
    shared = [w for w in (lists[0] if lists else []) if all(w in other for other in lists)]
    out = list(shared)
    for agent, items in per_agent.items():
        out += [f"{agent}: {w}" for w in items if w not in shared]
    return out


def _least_squares_linear(model: Model, counts: np.ndarray) -> dict[str, np.ndarray | None]:
    """Per factor, the ``levels x harnesses`` matrix taking harness means to level effects
    (count-weighted least squares); None for a factor the design cannot identify."""
    x = model.matrix
    base = counts / max(counts.sum(), 1.0)
    xtw = x.T * base
    solve = np.linalg.pinv(xtw @ x) @ xtw  # (p, harnesses)
    out: dict[str, np.ndarray | None] = {}
    for term in model.terms:
        if len(term) == 1:
            f = term[0]
            out[f] = effect_coding(len(model.levels[f])) @ solve[model.slices[term]]
    for f in model.not_identified:
        out[f] = None
    return out


def _paired_linear(
    grid: _Grid,
    flips: Sequence[Sequence[str]],
    per_harness: Any,
    factors: Sequence[str],
    levels: Mapping[str, Sequence[str]],
    per_base: dict[str, list[np.ndarray]] | None = None,
) -> dict[str, np.ndarray | None]:
    """Per factor, the ``levels x harnesses`` matrix of the paired-flip estimator: per base
    averaged over bases when each base was flipped to every level, else least squares on the
    level graph (``L theta = b`` with ``L`` the Laplacian of the flips)."""
    col = {h: i for i, h in enumerate(grid.harnesses)}
    h = len(grid.harnesses)
    out: dict[str, np.ndarray | None] = {}
    for f in factors:
        s = len(levels[f])
        pairs = [(b, g) for b, g, factor in flips if factor == f and b in col and g in col]
        if not pairs:
            continue
        lv = [levels[f].index(per_harness.at[name, f"level_{f}"]) for name in grid.harnesses]
        a = np.array([lv[col[b]] for b, _ in pairs])
        c = np.array([lv[col[g]] for _, g in pairs])
        diff = np.zeros((len(pairs), h))  # each flip's difference as a row over harness means
        diff[np.arange(len(pairs)), [col[g] for _, g in pairs]] += 1.0
        diff[np.arange(len(pairs)), [col[b] for b, _ in pairs]] -= 1.0
        edge = np.zeros((len(pairs), s))
        edge[np.arange(len(pairs)), c] += 1.0
        edge[np.arange(len(pairs)), a] -= 1.0
        bases = sorted({b for b, _ in pairs})
        star = {b: {int(c[k]) for k, (bb, _) in enumerate(pairs) if bb == b} for b in bases}
        if all(len(star[b]) == s - 1 for b in bases):
            # Every base compared with every other level: per base, each level's deviation from
            # that base's average over levels; then the average over bases (equal weights), so
            # the estimand is the factor's mean effect over the base harnesses, interactions or not.
            at = {b: np.zeros((s, h)) for b in bases}  # each base's own level effects
            for k, (b, _) in enumerate(pairs):
                at[b] += np.outer(np.eye(s)[c[k]] - 1.0 / s, diff[k])
            out[f] = sum(at.values()) / len(bases)
            if per_base is not None:
                per_base[f] = [at[b] for b in bases]
        else:
            lap = edge.T @ edge
            out[f] = None if np.linalg.matrix_rank(lap) < s - 1 else np.linalg.pinv(lap) @ edge.T @ diff
    return out


def _rows(
    agent: str,
    grid: _Grid,
    linear: Mapping[str, np.ndarray | None],
    factors: Sequence[str],
    levels: Mapping[str, Sequence[str]],
    codes: np.ndarray,
    y_range: tuple[float, float],
    confidence: float,
    withheld: Mapping[str, str],
    estimator: str,
    aliased: Mapping[str, str] | None = None,
    adjusted: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The effect rows of one agent, with Holm's correction over all its level effects. A
    completely aliased factor (``aliased``: factor -> interactions) keeps its interval, which
    is that of "main effect or interaction", and is never significant as a main effect."""
    aliased, adjusted = aliased or {}, adjusted or {}
    filled, means, present = grid.filled(), grid.means(), ~np.isnan(grid.y)
    out = []
    for f in factors:
        if f not in linear:
            continue
        a = linear[f]
        s = len(levels[f])
        c = list(factors).index(f)
        n = np.bincount(codes[:, c], weights=present.sum(axis=0), minlength=s)
        if a is None:
            for j, level in enumerate(levels[f]):
                out.append(_record(agent, f, level, n[j], math.nan, None, estimator, "not identified"))
            continue
        if estimator == PAIRED:
            n = present.sum(axis=0) @ (np.abs(a) > 1e-12).T
        theta = filled @ a.T
        est = cluster_t(theta, a @ means, _bounds(a, y_range), confidence)
        unmoved = bool(np.abs(theta).max() <= 1e-12) if theta.size else False
        note = withheld.get(f, "")
        if not note and est.clusters < 2:
            note = f"{est.clusters} (task, seed) cluster: an interval needs at least 2 (more seeds or tasks)"
        keep = est if not note else None
        also = ""
        if not note and f in aliased:
            also = aliased[f]
            note = (
                f"main effect or {also}: completely aliased in this design (no test can tell them apart); "
                "--subset foldover separates them"
            )
        elif not note and f in adjusted:
            note = adjusted[f]
        for j, level in enumerate(levels[f]):
            row = _record(agent, f, level, n[j], est.effect[j], keep, estimator, note, j)
            out.append({**row, "aliased_with": also, "_unmoved": unmoved})
    adjusted_p = holm([r["p_value"] for r in out])
    for r, p in zip(out, adjusted_p):
        r["p_holm"] = p
        r["significant"] = bool(p <= ALPHA) if p == p and not r["aliased_with"] else False
    return out


def _task_rows(
    agent: str,
    grid: _Grid,
    linear: Mapping[str, np.ndarray | None],
    factors: Sequence[str],
    levels: Mapping[str, Sequence[str]],
    y_range: tuple[float, float],
    confidence: float,
    withheld: Mapping[str, str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per task the same effects (clusters of that task only), Holm over the agent's task rows;
    per factor a one-way test that its effects are the same in every task (Bonferroni over
    its levels, then Holm over the agent's factors)."""
    filled = grid.filled()
    tasks = list(dict.fromkeys(grid.tasks))
    rows: list[dict[str, Any]] = []
    het: list[dict[str, Any]] = []
    for f in factors:
        a = linear.get(f)
        if a is None or f in withheld:
            continue
        theta = filled @ a.T
        bounds = _bounds(a, y_range)
        for task in tasks:
            keep = grid.tasks == task
            t_theta = theta[keep]
            est = cluster_t(t_theta, t_theta.mean(axis=0), bounds, confidence)
            for j, level in enumerate(levels[f]):
                rows.append(
                    {
                        "agent": agent,
                        "task_id": task,
                        "factor": f,
                        "level": level,
                        "effect": _snap(est.effect[j]),
                        "effect_low": _snap(est.low[j]),
                        "effect_high": _snap(est.high[j]),
                        "p_value": float(est.p[j]),
                    }
                )
        if len(tasks) >= 2:
            scale = float(y_range[1] - y_range[0]) or 1.0
            ps = [_one_way(theta[:, j], grid.tasks, scale) for j in range(theta.shape[1])]
            ps = [p for p in ps if p == p]
            p = min(1.0, min(ps) * max(len(levels[f]) - 1, 1)) if ps else math.nan
            het.append({"agent": agent, "factor": f, "tasks": len(tasks), "p_value": p})
    for items in (rows, het):
        for r, p in zip(items, holm([r["p_value"] for r in items])):
            r["p_holm"] = p
            key = "significant" if items is rows else "heterogeneous"
            r[key] = bool(p <= ALPHA) if p == p else False
    return rows, het


def _base_differences(
    agent: str, grid: _Grid, per_base: Mapping[str, list[np.ndarray]], scale: float = 1.0
) -> list[dict[str, Any]]:
    """Per factor flipped at two or more bases: a test that its level effects are the same at
    every base (each cluster's differences between bases, :func:`mean_zero_test`), Holm over
    the agent's factors. A difference is an interaction with the factors the bases differ in."""
    filled = grid.filled()
    out = []
    for f, mats in per_base.items():
        if len(mats) < 2:
            continue
        z = np.hstack([filled @ (m - mats[0]).T for m in mats[1:]])
        out.append({"agent": agent, "factor": f, "bases": len(mats), "p_value": mean_zero_test(z, scale)})
    for r, p in zip(out, holm([r["p_value"] for r in out])):
        r["p_holm"] = p
        r["differs"] = bool(p <= ALPHA) if p == p else False
    return out


def _unmet_levels(
    flips: Sequence[Sequence[str]],
    per_harness: Any,
    factors: Sequence[str],
    levels: Mapping[str, Sequence[str]],
    harnesses: Sequence[str],
) -> dict[str, list[str]]:
    """Per factor, the levels no base harness of the flips takes: an effect measured by flips
    holds at the bases, and says nothing about the other factors' effects at these levels."""
    bases = sorted({b for b, _, _ in flips if b in set(harnesses)})
    out = {}
    for f in factors:
        seen = {per_harness.at[b, f"level_{f}"] for b in bases}
        missing = [lv for lv in levels[f] if lv not in seen]
        if missing:
            out[f] = missing
    return out


def _exact_zeros(records: Sequence[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """(agent, factor) pairs where no cluster's value of any level effect moved from zero."""
    groups: dict[tuple[str, str], list[bool]] = {}
    for r in records:
        zero = bool(r.get("_unmoved"))
        groups.setdefault((r["agent"], r["factor"]), []).append(zero)
    return {k for k, v in groups.items() if all(v)}


def _without_effect(
    effects: Effects, grids: Mapping[str, _Grid], linear_zero: set[tuple[str, str]]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per agent: factors with no detectable effect (every level's interval printed, no level
    significant after Holm's correction overall or in any task, no task heterogeneity, no
    difference between flip bases), and of those the factors where no cluster moved at all."""
    table, by_task, het = effects.table, effects.by_task, effects.heterogeneity
    none: dict[str, list[str]] = {}
    exact: dict[str, list[str]] = {}
    for agent in grids:
        rows = table[table["agent"] == agent]
        for f in dict.fromkeys(rows["factor"]):
            r = rows[rows["factor"] == f]
            if r["effect_low"].isna().any():
                continue
            if "aliased_with" in r and (r["aliased_with"].fillna("") != "").any():
                continue  # the main effect and an interaction could cancel: no claim
            if r["significant"].any():
                continue
            t = by_task[(by_task["agent"] == agent) & (by_task["factor"] == f)]
            if len(t) and t["significant"].any():
                continue
            hz = het[(het["agent"] == agent) & (het["factor"] == f)]
            if len(hz) and hz["heterogeneous"].any():
                continue
            bases = effects.bases
            if bases is not None and len(bases):
                bz = bases[(bases["agent"] == agent) & (bases["factor"] == f)]
                if len(bz) and bz["differs"].any():
                    continue
            none.setdefault(agent, []).append(f)
            effects.detectable[(agent, f)] = (
                minimum_detectable(r["effect_low"], r["effect_high"], len(rows)),
                minimum_detectable(t["effect_low"], t["effect_high"], len(by_task[by_task["agent"] == agent]))
                if len(t)
                else math.nan,
            )
            if (agent, f) in linear_zero:
                exact.setdefault(agent, []).append(f)
    return none, exact


def _record(
    agent: str,
    factor: str,
    level: str,
    n: float,
    effect: float,
    est: Estimate | None,
    estimator: str,
    note: str = "",
    j: int = 0,
) -> dict[str, Any]:
    # a withheld effect is withheld everywhere: no point estimate in the table or the CSV either
    effect = _snap(effect) if est is not None or not note else math.nan
    low = _snap(est.low[j]) if est is not None else math.nan
    high = _snap(est.high[j]) if est is not None else math.nan
    return {
        "agent": agent,
        "factor": factor,
        "level": level,
        "n": int(n),
        "effect": effect,
        "effect_low": low,
        "effect_high": high,
        "p_value": float(est.p[j]) if est is not None else math.nan,
        "p_holm": math.nan,
        "significant": False,
        "clusters": est.clusters if est is not None else 0,
        "estimator": estimator,
        "note": note,
        "aliased_with": "",
    }


def _snap(value: float) -> float:
    """Round away floating-point dust, so an exact zero effect reads (and tests) as zero."""
    value = float(value)
    if value != value:
        return value
    return 0.0 if abs(value) < 1e-10 else round(value, 12)
