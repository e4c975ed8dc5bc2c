"""Small, dependency-free estimates shared by the analysis modules.

Rates get Wilson intervals; paired 0/1 comparisons get the exact McNemar test and a Newcombe
interval (:func:`paired_binary`); families of tests get Holm (family-wise error) or
Benjamini-Hochberg (false discovery rate) adjusted p values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

Z95 = 1.959963984540054


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (good at 0% and 100%)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return (low, high)


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


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value for paired successes (a sign test on discordant pairs).

    ``only_first``: pairs where the first condition succeeded and the second failed;
    ``only_second``: the reverse. Under "no difference" each discordant pair is a fair coin.
    """
    if only_first < 0 or only_second < 0:
        raise ValueError("discordant counts must be >= 0")
    n = only_first + only_second
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_first, only_second) + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class PairedBinary:
    """Paired 0/1 outcomes of two conditions on the same units, compared.

    ``difference`` is success(a) - success(b); ``low``/``high`` its Newcombe (1998, method 10)
    interval, built from the Wilson intervals of both rates and their observed correlation;
    ``p_value`` is the two-sided exact McNemar test (a sign test on the discordant pairs).
    """

    n: int
    only_a: int
    only_b: int
    difference: float
    low: float
    high: float
    p_value: float
    both: int = 0
    neither: int = 0

    @property
    def discordant(self) -> int:
        """Pairs where exactly one condition succeeded: the only ones that carry information."""
        return self.only_a + self.only_b

    def significant(self, alpha: float = 0.05) -> bool:
        """The exact test rejects "no difference" at ``alpha`` (unadjusted)."""
        return self.n > 0 and self.p_value < alpha


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    if confidence == 0.95:
        return Z95
    return float(NormalDist().inv_cdf(0.5 + confidence / 2))


def paired_binary_counts(
    both: int, only_a: int, only_b: int, neither: int, confidence: float = 0.95
) -> PairedBinary:
    """:class:`PairedBinary` from the four cells of the paired 2x2 table."""
    cells = (both, only_a, only_b, neither)
    if any(int(c) != c or c < 0 for c in cells):
        raise ValueError(f"paired counts must be non-negative integers, got {cells!r}")
    both, only_a, only_b, neither = (int(c) for c in cells)
    n = both + only_a + only_b + neither
    z = _z(confidence)
    if n == 0:
        return PairedBinary(0, 0, 0, math.nan, -1.0, 1.0, 1.0, 0, 0)
    a_wins, b_wins = both + only_a, both + only_b
    p1, p2 = a_wins / n, b_wins / n
    l1, u1 = wilson(a_wins, n, z)
    l2, u2 = wilson(b_wins, n, z)
    margins = (a_wins, n - a_wins, b_wins, n - b_wins)
    phi = 0.0
    if all(m > 0 for m in margins):
        cross = both * neither - only_a * only_b
        # Newcombe's phi, shrunk towards 0 by n/2 when positive (his method 10).
        numerator = cross - n / 2 if cross > n / 2 else (0.0 if cross >= 0 else cross)
        phi = numerator / math.sqrt(math.prod(margins))
    d = p1 - p2
    lo = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    hi = d + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return PairedBinary(
        n=n,
        only_a=only_a,
        only_b=only_b,
        difference=d,
        low=max(-1.0, lo),
        high=min(1.0, hi),
        p_value=mcnemar_exact(only_a, only_b),
        both=both,
        neither=neither,
    )


def paired_binary(a: Sequence[int], b: Sequence[int], confidence: float = 0.95) -> PairedBinary:
    """Compare paired 0/1 outcomes ``a[i]`` and ``b[i]`` (same unit ``i``): exact McNemar p
    and a Newcombe interval for success(a) - success(b). Values other than 0/1 raise."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes need equal lengths, got {len(a)} and {len(b)}")
    cells = [0, 0, 0, 0]
    for x, y in zip(a, b, strict=True):
        if x not in (0, 1) or y not in (0, 1):
            raise ValueError(f"paired outcomes must be 0 or 1, got {x!r} and {y!r}")
        cells[(1 - int(x)) * 2 + (1 - int(y))] += 1
    both, only_a, only_b, neither = cells
    return paired_binary_counts(both, only_a, only_b, neither, confidence)


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
