"""Inference for factor effects: intervals, tests, multiplicity and power.

Every estimator in :mod:`harness_gym.analysis.effects` is linear in the harnesses' mean
outcomes, so each (task, seed) cluster has its own value of every effect. This module turns
such per-cluster values into small-sample cluster-robust intervals and p-values
(:func:`cluster_t`, :func:`mean_zero_test`, a one-way test over tasks), corrects them for
multiplicity (:func:`holm`), and says how large an effect the tests could have seen
(:func:`minimum_detectable`). Its own module because it knows nothing of designs or models:
plain statistics on cluster values, which the estimators and the lack-of-fit check share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


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


#: Significance level of the tests (after Holm's correction) and of the lack-of-fit check.
ALPHA = 0.05

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
