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

Intervals come from a cluster bootstrap over (task, seed): every replicate resamples whole
clusters, so the pairing of harnesses on the same task instance is kept. The bootstrap is one
matrix product per replicate batch (cluster weights times the cluster-by-harness table).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PAIRED = "paired flips"
LEAST_SQUARES = "least squares"
COLUMNS = ["agent", "factor", "level", "n", "effect", "effect_low", "effect_high", "estimator"]


# -- the model ---------------------------------------------------------------------------------


def effect_coding(s: int) -> np.ndarray:
    """The ``s x (s - 1)`` sum-to-zero coding: level ``j < s - 1`` is the unit vector ``e_j``,
    the last level is ``-1`` everywhere, so a level's effect is its row times the coefficients."""
    return np.vstack([np.eye(s - 1), -np.ones((1, s - 1))]) if s > 1 else np.zeros((s, 0))


@dataclass
class Model:
    """A least-squares model of harness means: its terms, its matrix, and what it cannot separate."""

    factors: list[str]
    levels: dict[str, list[str]]
    codes: np.ndarray  # (harnesses, factors) level indices
    terms: list[tuple[str, ...]]  # ("F",) main effects, ("F", "G") interactions
    matrix: np.ndarray  # (harnesses, p): intercept, then every term's columns
    slices: dict[tuple[str, ...], slice]
    not_identified: list[str] = field(default_factory=list)
    omitted: list[tuple[str, str]] = field(default_factory=list)
    aliases: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    harnesses: list[str] = field(default_factory=list)  # the harness name of each row

    @property
    def interactions(self) -> list[tuple[str, ...]]:
        return [t for t in self.terms if len(t) == 2]

    def subset(self, rows: Sequence[int]) -> Model:
        """The same terms on some of the harnesses (in the order given)."""
        idx = np.asarray(rows, dtype=np.int64)
        names = [self.harnesses[i] for i in idx] if self.harnesses else []
        return Model(
            self.factors,
            self.levels,
            self.codes[idx],
            self.terms,
            self.matrix[idx],
            self.slices,
            self.not_identified,
            self.omitted,
            self.aliases,
            names,
        )

    def columns(self, terms: Sequence[tuple[str, ...]]) -> np.ndarray:
        parts = [self.matrix[:, :1]] + [self.matrix[:, self.slices[t]] for t in terms]
        return np.hstack(parts)

    def warnings(self) -> list[str]:
        """What the design cannot separate, in words."""
        out = []
        h = len(self.codes)
        if self.not_identified:
            out.append(
                f"the design cannot separate the main effects of {_names(self.not_identified)} from the "
                f"other factors' (rank deficient with {h} harness(es)); those effects are not estimated"
            )
        n_pairs = math.comb(len(self.factors), 2)
        if self.omitted:
            shown = ", ".join(f"{a} x {b}" for a, b in self.omitted[:6])
            more = f" and {len(self.omitted) - 6} more" if len(self.omitted) > 6 else ""
            out.append(
                f"{len(self.omitted)} of {n_pairs} two-factor interactions cannot be separated by the design "
                f"({shown}{more}); the model assumes them zero"
            )
        if self.aliases:
            example = next(iter(self.aliases.items()))
            out.append(
                f"the main effects of {_names(list(self.aliases))} are confounded with two-factor "
                f"interactions the design cannot separate (e.g. {example[0]} with "
                f"{' x '.join(example[1][0])}): an interaction between those factors would show up "
                "as a main effect; flips (--subset ...+flips) measure effects without this"
            )
        return out


def _names(items: Sequence[str]) -> str:
    return ", ".join(items)


def build_model(
    codes: np.ndarray,
    factors: Sequence[str],
    levels: Mapping[str, Sequence[str]],
    interactions: bool = True,
    alias_threshold: float = 0.3,
) -> Model:
    """The model for a design (one row of level indices per harness).

    Main effects first; a factor whose columns add less than their full rank is *not
    identified*. Then two-way interactions, fewest columns first, each kept only if it adds
    its full rank (the design separates it from everything already in). Interactions left out
    are *omitted*; a factor whose estimate moves by more than ``alias_threshold`` per unit of
    an omitted interaction's column is *aliased* with it.
    """
    codes = np.asarray(codes, dtype=np.int64).reshape(-1, len(factors))
    h = len(codes)
    blocks: dict[tuple[str, ...], np.ndarray] = {}
    for c, f in enumerate(factors):
        blocks[(f,)] = effect_coding(len(levels[f]))[codes[:, c]]
    cols = [np.ones((h, 1))]
    terms: list[tuple[str, ...]] = []
    not_identified = []
    rank = 1
    for f in factors:
        block = blocks[(f,)]
        if block.shape[1] == 0:
            continue
        r = np.linalg.matrix_rank(np.hstack([*cols, block]))
        if r == rank + block.shape[1]:
            cols.append(block)
            terms.append((f,))
            rank = r
        else:
            not_identified.append(f)
    omitted: list[tuple[str, str]] = []
    if interactions:
        pairs = sorted(
            itertools.combinations(range(len(factors)), 2),
            key=lambda ij: (blocks[(factors[ij[0]],)].shape[1] * blocks[(factors[ij[1]],)].shape[1], ij),
        )
        for i, j in pairs:
            a, b = blocks[(factors[i],)], blocks[(factors[j],)]
            if not a.shape[1] or not b.shape[1]:
                continue
            block = (a[:, :, None] * b[:, None, :]).reshape(h, -1)
            blocks[(factors[i], factors[j])] = block
            if factors[i] in not_identified or factors[j] in not_identified:
                omitted.append((factors[i], factors[j]))
                continue
            if rank + block.shape[1] <= h:
                r = np.linalg.matrix_rank(np.hstack([*cols, block]))
                if r == rank + block.shape[1]:
                    cols.append(block)
                    terms.append((factors[i], factors[j]))
                    rank = r
                    continue
            omitted.append((factors[i], factors[j]))
    matrix = np.hstack(cols)
    slices, start = {}, 1
    for t, block in zip(terms, cols[1:]):
        slices[t] = slice(start, start + block.shape[1])
        start += block.shape[1]
    model = Model(list(factors), {f: list(levels[f]) for f in factors}, codes, terms, matrix, slices)
    model.not_identified, model.omitted = not_identified, omitted
    if omitted:
        pinv = np.linalg.pinv(matrix)
        for t in [t for t in terms if len(t) == 1]:
            hits = []
            for pair in omitted:
                z = blocks[pair]
                z = z / np.maximum(np.linalg.norm(z, axis=0) / math.sqrt(h), 1e-12)
                alias = pinv[slices[t]] @ z  # how the factor's coefficients move per unit of z
                if np.abs(alias).max() > alias_threshold and t[0] not in pair:
                    hits.append(pair)
            if hits:
                model.aliases[t[0]] = hits
    return model


# -- the estimators ----------------------------------------------------------------------------


@dataclass
class Effects:
    """Effect rows (``table``), the estimator that made them, the model, and warnings in words."""

    table: Any
    estimator: str
    model: Model | None
    warnings: list[str]


@dataclass
class _Grid:
    """One agent's outcomes as a (cluster, harness) table; NaN where a cell is missing."""

    y: np.ndarray
    harnesses: list[str]
    clusters: int


def _grids(rows: Any, value: str) -> dict[str, _Grid]:
    import pandas as pd

    ok = rows[rows["error"].isna()] if "error" in rows else rows
    out = {}
    for agent in pd.unique(ok["agent"]):
        g = ok[ok["agent"] == agent]
        cluster = pd.MultiIndex.from_arrays([g["task_id"], g["seed"]]).factorize()[0]
        harness, names = pd.factorize(g["harness_name"])
        y = np.full((int(cluster.max()) + 1 if len(cluster) else 0, len(names)), np.nan)
        y[cluster, harness] = g[value].to_numpy(dtype=float)
        out[str(agent)] = _Grid(y, [str(n) for n in names], y.shape[0])
    return out


def _weights(n_clusters: int, replicates: int, seed: int) -> np.ndarray:
    """Row 0: the sample itself; then cluster-bootstrap counts (multinomial resamples)."""
    rng = np.random.default_rng(seed)
    w = rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=replicates).astype(float)
    return np.vstack([np.ones((1, n_clusters)), w])


def _interval(draws: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    alpha = (1 - confidence) / 2
    return np.quantile(draws, alpha, axis=0), np.quantile(draws, 1 - alpha, axis=0)


def factor_effects(
    rows: Any,
    factors: Sequence[str],
    design: Mapping[str, Any] | None = None,
    levels: Mapping[str, Sequence[str]] | None = None,
    value: str = "success",
    replicates: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Effects:
    """Per agent, factor and level: the effect (deviation from the factor's average) with a
    cluster-bootstrap interval, from paired flips when ``design`` records them, else from the
    least-squares model of main effects and the two-way interactions the design separates.

    Args:
        rows: sweep rows (:func:`harness_gym.analysis.sweep.load_rows`); rows with an ``error``
            are left out.
        factors: the factors (``level_<factor>`` columns).
        design: the sweep's design record (``sweep.json``'s ``design``); its ``flips`` list
            of ``[base harness, flipped harness, factor]`` selects the paired estimator.
        levels: each factor's level names in order (default: order of appearance).
    """
    import pandas as pd

    factors = [f for f in factors if f"level_{f}" in rows]
    ok = rows[rows["error"].isna()] if "error" in rows else rows
    levels = {
        f: list((levels or {}).get(f) or list(dict.fromkeys(ok[f"level_{f}"].dropna()))) for f in factors
    }
    for f in factors:  # levels the rows show but the list lacks
        levels[f] += [lv for lv in dict.fromkeys(ok[f"level_{f}"].dropna()) if lv not in levels[f]]
    per_harness = ok.drop_duplicates("harness_name").set_index("harness_name")
    flips = list((design or {}).get("flips") or [])
    grids = _grids(ok, value)
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    model = None
    if flips:
        estimator = PAIRED
        for agent, grid in grids.items():
            records += _paired(agent, grid, flips, per_harness, factors, levels, replicates, confidence, seed)
        unlinked = sorted({r["factor"] for r in records if r["effect"] != r["effect"]})
        if unlinked:
            warnings.append(
                f"the flips of {_names(unlinked)} do not link every level to the others; "
                "those factors' effects are not estimated"
            )
    else:
        estimator = LEAST_SQUARES
        names = list(per_harness.index)
        codes = np.array(
            [[levels[f].index(per_harness.at[h, f"level_{f}"]) for f in factors] for h in names],
            dtype=np.int64,
        ).reshape(len(names), len(factors))
        model = build_model(codes, factors, levels)
        model.harnesses = [str(h) for h in names]
        warnings += model.warnings()
        row_of = {h: i for i, h in enumerate(names)}
        for agent, grid in grids.items():
            idx = np.array([row_of[h] for h in grid.harnesses], dtype=np.int64)
            records += _least_squares(agent, grid, model, idx, replicates, confidence, seed)
    table = pd.DataFrame.from_records(records, columns=COLUMNS)
    return Effects(table, estimator, model, warnings)


def _least_squares(
    agent: str, grid: _Grid, model: Model, idx: np.ndarray, replicates: int, confidence: float, seed: int
) -> list[dict[str, Any]]:
    """Weighted least squares on harness means; every bootstrap replicate is one matrix product."""
    x = model.matrix[idx]
    present = ~np.isnan(grid.y)
    y0 = np.where(present, grid.y, 0.0)
    w = _weights(grid.clusters, replicates, seed)
    sums, counts = w @ y0, w @ present  # (R + 1, harnesses)
    means = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    base = counts[0] / max(counts[0].sum(), 1.0)
    means = np.where(counts > 0, means, means[:1])  # a harness no replicate drew: its sample mean
    xtw = x.T * base
    coef = means @ (xtw.T @ np.linalg.pinv(xtw @ x).T)
    out = []
    for term in model.terms:
        if len(term) != 1:
            continue
        f = term[0]
        c = model.factors.index(f)
        effects = coef[:, model.slices[term]] @ effect_coding(len(model.levels[f])).T  # (R + 1, s)
        low, high = _interval(effects[1:], confidence)
        n = np.bincount(model.codes[idx, c], weights=present.sum(axis=0), minlength=len(model.levels[f]))
        for j, level in enumerate(model.levels[f]):
            out.append(_record(agent, f, level, n[j], effects[0, j], low[j], high[j], LEAST_SQUARES))
    for f in model.not_identified:
        for level in model.levels[f]:
            out.append(_record(agent, f, level, 0, math.nan, math.nan, math.nan, LEAST_SQUARES))
    return out


def _paired(
    agent: str,
    grid: _Grid,
    flips: Sequence[Sequence[str]],
    per_harness: Any,
    factors: Sequence[str],
    levels: Mapping[str, Sequence[str]],
    replicates: int,
    confidence: float,
    seed: int,
) -> list[dict[str, Any]]:
    """Level effects from paired differences: per factor, least squares on the level graph
    (``L theta = b`` with ``L`` the count-weighted Laplacian), solved for every replicate."""
    col = {h: i for i, h in enumerate(grid.harnesses)}
    w = _weights(grid.clusters, replicates, seed)
    out = []
    for f in factors:
        s = len(levels[f])
        pairs = [(b, g) for b, g, factor in flips if factor == f and b in col and g in col]
        if not pairs:
            continue
        lv = [levels[f].index(per_harness.at[h, f"level_{f}"]) for h in grid.harnesses]
        a = np.array([lv[col[b]] for b, _ in pairs])
        c = np.array([lv[col[g]] for _, g in pairs])
        d = grid.y[:, [col[g] for _, g in pairs]] - grid.y[:, [col[b] for b, _ in pairs]]  # (clusters, pairs)
        valid = ~np.isnan(d)
        d = np.where(valid, d, 0.0)
        edge = np.zeros((len(pairs), s))
        edge[np.arange(len(pairs)), c] += 1.0
        edge[np.arange(len(pairs)), a] -= 1.0
        outer = (edge[:, :, None] * edge[:, None, :]).reshape(len(pairs), -1)  # (pairs, s*s)
        n_r = w @ valid  # (R + 1, pairs) differences per flip
        s_r = w @ d  # (R + 1, pairs) their sums
        lap = (n_r @ outer).reshape(-1, s, s)
        rhs = s_r @ edge  # (R + 1, s)
        n_level = valid.sum(axis=0) @ np.abs(edge)  # differences touching each level
        if np.linalg.matrix_rank(lap[0]) < s - 1:
            theta = np.full((1, s), math.nan)
            low = high = theta[0]
        else:
            theta = np.einsum("rij,rj->ri", np.linalg.pinv(lap), rhs)
            low, high = _interval(theta[1:], confidence)
        for j, level in enumerate(levels[f]):
            out.append(_record(agent, f, level, n_level[j], theta[0, j], low[j], high[j], PAIRED))
    return out


def _record(
    agent: str, factor: str, level: str, n: float, effect: float, low: float, high: float, estimator: str
) -> dict[str, Any]:
    effect, low, high = (_snap(v) for v in (effect, low, high))
    return {
        "agent": agent,
        "factor": factor,
        "level": level,
        "n": int(n),
        "effect": effect,
        "effect_low": min(low, effect) if effect == effect else math.nan,
        "effect_high": max(high, effect) if effect == effect else math.nan,
        "estimator": estimator,
    }


def _snap(value: float) -> float:
    """Round away floating-point dust, so an exact zero effect reads (and tests) as zero."""
    value = float(value)
    return 0.0 if abs(value) < 1e-10 else round(value, 12)


# -- variance ----------------------------------------------------------------------------------


def harness_sums_of_squares(means: np.ndarray, counts: np.ndarray, model: Model | None) -> dict[str, float]:
    """Split the harness sum of squares (count-weighted, around the weighted grand mean) into
    the model's main effects, its interactions, and the rest (nested weighted projections,
    so the three parts add up)."""
    grand = float((means * counts).sum() / counts.sum())
    total = float((counts * (means - grand) ** 2).sum())
    if model is None or not model.terms:
        return {"main": 0.0, "interactions": 0.0, "rest": total}
    mains = [t for t in model.terms if len(t) == 1]

    def fitted(terms: Sequence[tuple[str, ...]]) -> float:
        x = model.columns(terms)
        sw = np.sqrt(counts)
        coef, *_ = np.linalg.lstsq(x * sw[:, None], means * sw, rcond=None)
        return float((counts * (x @ coef - grand) ** 2).sum())

    main = fitted(mains)
    full = fitted(model.terms)
    return {"main": main, "interactions": max(0.0, full - main), "rest": max(0.0, total - full)}
