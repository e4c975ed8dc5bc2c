"""Small-sample intervals and exact tests: Wilson intervals, the exact McNemar test,
Newcombe's interval for a paired difference of proportions, Student's t quantiles.

Pure Python, no dependency: it sits in the core so that every layer (multi-agent effects as
well as the analysis modules) uses the same definitions; :mod:`harness_gym.analysis.stats`
re-exports them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

Z95 = 1.959963984540054

#: Fewer pairs than this get no printed paired interval. Exact coverage of Newcombe's interval
#: over a grid of paired tables: down to 50% at 2 pairs and 88% at 4; from 5 pairs on >= 86%
#: (the worst: harness pairs that disagree on every instance), >= 94% for the known-answer
#: agents of tests/test_stats.py.
MIN_PAIRS_FOR_INTERVAL = 5

#: Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    """Student's t quantile of a two-sided 95% interval with ``df`` degrees of freedom (exact to
    3 decimals up to 30; beyond, the value at the start of each range: never too small)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    return _T975[-1] if df <= 60 else 2.000 if df <= 120 else 1.980


def wilson(successes: float, n: float, z: float = Z95) -> tuple[float, float]:
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
