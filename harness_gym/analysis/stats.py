"""Small, dependency-free estimates shared by the analysis modules.

Rates get Wilson intervals; paired 0/1 comparisons get the exact McNemar test and a Newcombe
interval (:func:`paired_binary`); families of tests get Holm (family-wise error) or
Benjamini-Hochberg (false discovery rate) adjusted p values. The 0/1 methods are defined in
:mod:`harness_gym.core.intervals` (usable from every layer) and re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from harness_gym.core.intervals import (
    Z95,
    PairedBinary,
    mcnemar_exact,
    paired_binary,
    paired_binary_counts,
    t975,
    wilson,
)

__all__ = [
    "Z95",
    "PairedBinary",
    "benjamini_hochberg",
    "holm",
    "mcnemar_exact",
    "mean_ci",
    "paired_binary",
    "ratio_ci",
    "paired_binary_counts",
    "t975",
    "wilson",
]


#: From this many clusters on, :func:`mean_ci` estimates the design effect from the data;
#: below, it counts clusters as the sample size (measured: the estimate then undercovers).
MIN_CLUSTERS_FOR_DESIGN_EFFECT = 20


def mean_ci(
    values: Sequence[float], confidence: float = 0.95, clusters: Sequence[Any] | None = None
) -> tuple[float, float, float]:
    """Mean and interval of ``values``, honest for small samples.

    Values in [0, 1] (success, bounded returns): the Wilson score interval at an effective
    sample size. A [0, 1] variable's variance is at most mean * (1 - mean), so Wilson is valid
    (conservative for values strictly inside) and keeps a floor when every value is equal.
    Without ``clusters`` the size is the number of values. With ``clusters`` (a label per
    value, e.g. the (task, seed) instance that several harnesses played) it is the number of
    clusters when there are fewer than :data:`MIN_CLUSTERS_FOR_DESIGN_EFFECT` or nothing
    varies, else mean * (1 - mean) over the cluster-robust variance of the mean, between the
    number of clusters and the number of values.

    Other values: Student's t on the (cluster) means; no interval (NaN bounds) from fewer than
    two units or when every unit is equal.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    if clusters is not None and len(clusters) != x.size:
        raise ValueError(f"clusters needs one label per value: {len(clusters)} labels, {x.size} values")
    mean = float(x.mean())
    labels = (
        np.unique(np.asarray([repr(c) for c in clusters]), return_inverse=True)[1]
        if clusters is not None
        else None
    )
    if ((x >= 0.0) & (x <= 1.0)).all():
        n_eff = float(x.size)
        if labels is not None:
            n_eff = _effective_size(x, labels, mean)
        z = Z95 if confidence == 0.95 else float(NormalDist().inv_cdf(0.5 + confidence / 2))
        low, high = wilson(mean * n_eff, n_eff, z)
        return (mean, low, high)
    units = x if labels is None else np.bincount(labels, weights=x) / np.bincount(labels)
    if units.size < 2 or np.all(units == units[0]):
        return (mean, math.nan, math.nan)
    if confidence != 0.95:
        raise ValueError("intervals of values outside [0, 1] are only made at 95%")
    half = t975(units.size - 1) * float(units.std(ddof=1)) / math.sqrt(units.size)
    return (mean, mean - half, mean + half)


def _effective_size(x: np.ndarray, labels: np.ndarray, mean: float) -> float:
    sums, sizes = np.bincount(labels, weights=x), np.bincount(labels)
    g, n = sizes.size, x.size
    if g < MIN_CLUSTERS_FOR_DESIGN_EFFECT:
        return float(g)
    var_mean = float(((sums - mean * sizes) ** 2).sum()) / n**2 * g / (g - 1)
    bound = mean * (1 - mean)
    if var_mean <= 0 or bound <= 0:
        return float(g)
    return float(min(n, max(g, bound / var_mean)))


def _check_p(p_values: Sequence[float]) -> list[float]:
    ps = [float(p) for p in p_values]
    bad = [p for p in ps if not 0.0 <= p <= 1.0]
    if bad:
        raise ValueError(f"p values must lie in [0, 1], got {bad[:3]!r}")
    return ps


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p values: reject where adjusted p < alpha and the chance of any
    false rejection in the family stays <= alpha (family-wise error, any dependence)."""
    ps = _check_p(p_values)
    m = len(ps)
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda i: ps[i])):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p values (q values): rejecting where q < alpha keeps the
    expected share of false discoveries <= alpha (independent or positively dependent tests)."""
    ps = _check_p(p_values)
    m = len(ps)
    out = [1.0] * m
    running = 1.0
    for rank, i in reversed(list(enumerate(sorted(range(m), key=lambda i: ps[i])))):
        running = min(running, m * ps[i] / (rank + 1))
        out[i] = min(1.0, running)
    return out


def ratio_ci(
    numerators: Sequence[float],
    denominators: Sequence[float],
    clusters: Sequence[Any] | None = None,
    rate: bool = False,
) -> tuple[float, float, float]:
    """A ratio of sums (tokens per success, invalid actions per step) and its 95% interval.

    ``numerators[i]`` / ``denominators[i]`` belong to unit ``i`` (an episode), units grouped by
    ``clusters`` (default: each its own). The variance is the cluster-robust linearization
    (delta method): the clusters' residuals ``num - R * den`` over the denominators' sum, with
    Student's t at clusters - 1 degrees of freedom. A ``rate`` (each numerator at most its
    denominator, e.g. invalid actions of the steps) gets a Wilson interval at the effective
    size (the rate's binomial variance over the linearized one; the clusters where every unit
    gives the same rate), so it stays in [0, 1] and keeps a floor at 0 and 1.
    No estimate (NaN) from a zero denominator; no interval from fewer than two clusters.
    """
    num, den = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    if num.shape != den.shape:
        raise ValueError(f"ratio_ci needs one denominator per numerator: {num.size} and {den.size}")
    if clusters is not None and len(clusters) != num.size:
        raise ValueError(f"clusters needs one label per value: {len(clusters)} labels, {num.size} values")
    total = float(den.sum())
    if num.size == 0 or total <= 0:
        return (math.nan, math.nan, math.nan)
    ratio = float(num.sum()) / total
    if clusters is None:
        labels = np.arange(num.size)
    else:
        labels = np.unique(np.asarray([repr(c) for c in clusters]), return_inverse=True)[1]
    resid = np.bincount(labels, weights=num - ratio * den)
    g = resid.size
    if g < 2:
        return (ratio, math.nan, math.nan)
    var = float((resid**2).sum()) / total**2 * g / (g - 1)
    if rate:
        bound = ratio * (1 - ratio)
        n_eff = float(g) if var <= 0 or bound <= 0 else float(min(total, bound / var))
        low, high = wilson(ratio * n_eff, n_eff)
        return (ratio, low, high)
    if var <= 0:
        return (ratio, ratio, ratio)
    half = t975(g - 1) * math.sqrt(var)
    return (ratio, ratio - half, ratio + half)
