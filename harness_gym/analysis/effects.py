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
    interactions: bool = True,
) -> Model:
    """The model for a design (one row of level indices per harness).

    Main effects first; a factor whose columns add less than their full rank is *not
    identified*. A two-way interaction the design can estimate on top of the main effects is
    *separable*; the others are *unseparable*. Without outcomes every separable interaction
    is kept that still adds its full rank (fewest columns first). With outcomes (``means``
    per harness, ``counts`` of episodes behind them, ``noise`` the variance of one episode)
    interactions enter by forward selection among those whose sum of squares is beyond the
    99.9% point of its chi-square under no interaction: the one that explains the most. With
    ``interactions=False`` the model has main effects only (every pair is omitted). A main
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

    if not interactions:
        pass
    elif means is None:
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


# -- aliasing of main effects with two-factor interactions ---------------------------------------

#: A main effect that moves by more than this per unit (root mean square over the design) of a
#: cell interaction that leaves nothing in the residual is *completely aliased* with it: no
#: lack-of-fit test can tell them apart, only another design.
COMPLETE_ALIAS = 0.05
#: A main effect that moves by more than this per unit of what the lack-of-fit test sees of a
#: cell interaction (its residual part, root mean square) is *partially aliased*: the test has
#: too little power to protect it, so its estimate is adjusted for the interaction where the
#: design separates them, else withheld.
PARTIAL_ALIAS = 1.0


@dataclass(frozen=True)
class Alias:
    """A main effect of ``factor`` that moves with the interaction ``pair``: ``coefficient``
    is how far (per unit of the cell interaction's root mean square) for a complete alias, and
    per unit of the part the lack-of-fit test sees for a partial one."""

    factor: str
    pair: tuple[str, str]
    coefficient: float
    complete: bool


def _cell_interactions(model: Model, pair: tuple[str, str]) -> np.ndarray:
    """The interaction part of every cell indicator ``[A = a and B = b]`` of a pair (the product
    of the centred level indicators), evaluated on the design: ``(harnesses, cells)``. "Fails
    only when A = a and B = b" is the interaction agents have; each is a direction of the pair's
    interaction space, judged on its own."""
    i, j = model.factors.index(pair[0]), model.factors.index(pair[1])
    sa, sb = len(model.levels[pair[0]]), len(model.levels[pair[1]])
    ia = np.eye(sa)[model.codes[:, i]] - 1.0 / sa
    ib = np.eye(sb)[model.codes[:, j]] - 1.0 / sb
    return (ia[:, :, None] * ib[:, None, :]).reshape(len(model.codes), -1)


def alias_profile(
    model: Model, partial: float = PARTIAL_ALIAS, complete: float = COMPLETE_ALIAS
) -> dict[str, list[Alias]]:
    """Per main effect of ``model``, the two-factor interactions of other factors it moves with,
    complete aliases first, then by coefficient. Each cell interaction is projected on its own
    (its part inside the model's span moves the estimates, its residual part is what the
    lack-of-fit test sees), so no pair hides another."""
    x = model.matrix
    h = len(x)
    out: dict[str, list[Alias]] = {}
    if not h:
        return out
    pinv = np.linalg.pinv(x)
    resid_op = np.eye(h) - x @ pinv
    mains = [t for t in model.terms if len(t) == 1]
    for i, j in itertools.combinations(range(len(model.factors)), 2):
        pair = (model.factors[i], model.factors[j])
        w = _cell_interactions(model, pair)
        rms = np.linalg.norm(w, axis=0) / math.sqrt(h)
        w = w[:, rms > 1e-12] / rms[rms > 1e-12]
        if not w.shape[1]:
            continue
        seen = np.linalg.norm(resid_op @ w, axis=0) / math.sqrt(h)  # what lack of fit sees
        for t in mains:  # pairs with the factor itself too: unbalanced designs alias A with A x B
            moves = np.abs(pinv[model.slices[t]] @ w).max(axis=0)  # per cell
            blind = seen <= 1e-9
            if (moves[blind] > complete).any():
                out.setdefault(t[0], []).append(Alias(t[0], pair, float(moves[blind].max()), True))
                continue
            leverage = moves[~blind] / seen[~blind]
            if leverage.size and float(leverage.max()) > partial + 1e-9:
                out.setdefault(t[0], []).append(Alias(t[0], pair, float(leverage.max()), False))
    for f in out:
        out[f].sort(key=lambda al: (not al.complete, -al.coefficient))
    return out


def _pairs_text(pairs: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{a} x {b}" for a, b in pairs)


def _adjusted_linear(model: Model, counts: np.ndarray, factor: str, pairs: Sequence[tuple[str, str]]) -> Any:
    """The ``levels x harnesses`` least-squares matrix of ``factor``'s level effects in the
    main-effects model plus ``pairs``' interactions (unbiased when those are the interactions
    there are); None when the design cannot hold them all at full rank."""
    cols = [model.matrix]
    rank = model.matrix.shape[1]
    h = len(model.matrix)
    for pair in pairs:
        block = _pair_block(model, pair)
        trial = np.hstack([*cols, block])
        if trial.shape[1] > h or np.linalg.matrix_rank(trial) < rank + block.shape[1]:
            return None
        cols.append(block)
        rank += block.shape[1]
    x = np.hstack(cols)
    base = counts / max(counts.sum(), 1.0)
    xtw = x.T * base
    solve = np.linalg.pinv(xtw @ x) @ xtw
    return effect_coding(len(model.levels[factor])) @ solve[model.slices[(factor,)]]


def _apply_aliasing(
    model: Model, counts: np.ndarray, linear: dict[str, Any], withheld: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Settle each aliased main effect: completely aliased ones are returned (factor -> the
    interactions, printed as "main effect or ..." and never called significant as a main
    effect); partially aliased ones are re-estimated with those interactions in the model
    (``linear`` updated; returned second, factor -> note) or, where the design cannot hold
    them, withheld (a note in ``withheld``)."""
    complete: dict[str, str] = {}
    adjusted_notes: dict[str, str] = {}
    for f, aliases in alias_profile(model).items():
        if f in withheld or linear.get(f) is None:
            continue
        full = [al.pair for al in aliases if al.complete]
        if full:
            complete[f] = _pairs_text(full)
            continue
        pairs = [al.pair for al in aliases]
        refit = _adjusted_linear(model, counts, f, pairs)
        if refit is None:
            worst = max(al.coefficient for al in aliases)
            withheld[f] = (
                f"partially aliased with {_pairs_text(pairs)} (it moves up to {worst:.1f} times what the "
                "lack-of-fit test sees of them), which this design cannot separate from it: no interval "
                "(--subset foldover measures it)"
            )
        else:
            linear[f] = refit
            adjusted_notes[f] = f"adjusted for {_pairs_text(pairs)} (partially aliased with it)"
    return complete, adjusted_notes


def _chi2_999(k: int) -> float:
    """The 99.9% point of a chi-square with ``k`` degrees of freedom (Wilson-Hilferty)."""
    z = 3.090232306167813
    return k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3


# -- intervals, tests, multiplicity ---------------------------------------------------------------


@dataclass
class Estimate:
    """Estimates of linear contrasts with cluster-robust small-sample intervals and p-values."""

    effect: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p: np.ndarray
    clusters: int


def cluster_t(
    theta: np.ndarray,
    effect: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    confidence: float = 0.95,
) -> Estimate:
    """Intervals and two-sided p-values for means of per-cluster contributions.

    ``theta`` is ``(clusters, k)``: each cluster's own value of each of ``k`` estimates, whose
    mean over clusters is ``effect``. The interval is Student's t with ``clusters - 1`` degrees
    of freedom on the cluster values (the cluster-robust variance with the ``G / (G - 1)``
    small-sample correction). Where every cluster gives the same value ``c`` (nothing
    disagrees, so the sample variance is zero) the interval is exact instead: the probability
    ``q`` that a cluster would differ is at most ``1 - (alpha/2)^(1/G)`` (Clopper-Pearson for
    0 of ``G``), and a mean of values bounded by ``bounds`` then lies within ``q`` times the
    distance from ``c`` to either bound; the p-value is the chance that ``G`` clusters agree on
    ``c`` when the mean is zero. Fewer than 2 clusters: no interval (NaN).
    """
    theta = np.asarray(theta, dtype=float)
    effect = np.asarray(effect, dtype=float)
    lo_b, hi_b = (np.asarray(b, dtype=float) for b in bounds)
    g = theta.shape[0]
    nan = np.full(effect.shape, math.nan)
    if g < 2:
        return Estimate(effect, nan.copy(), nan.copy(), nan.copy(), g)
    from scipy import special  # scipy.special, not scipy.stats: a fraction of the import time

    alpha = 1 - confidence
    sd = theta.std(axis=0, ddof=1)
    scale = np.maximum(np.abs(hi_b - lo_b), 1e-12)
    zero = sd <= 1e-9 * scale
    se = sd / math.sqrt(g)
    tq = float(special.stdtrit(g - 1, 1 - alpha / 2))
    low, high = effect - tq * se, effect + tq * se
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * special.stdtr(g - 1, -np.abs(effect) / np.where(zero, 1.0, se))
    q0 = 1 - (alpha / 2) ** (1 / g)
    low = np.where(zero, effect - q0 * np.maximum(effect - lo_b, 0.0), low)
    high = np.where(zero, effect + q0 * np.maximum(hi_b - effect, 0.0), high)
    for j in np.flatnonzero(zero):
        c = effect[j]
        if abs(c) <= 1e-9 * scale[j]:
            p[j] = 1.0
        else:
            gap = (c - lo_b[j]) if c > 0 else (hi_b[j] - c)
            q_min = abs(c) / gap if gap > 0 else 1.0  # the mean is 0 only if this share differs
            p[j] = min(1.0, 2 * (1 - min(q_min, 1.0)) ** g)
    low, high = np.minimum(np.maximum(low, lo_b), effect), np.maximum(np.minimum(high, hi_b), effect)
    return Estimate(effect, low, high, p, g)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (:func:`harness_gym.analysis.stats.holm`: family-wise
    error control under any dependence) over the finite entries; NaN entries stay NaN."""
    from harness_gym.analysis import stats

    p = [float(v) for v in p_values]
    finite = [i for i, v in enumerate(p) if v == v]
    out = [math.nan] * len(p)
    for i, v in zip(finite, stats.holm([p[i] for i in finite]) if finite else []):
        out[i] = float(v)
    return out


#: Values within this share of the outcome's range of each other are equal: every test below
#: gives p = 1 (no claim) to numbers that differ by floating-point rounding only. Absolute,
#: not relative to the values tested, which may themselves be rounding noise (about 1e-16).
NO_VARIATION = 1e-9


def no_variation(values: np.ndarray, scale: float = 1.0) -> bool:
    """True when ``values`` span no more than :data:`NO_VARIATION` times ``scale`` (the range
    of the outcome), i.e. they differ by rounding only."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return bool(v.size == 0 or float(v.max() - v.min()) <= NO_VARIATION * max(abs(scale), 1e-300))


def _one_way(theta: np.ndarray, groups: np.ndarray, scale: float = 1.0) -> float:
    """One-way ANOVA p-value that a column's cluster mean is the same in every group (task);
    1 when the cluster values differ by rounding only (``scale``: the outcome's range)."""
    from scipy import special

    if no_variation(theta, scale):
        return 1.0
    labels = np.unique(groups)
    g, t = len(theta), len(labels)
    if t < 2 or g <= t:
        return math.nan
    mean = theta.mean()
    between = sum((groups == lab).sum() * (theta[groups == lab].mean() - mean) ** 2 for lab in labels)
    within = sum(((theta[groups == lab] - theta[groups == lab].mean()) ** 2).sum() for lab in labels)
    scale = max(abs(theta).max(), 1e-12)
    if between <= 1e-18 * scale**2 * g:
        return 1.0
    if within <= 1e-18 * scale**2 * g:
        return 0.0
    f = (between / (t - 1)) / (within / (g - t))
    return float(special.fdtrc(t - 1, g - t, f))


# -- the estimators ----------------------------------------------------------------------------

#: Significance level of the tests (after Holm's correction) and of the lack-of-fit check.
ALPHA = 0.05
#: The lack-of-fit check flags a model at this p-value: generous, because a missed interaction
#: biases intervals while a false flag only withholds some of them.
LACK_OF_FIT_ALPHA = 0.2
#: An omitted interaction whose columns carry at least this share of the misfit is named.
SHARE = 0.1
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


def mean_zero_test(z: np.ndarray, scale: float = 1.0) -> float:
    """p-value that ``k`` cluster-level quantities (``z``: clusters x k) all have mean zero:
    ``T = G |mean z|^2`` referred to a scaled F with Satterthwaite's degrees of freedom (for
    ``k = 1`` exactly the squared t test). Every cluster equal: 1 if that value is zero, else
    the chance that ``G`` clusters agree in sign under a symmetric null."""
    from scipy import special

    z = np.asarray(z, dtype=float)
    g = z.shape[0]
    if g < 2 or z.size == 0:
        return math.nan
    if float(np.abs(z).max()) <= NO_VARIATION * max(abs(scale), 1e-300):
        return 1.0  # every cluster's value is zero up to rounding: no claim
    k = z.shape[1]
    zbar = z.mean(axis=0)
    stat = g * float(zbar @ zbar)
    lam = np.clip(np.linalg.eigvalsh(np.cov(z, rowvar=False).reshape(k, k)), 0.0, None)
    total = float(lam.sum())
    if total <= 1e-14:
        return 1.0 if stat <= 1e-12 else 0.5 ** (g - 1)
    c = float((lam**2).sum()) / total
    nu = total**2 / float((lam**2).sum())
    return float(special.fdtrc(nu, g - 1, stat / (c * nu)))


def _lack_of_fit(model: Model, filled: np.ndarray, scale: float = 1.0) -> dict[str, Any]:
    """Does the model of harness means fit this agent? A test that the part of the harness
    means no model term explains is zero (``E[r] = 0`` for ``r`` the residual coordinates of
    each cluster's harness vector): ``T = G |mean r|^2``, referred to a scaled F with
    Satterthwaite's degrees of freedom (``t^2`` exactly for one residual degree of freedom).
    When it fails, the omitted interactions that could explain it (their columns carry at
    least :data:`SHARE` of the misfit) are listed."""
    x = model.matrix
    g, h = filled.shape
    u, sv, _ = np.linalg.svd(x, full_matrices=True)
    rank = int((sv > 1e-9 * max(sv.max(), 1.0)).sum()) if sv.size else 0
    basis = u[:, rank:]  # orthonormal residual space
    k = basis.shape[1]
    out: dict[str, Any] = {"p": math.nan, "df": k, "fits": None, "interactions": []}
    if k == 0 or g < 2:
        return out
    z = filled @ basis  # (G, k)
    zbar = z.mean(axis=0)
    p = mean_zero_test(z, scale)
    out["p"] = p
    out["fits"] = bool(p > LACK_OF_FIT_ALPHA)
    if not out["fits"]:
        misfit = float(zbar @ zbar)
        shares = {}
        for pair in model.omitted:
            zc = _pair_block(model, pair)
            proj = basis.T @ zc  # the pair's columns within the residual space
            if not proj.size or np.linalg.norm(proj) < 1e-9:
                continue
            q = _orthonormal(proj)  # an unpivoted QR drops a pair whose first column projects to 0
            shares[pair] = float(((q.T @ zbar) ** 2).sum()) / max(misfit, 1e-18)
        out["interactions"] = [
            p for p, share in sorted(shares.items(), key=lambda kv: -kv[1]) if share >= SHARE
        ]
    return out


def _pair_block(model: Model, pair: tuple[str, str]) -> np.ndarray:
    i, j = model.factors.index(pair[0]), model.factors.index(pair[1])
    a = effect_coding(len(model.levels[pair[0]]))[model.codes[:, i]]
    b = effect_coding(len(model.levels[pair[1]]))[model.codes[:, j]]
    return (a[:, :, None] * b[:, None, :]).reshape(len(model.codes), -1)


def _orthonormal(m: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the column span of ``m`` (SVD: rank-revealing whatever the
    column order)."""
    u, sv, _ = np.linalg.svd(m, full_matrices=False)
    return u[:, sv > 1e-9 * max(float(sv.max()) if sv.size else 0.0, 1.0)]


def _aliased_with(
    model: Model, interactions: Sequence[tuple[str, str]], threshold: float = 0.05
) -> dict[str, str]:
    """Main effects that move with any of ``interactions`` (a note per factor naming them)."""
    x = model.matrix
    h = len(x)
    pinv = np.linalg.pinv(x)
    hits: dict[str, list[tuple[str, str]]] = {}
    for pair in interactions:
        z = _pair_block(model, pair)
        z = z / np.maximum(np.linalg.norm(z, axis=0) / math.sqrt(h), 1e-12)
        for t in model.terms:
            if len(t) != 1 or t[0] in pair:
                continue
            if np.abs(pinv[model.slices[t]] @ z).max() > threshold:
                hits.setdefault(t[0], []).append(pair)
    return {f: "aliased with " + ", ".join(f"{a} x {b}" for a, b in pairs) for f, pairs in hits.items()}


def _fit_warnings(agent: str, model: Model, fit: Mapping[str, Any], withheld: Mapping[str, str]) -> list[str]:
    if fit["fits"] is not False:
        return []
    found = ", ".join(f"{a} x {b}" for a, b in fit["interactions"]) or "no two-factor interaction"
    text = (
        f"{agent}: the main-effects model does not fit (lack of fit p = {fit['p']:.2g} on "
        f"{fit['df']} residual degree(s) of freedom); the misfit is carried by {found}"
    )
    if withheld:
        text += "; " + "; ".join(f"{f} is {note}" for f, note in withheld.items())
        text += (
            ", so those main effects are not measured and get no interval (a design with main "
            "effects clear of two-factor interactions, --subset foldover, or flips, --subset "
            "...+flips, measures them)"
        )
    else:
        text += "; no main effect moves with it, so the intervals stand"
    return [text]


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


#: The power a "no detectable effect" statement names its minimum detectable effect at.
POWER = 0.8


def minimum_detectable(low: Any, high: Any, family: int, confidence: float = 0.95) -> float:
    """The smallest |effect| a test of these intervals detects with :data:`POWER` after Holm's
    correction over ``family`` tests (its first step, alpha / family): the widest interval's
    standard error (half-width over the normal quantile of ``confidence``) times
    ``z(1 - alpha / (2 family)) + z(POWER)``. NaN without intervals."""
    from statistics import NormalDist

    lo, hi = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    width = hi - lo
    width = width[np.isfinite(width)]
    if not width.size:
        return math.nan
    z = NormalDist().inv_cdf
    se = float(width.max()) / 2 / z(0.5 + confidence / 2)
    return se * (z(1 - ALPHA / (2 * max(family, 1))) + z(POWER))


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
