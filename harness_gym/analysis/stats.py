"""Small, dependency-free interval estimates used across the analysis modules."""

from __future__ import annotations

import math
from collections.abc import Sequence

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
