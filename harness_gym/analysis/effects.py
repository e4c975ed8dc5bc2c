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
    unseparable: list[tuple[str, str]] = field(default_factory=list)
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
        if self.unseparable:
            shown = ", ".join(f"{a} x {b}" for a, b in self.unseparable[:6])
            more = f" and {len(self.unseparable) - 6} more" if len(self.unseparable) > 6 else ""
            out.append(
                f"{len(self.unseparable)} of {n_pairs} two-factor interactions cannot be separated by the "
                f"design ({shown}{more}); the model assumes them zero"
            )
        if self.aliases:
            example = next(iter(self.aliases.items()))
            out.append(
                f"the main effects of {_names(list(self.aliases))} are confounded with two-factor "
                f"interactions left out of the model (e.g. {example[0]} with "
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
    means: np.ndarray | None = None,
    counts: np.ndarray | None = None,
    noise: float | None = None,
    alias_threshold: float = 0.3,
) -> Model:
    """The model for a design (one row of level indices per harness).

    Main effects first; a factor whose columns add less than their full rank is *not
    identified*. A two-way interaction the design can estimate on top of the main effects is
    *separable*; the others are *unseparable*. Without outcomes every separable interaction
    is kept that still adds its full rank (fewest columns first). With outcomes (``means``
    per harness, ``counts`` of episodes behind them, ``noise`` the variance of one episode)
    interactions enter by forward selection among those whose sum of squares is beyond the
    99.9% point of its chi-square under no interaction: the one that explains the most. A main
    effect whose coefficients move by more than ``alias_threshold`` per unit of a left-out
    interaction's column is *aliased* with it.
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
    main_rank = rank
    unseparable: list[tuple[str, str]] = []
    separable: dict[tuple[str, str], np.ndarray] = {}
    pairs = sorted(
        itertools.combinations(range(len(factors)), 2),
        key=lambda ij: (blocks[(factors[ij[0]],)].shape[1] * blocks[(factors[ij[1]],)].shape[1], ij),
    )
    for i, j in pairs:
        a, b = blocks[(factors[i],)], blocks[(factors[j],)]
        pair = (factors[i], factors[j])
        if not a.shape[1] or not b.shape[1]:
            continue
        block = (a[:, :, None] * b[:, None, :]).reshape(h, -1)
        blocks[pair] = block
        k = block.shape[1]
        if factors[i] in not_identified or factors[j] in not_identified or main_rank + k > h:
            unseparable.append(pair)
        elif np.linalg.matrix_rank(np.hstack([*cols, block])) == main_rank + k:
            separable[pair] = block
        else:
            unseparable.append(pair)

    def fits(block: np.ndarray) -> bool:
        return (
            rank + block.shape[1] <= h
            and np.linalg.matrix_rank(np.hstack([*cols, block])) == rank + block.shape[1]
        )

    if means is None:
        for pair, block in separable.items():
            if fits(block):
                cols.append(block)
                terms.append(pair)
                rank += block.shape[1]
    else:
        w = np.sqrt(np.asarray(counts if counts is not None else np.ones(h), dtype=float))
        y = np.asarray(means, dtype=float) * w
        scale = max(float(noise or 0.0), 1e-12)

        def rss(x: np.ndarray) -> float:
            coef, *_ = np.linalg.lstsq(x * w[:, None], y, rcond=None)
            return float(((y - (x * w[:, None]) @ coef) ** 2).sum())

        left = dict(separable)
        while left:
            now = rss(np.hstack(cols))
            gains = {}
            for pair, block in left.items():
                if fits(block):
                    gain = (now - rss(np.hstack([*cols, block]))) / scale
                    if gain > _chi2_999(block.shape[1]):
                        gains[pair] = gain
            if not gains:
                break
            best = max(gains, key=lambda p: gains[p])  # ties: the first, i.e. fewest columns
            cols.append(left.pop(best))
            terms.append(best)
            rank += blocks[best].shape[1]
    omitted = unseparable + [p for p in separable if p not in terms]
    matrix = np.hstack(cols)
    slices, start = {}, 1
    for t, block in zip(terms, cols[1:]):
        slices[t] = slice(start, start + block.shape[1])
        start += block.shape[1]
    model = Model(list(factors), {f: list(levels[f]) for f in factors}, codes, terms, matrix, slices)
    model.not_identified, model.omitted, model.unseparable = not_identified, omitted, unseparable
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


def _chi2_999(k: int) -> float:
    """The 99.9% point of a chi-square with ``k`` degrees of freedom (Wilson-Hilferty)."""
    z = 3.090232306167813
    return k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3


# -- the estimators ----------------------------------------------------------------------------


@dataclass
class Effects:
    """Effect rows (``table``), the estimator that made them, each agent's least-squares model
    (empty for paired flips), and warnings in words."""

    table: Any
    estimator: str
    models: dict[str, Model]
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
    models: dict[str, Model] = {}
    if not flips:
        estimator = LEAST_SQUARES
        for agent, grid in grids.items():
            codes = np.array(
                [[levels[f].index(per_harness.at[h, f"level_{f}"]) for f in factors] for h in grid.harnesses],
                dtype=np.int64,
            ).reshape(len(grid.harnesses), len(factors))
            present = ~np.isnan(grid.y)
            counts = present.sum(axis=0).astype(float)
            means = np.nansum(grid.y, axis=0) / np.maximum(counts, 1.0)
            resid = np.where(present, grid.y - means, 0.0)
            noise = float((resid**2).sum() / max(present.sum() - len(counts), 1))
            model = build_model(codes, factors, levels, means, counts, noise)
            model.harnesses = list(grid.harnesses)
            models[agent] = model
            records += _least_squares(agent, grid, model, replicates, confidence, seed)
        warnings += _merge_warnings({a: m.warnings() for a, m in models.items()})
    else:
        estimator = PAIRED
        for agent, grid in grids.items():
            records += _paired(agent, grid, flips, per_harness, factors, levels, replicates, confidence, seed)
        unlinked = sorted({r["factor"] for r in records if r["effect"] != r["effect"]})
        if unlinked:
            warnings.append(
                f"the flips of {_names(unlinked)} do not link every level to the others; "
                "those factors' effects are not estimated"
            )
    table = pd.DataFrame.from_records(records, columns=COLUMNS)
    return Effects(table, estimator, models, warnings)


def _merge_warnings(per_agent: Mapping[str, list[str]]) -> list[str]:
    """Warnings every agent shares once; the others prefixed with the agent's name."""
    lists = list(per_agent.values())
    shared = [w for w in (lists[0] if lists else []) if all(w in other for other in lists)]
    out = list(shared)
    for agent, items in per_agent.items():
        out += [f"{agent}: {w}" for w in items if w not in shared]
    return out


def _least_squares(
    agent: str, grid: _Grid, model: Model, replicates: int, confidence: float, seed: int
) -> list[dict[str, Any]]:
    """Weighted least squares on harness means; every bootstrap replicate is one matrix product."""
    x = model.matrix
    present = ~np.isnan(grid.y)
    y0 = np.where(present, grid.y, 0.0)
    w = _weights(grid.clusters, replicates, seed)
    sums, counts = w @ y0, w @ present  # (R + 1, harnesses)
    means = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    means = np.where(counts > 0, means, means[:1])  # a harness no replicate drew: its sample mean
    base = counts[0] / max(counts[0].sum(), 1.0)
    xtw = x.T * base
    coef = means @ (xtw.T @ np.linalg.pinv(xtw @ x).T)  # (R + 1, p)
    out = []
    for term in model.terms:
        if len(term) != 1:
            continue
        f = term[0]
        c = model.factors.index(f)
        effects = coef[:, model.slices[term]] @ effect_coding(len(model.levels[f])).T  # (R + 1, s)
        low, high = _interval(effects[1:], confidence)
        n = np.bincount(model.codes[:, c], weights=present.sum(axis=0), minlength=len(model.levels[f]))
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
    """Level effects from paired differences, for every replicate: per base averaged over bases
    when each base was flipped to every level, else least squares on the level graph
    (``L theta = b`` with ``L`` the count-weighted Laplacian)."""
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
        bases = sorted({b for b, _ in pairs})
        star = {b: {int(c[k]) for k, (bb, _) in enumerate(pairs) if bb == b} for b in bases}
        if all(len(star[b]) == s - 1 for b in bases):
            # Every base compared with every other level: per base, each level's deviation from
            # that base's average over levels; then the average over bases (equal weights), so
            # the estimand is the factor's mean effect over the base harnesses, interactions or not.
            base_of = np.array([bases.index(b) for b, _ in pairs])
            diff = np.divide(s_r, n_r, out=np.zeros_like(s_r), where=n_r > 0)  # (R + 1, pairs)
            v = np.zeros((len(w), len(bases), s))
            v[:, base_of, c] = diff
            theta = (v - v.mean(axis=2, keepdims=True)).mean(axis=1)
            low, high = _interval(theta[1:], confidence)
        elif np.linalg.matrix_rank(lap[0]) < s - 1:
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
