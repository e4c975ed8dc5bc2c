"""Small, dependency-free estimates shared by the analysis modules.

Rates get Wilson intervals; paired 0/1 comparisons get the exact McNemar test and a Newcombe
interval (:func:`paired_binary`); families of tests get Holm (family-wise error) or
Benjamini-Hochberg (false discovery rate) adjusted p values. The 0/1 methods are defined in
:mod:`harness_gym.core.binomial` (usable from every layer) and re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from harness_gym.core.binomial import (
    Z95,
    PairedBinary,
    mcnemar_exact,
    paired_binary,
    paired_binary_counts,
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
    "paired_binary_counts",
    "wilson",
]


def mean_ci(values: Sequence[float], confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """Mean and interval: Wilson for 0/1 values, a seeded percentile bootstrap otherwise."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    mean = float(x.mean())
    if np.isin(x, (0.0, 1.0)).all() and confidence == 0.95:
        low, high = wilson(float(x.sum()), int(x.size))
        return (mean, low, high)
    if x.size == 1 or np.all(x == x[0]):
        return (mean, mean, mean)
    rng = np.random.default_rng(seed)
    boot = x[rng.integers(0, x.size, size=(2000, x.size))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return (mean, float(np.quantile(boot, alpha)), float(np.quantile(boot, 1 - alpha)))


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
