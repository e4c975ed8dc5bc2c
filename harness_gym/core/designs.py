"""Experimental designs over level counts: which level combinations to run, and how balanced they are.

A design is an ``(n, k)`` array of level indices, one row per point and one column per
factor. Three kinds are built here:

* **Orthogonal arrays** (:func:`orthogonal_array`): every pair of levels of every two factors
  appears equally often (strength 2), so one factor's levels meet every other factor's levels
  in the same proportions and main effects are not mixed up with each other. The construction
  is algebraic: a factor with ``s = p1^e1 * p2^e2 * ...`` levels is one subspace of dimension
  ``e`` per prime ``p`` of the runs ``GF(p)^m``; two factors are balanced against each other
  when their subspaces meet only in zero. For one prime this is the Rao-Hamming (Bose)
  construction, for prime-power levels it is the same over subfields (the expansive
  replacement of a ``p^e``-level factor by ``e`` pseudo-factors), and different primes
  combine as a product. A searched assignment of subspaces in the smallest ``m`` gives the
  run count; the full factorial is used when it is no larger.
* **Near-orthogonal designs** (:func:`near_orthogonal`): ``n`` level-balanced runs (each level
  of a factor as often as ``n`` allows) whose pair counts are made as even as a seeded swap
  search can; used when an orthogonal array would be larger than the points allowed.
* **Fold-overs** (:func:`foldover`, :func:`clear_design`): an array plus its mirror image
  (level ``l`` of an ``s``-level factor replaced by ``s - 1 - l``). The fold-over of a
  two-level resolution-III array is resolution IV: main effects are clear of two-factor
  interactions. For factors with three or more levels the mirror leaves some interaction
  contrasts aliased; :func:`clear_design` then uses a strength-3 orthogonal array, which is
  clear for any level counts. :func:`interaction_aliasing` measures how clear a design is.
* **One-factor flips** (:func:`flips`): base rows plus, for each base row and factor, the rows
  that change only that factor; a pair's difference measures that factor with every other
  factor held fixed.

:func:`balance` measures a design: level imbalance, the largest deviation of a pair count
from its balanced value, the largest correlation between main-effect contrast columns of
different factors, and the D-efficiency of the main-effects model (100 for an orthogonal
array). Covering arrays live in :mod:`harness_gym.core.space` (``HarnessSpace.covering``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: How flips pick the changed levels: every other level (the default), or the next level (cyclically).
FLIP_MODES = ("all", "next")


@dataclass(frozen=True)
class Balance:
    """How balanced a design is (all zero / 100 for an orthogonal array)."""

    n: int
    level_imbalance: int  # max over factors of (most frequent level count - least frequent)
    pair_deviation: float  # max |count of a level pair - its balanced value n / (s_i s_j)|
    max_correlation: float  # max |corr| between main-effect contrast columns of two factors
    #: Of the main-effects model, orthonormal coding, in percent; NaN (not defined) when the
    #: design has fewer points than the model has parameters; 0 when the points are enough but
    #: the model's columns are aliased (its information matrix is singular).
    d_efficiency: float
    orthogonal: bool  # every pair of levels of every two factors appears equally often
    parameters: int = 0  # of the main-effects model: 1 + sum(levels - 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "level_imbalance": self.level_imbalance,
            "pair_deviation": round(self.pair_deviation, 4),
            "max_correlation": round(self.max_correlation, 4),
            "d_efficiency": round(self.d_efficiency, 2) if self.d_efficiency == self.d_efficiency else None,
            "orthogonal": self.orthogonal,
            "parameters": self.parameters,
        }

    def describe(self) -> str:
        if self.orthogonal:
            return "orthogonal: every pair of levels of every two factors appears equally often"
        return (
            f"not orthogonal: level counts differ by up to {self.level_imbalance}, pair counts deviate "
            f"from balance by up to {self.pair_deviation:.2f}, max |correlation| between factors' "
            f"contrast columns {self.max_correlation:.2f}, " + self.describe_d_efficiency()
        )

    def describe_d_efficiency(self) -> str:
        """The D-efficiency in words, saying why where it is not defined or zero."""
        if self.d_efficiency != self.d_efficiency:
            return (
                f"D-efficiency not defined ({self.n} points cannot fit the {self.parameters} parameters "
                "of the main-effects model)"
            )
        if self.d_efficiency == 0:
            return "D-efficiency 0% (the main-effects model's columns are aliased: it cannot be fit)"
        return f"D-efficiency {self.d_efficiency:.1f}%"


@dataclass(frozen=True)
class Design:
    """Rows of level indices and what they are (``kind``, ``construction``)."""

    kind: str  # orthogonal array | full factorial | near-orthogonal | covering array | sample | ...
    counts: tuple[int, ...]
    rows: np.ndarray
    construction: str = ""
    #: For flips: (base row, flipped row, factor column) triples.
    flips: tuple[tuple[int, int, int], ...] = field(default=())

    def __len__(self) -> int:
        return len(self.rows)

    def balance(self) -> Balance:
        return balance(self.rows, self.counts)


# -- orthogonal arrays -----------------------------------------------------------------------


def full_factorial(counts: Sequence[int]) -> np.ndarray:
    """Every combination of levels (rows in lexicographic order)."""
    return np.array(list(itertools.product(*(range(s) for s in counts))), dtype=np.int64).reshape(
        -1, len(counts)
    )


def orthogonal_array(counts: Sequence[int], strength: int = 2, seed: int = 0, tries: int = 200) -> Design:
    """The smallest strength-``strength`` orthogonal array this module can construct.

    Every ``strength``-tuple of levels of every ``strength`` factors appears equally often.
    The result is deterministic for a given ``seed``.
    """
    counts = tuple(int(s) for s in counts)
    if any(s < 1 for s in counts):
        raise ValueError(f"level counts must be positive, got {counts}")
    k = len(counts)
    if k <= strength:
        return Design("full factorial", counts, full_factorial(counts), "every combination")
    rng = np.random.default_rng(seed)
    factored = [_factorize(s) for s in counts]
    primes = sorted({p for f in factored for p in f})
    per_prime: dict[int, tuple[int, list[np.ndarray | None]]] = {}
    for p in primes:
        dims = [f.get(p, 0) for f in factored]
        per_prime[p] = _subspaces(p, dims, strength, rng, tries)
    size = math.prod(p ** per_prime[p][0] for p in primes)
    if size >= math.prod(counts):
        return Design("full factorial", counts, full_factorial(counts), "every combination")
    rows = _assemble(counts, factored, primes, per_prime)
    parts = " x ".join(f"GF({p})^{per_prime[p][0]}" for p in primes)
    return Design("orthogonal array", counts, rows, f"subspaces of {parts} ({size} runs)")


def _factorize(n: int) -> dict[int, int]:
    out: dict[int, int] = {}
    p = 2
    while n > 1:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
        p += 1
    return out


def _rank_mod_p(matrix: np.ndarray, p: int) -> int:
    a = matrix.copy() % p
    rank, cols = 0, a.shape[1]
    for c in range(cols):
        pivot = next((r for r in range(rank, a.shape[0]) if a[r, c]), None)
        if pivot is None:
            continue
        a[[rank, pivot]] = a[[pivot, rank]]
        a[rank] = (a[rank] * pow(int(a[rank, c]), -1, p)) % p
        for r in range(a.shape[0]):
            if r != rank and a[r, c]:
                a[r] = (a[r] - a[r, c] * a[rank]) % p
        rank += 1
        if rank == a.shape[0]:
            break
    return rank


def _subspaces(
    p: int, dims: Sequence[int], t: int, rng: np.random.Generator, tries: int
) -> tuple[int, list[np.ndarray | None]]:
    """Smallest ``m`` and one ``dim x m`` basis per factor (None where dim is 0) such that any
    ``t`` of the bases stacked have full rank; searched with random restarts."""
    active = [i for i, d in enumerate(dims) if d > 0]
    need = sorted((dims[i] for i in active), reverse=True)
    m = max(sum(need[:t]), 1)
    if t == 2:  # the nonzero vectors of the subspaces are disjoint
        while p**m - 1 < sum(p ** dims[i] - 1 for i in active):
            m += 1
    full = sum(dims[i] for i in active)
    order = sorted(active, key=lambda i: -dims[i])
    while m < full:
        for _ in range(tries):
            bases = _try_assign(p, m, dims, order, t, rng)
            if bases is not None:
                return m, bases
        m += 1
    # Coordinate subspaces: the full factorial for this prime, always valid.
    bases_full: list[np.ndarray | None] = [None] * len(dims)
    start = 0
    for i in active:
        basis = np.zeros((dims[i], full), dtype=np.int64)
        basis[np.arange(dims[i]), start + np.arange(dims[i])] = 1
        bases_full[i] = basis
        start += dims[i]
    return full, bases_full


def _try_assign(
    p: int, m: int, dims: Sequence[int], order: Sequence[int], t: int, rng: np.random.Generator
) -> list[np.ndarray | None] | None:
    bases: list[np.ndarray | None] = [None] * len(dims)
    chosen: list[int] = []
    used: set[tuple[int, ...]] = set()  # nonzero vectors already spanned (t == 2)
    for i in order:
        for _ in range(60):
            basis = rng.integers(0, p, size=(dims[i], m))
            if _rank_mod_p(basis, p) < dims[i]:
                continue
            if t == 2:
                span = _span(basis, p)
                if span & used:
                    continue
            elif any(
                _rank_mod_p(np.vstack([basis, *(bases[j] for j in group)]), p)  # type: ignore[misc]
                < dims[i] + sum(dims[j] for j in group)
                for group in itertools.combinations(chosen, min(t - 1, len(chosen)))
            ):
                continue
            bases[i] = basis
            chosen.append(i)
            if t == 2:
                used |= span
            break
        else:
            return None
    return bases


def _span(basis: np.ndarray, p: int) -> set[tuple[int, ...]]:
    coefs = full_factorial([p] * basis.shape[0])[1:]
    return {tuple(v) for v in (coefs @ basis) % p}


def _assemble(
    counts: Sequence[int],
    factored: Sequence[dict[int, int]],
    primes: Sequence[int],
    per_prime: dict[int, tuple[int, list[np.ndarray | None]]],
) -> np.ndarray:
    """Runs of the product over primes; a factor's level is the mixed-radix number of its
    digits (prime by prime, each digit vector read base p)."""
    blocks = []
    for p in primes:
        m, bases = per_prime[p]
        x = full_factorial([p] * m)  # (p^m, m)
        digits = []
        for i in range(len(counts)):
            e = factored[i].get(p, 0)
            if e == 0:
                digits.append(np.zeros(len(x), dtype=np.int64))
            else:
                values = (x @ bases[i].T) % p  # type: ignore[union-attr]
                digits.append(values @ (p ** np.arange(e)))
        blocks.append(np.stack(digits, axis=1))
    rows = blocks[0]
    radix = np.array([primes[0] ** f.get(primes[0], 0) for f in factored], dtype=np.int64)
    for p, block in zip(primes[1:], blocks[1:]):
        a = np.repeat(rows, len(block), axis=0)
        b = np.tile(block, (len(rows), 1))
        rows = a + radix * b
        radix = radix * np.array([p ** f.get(p, 0) for f in factored], dtype=np.int64)
    assert (radix == np.asarray(counts)).all()
    return rows


# -- near-orthogonal designs -----------------------------------------------------------------


def near_orthogonal(counts: Sequence[int], n: int, seed: int = 0, sweeps: int = 30) -> Design:
    """``n`` level-balanced rows whose pair counts a seeded swap search makes as even as it can.

    Each column holds every level ``n // s`` or ``n // s + 1`` times. The search swaps two
    entries of a column (which keeps level balance) when that lowers the sum over factor
    pairs of squared deviations of pair counts from ``n / (s_i s_j)``, plus a penalty for
    repeated rows.
    """
    counts = tuple(int(s) for s in counts)
    if n < 1:
        raise ValueError(f"a design needs at least one point, got n={n}")
    rng = np.random.default_rng(seed)
    k = len(counts)
    cols = []
    for s in counts:
        base = np.tile(np.arange(s), n // s + 1)[: n - n % s] if n >= s else np.empty(0, np.int64)
        extra = rng.permutation(s)[: n - len(base)]
        cols.append(rng.permutation(np.concatenate([base, extra]).astype(np.int64)))
    rows = np.stack(cols, axis=1) if k else np.zeros((n, 0), np.int64)
    if k >= 2:
        rows = _swap_search(rows, counts, rng, sweeps)
    return Design("near-orthogonal", counts, rows, f"level-balanced swap search, {n} runs, seed {seed}")


def _objective(rows: np.ndarray, counts: Sequence[int]) -> float:
    """Sum over factor pairs of squared deviations of pair counts from n / (s_i s_j)."""
    n = len(rows)
    total = 0.0
    for i, j in itertools.combinations(range(len(counts)), 2):
        table = np.zeros((counts[i], counts[j]))
        np.add.at(table, (rows[:, i], rows[:, j]), 1)
        total += float(((table - n / (counts[i] * counts[j])) ** 2).sum())
    return total


def _swap_search(
    rows: np.ndarray, counts: Sequence[int], rng: np.random.Generator, sweeps: int
) -> np.ndarray:
    """First-improvement swaps within columns, scored incrementally on the pair tables."""
    n, k = rows.shape
    dev = {
        (i, j): np.zeros((counts[i], counts[j])) - n / (counts[i] * counts[j])
        for i in range(k)
        for j in range(k)
        if i != j
    }
    for (i, j), table in dev.items():
        np.add.at(table, (rows[:, i], rows[:, j]), 1)

    def delta(c: int, a: int, b: int) -> float:
        u, v = rows[a, c], rows[b, c]
        total = 0.0
        for j in range(k):
            if j == c or rows[a, j] == rows[b, j]:
                continue
            t = dev[(c, j)]
            x, y = rows[a, j], rows[b, j]
            # u loses x and gains y; v loses y and gains x
            total += (t[u, x] - 1) ** 2 - t[u, x] ** 2 + (t[u, y] + 1) ** 2 - t[u, y] ** 2
            total += (t[v, y] - 1) ** 2 - t[v, y] ** 2 + (t[v, x] + 1) ** 2 - t[v, x] ** 2
        return 2 * total  # each unordered pair of factors is counted in both orientations

    def swap(c: int, a: int, b: int) -> None:
        u, v = rows[a, c], rows[b, c]
        for j in range(k):
            if j == c:
                continue
            x, y = rows[a, j], rows[b, j]
            for p, q, change in ((u, x, -1), (v, y, -1), (v, x, 1), (u, y, 1)):
                dev[(c, j)][p, q] += change
                dev[(j, c)][q, p] += change
        rows[a, c], rows[b, c] = v, u

    for _ in range(sweeps):
        improved = False
        for c in rng.permutation(k):
            for a in range(n):
                for b in rng.permutation(n)[: min(n, 32)]:
                    if rows[a, c] != rows[b, c] and delta(c, a, b) < -1e-9:
                        swap(c, a, b)
                        improved = True
        if not improved:
            break
    return _spread_duplicates(rows, rng)


def _spread_duplicates(rows: np.ndarray, rng: np.random.Generator, attempts: int = 2000) -> np.ndarray:
    """Swap entries of repeated rows with other rows until no row repeats (if it can)."""
    n, k = rows.shape
    for _ in range(attempts):
        _, inverse, dup = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
        repeated = np.flatnonzero(dup[inverse.ravel()] > 1)
        if not len(repeated) or k == 0:
            break
        a, b, c = int(rng.choice(repeated)), int(rng.integers(n)), int(rng.integers(k))
        rows[[a, b], c] = rows[[b, a], c]
    return rows


# -- fold-overs ------------------------------------------------------------------------------


def foldover(design: Design) -> Design:
    """``design`` plus its mirror (level ``l`` of an ``s``-level factor becomes ``s - 1 - l``);
    rows already in the design are not repeated."""
    counts = np.asarray(design.counts, dtype=np.int64)
    rows = np.vstack([design.rows, counts - 1 - design.rows]) if len(design.rows) else design.rows
    _, first = np.unique(rows, axis=0, return_index=True)
    rows = rows[np.sort(first)]
    return Design(
        "fold-over",
        design.counts,
        rows,
        f"{design.kind} ({len(design)} runs) and its mirror image, {len(rows)} runs",
    )


def interaction_aliasing(rows: np.ndarray, counts: Sequence[int]) -> float:
    """The largest coefficient by which a main-effect estimate (main-effects model, contrasts
    of :func:`contrasts`) moves per unit of a two-factor interaction contrast of two other
    factors: 0 when main effects are clear of two-factor interactions; ``inf`` when the main
    effects themselves are not estimable."""
    rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(counts))
    n = len(rows)
    blocks = [contrasts(s)[rows[:, c]] for c, s in enumerate(counts)]
    x = np.hstack([np.ones((n, 1)), *blocks])
    if np.linalg.matrix_rank(x) < x.shape[1]:
        return math.inf
    pinv = np.linalg.pinv(x)
    starts = np.cumsum([1] + [b.shape[1] for b in blocks])
    worst = 0.0
    for i, j in itertools.combinations(range(len(counts)), 2):
        z = (blocks[i][:, :, None] * blocks[j][:, None, :]).reshape(n, -1)
        if not z.shape[1]:
            continue
        alias = pinv @ z
        for c in range(len(counts)):
            if c in (i, j) or not blocks[c].shape[1]:
                continue
            worst = max(worst, float(np.abs(alias[starts[c] : starts[c + 1]]).max()))
    return worst


def clear_design(counts: Sequence[int], seed: int = 0) -> Design:
    """A design whose main effects are clear of two-factor interactions (resolution IV): the
    fold-over of the strength-2 orthogonal array when that is clear (always for two-level
    factors), else the smaller clear one of that and a strength-3 orthogonal array."""
    counts = tuple(int(s) for s in counts)
    folded = foldover(orthogonal_array(counts, 2, seed))
    if interaction_aliasing(folded.rows, counts) < 1e-9:
        return folded
    strong = orthogonal_array(counts, min(3, len(counts)), seed)
    return Design(
        strong.kind if strong.kind == "full factorial" else "strength-3 orthogonal array",
        counts,
        strong.rows,
        strong.construction
        + "; the fold-over of the strength-2 array is not clear of two-factor interactions for "
        "factors with 3 or more levels",
    )


# -- flips -------------------------------------------------------------------------------------


def flips(base: np.ndarray, counts: Sequence[int], mode: str = "all") -> Design:
    """Base rows plus, per base row and factor, rows that change only that factor.

    ``mode="next"`` changes a factor to its next level (cyclically: level ``a`` to
    ``(a + 1) % s``): one extra row per base row and factor, and over a level-balanced base
    every pair of neighbouring levels is measured, which links all levels of a factor.
    ``mode="all"`` changes it to every other level: ``s - 1`` extra rows, every level compared
    with every base row. Flipped rows that coincide with a row already in the design reuse it.
    """
    if mode not in FLIP_MODES:
        raise ValueError(f"unknown flip mode {mode!r}; modes: {list(FLIP_MODES)}")
    counts = tuple(int(s) for s in counts)
    base = np.asarray(base, dtype=np.int64)
    out: list[tuple[int, ...]] = []
    index: dict[tuple[int, ...], int] = {}

    def add(row: tuple[int, ...]) -> int:
        if row not in index:
            index[row] = len(out)
            out.append(row)
        return index[row]

    base_ids = [add(tuple(int(v) for v in r)) for r in base]
    pairs: list[tuple[int, int, int]] = []
    for b, row in zip(base_ids, base):
        for c, s in enumerate(counts):
            if s < 2:
                continue
            targets = [(row[c] + 1) % s] if mode == "next" else [lv for lv in range(s) if lv != row[c]]
            for lv in targets:
                changed = row.copy()
                changed[c] = lv
                pairs.append((b, add(tuple(int(v) for v in changed)), c))
    rows = np.array(out, dtype=np.int64).reshape(-1, len(counts))
    return Design(
        "flips",
        counts,
        rows,
        f"{len(set(base_ids))} base points, each factor flipped to "
        + ("the next level" if mode == "next" else "every other level"),
        tuple(pairs),
    )


# -- balance -----------------------------------------------------------------------------------


def contrasts(s: int) -> np.ndarray:
    """Orthonormal contrasts for ``s`` levels, scaled so each column's mean square over the
    levels is 1 (a balanced column then has unit variance): an ``s x (s - 1)`` matrix."""
    if s < 2:
        return np.zeros((s, 0))
    helmert = np.zeros((s, s - 1))
    for j in range(1, s):
        helmert[:j, j - 1] = 1.0
        helmert[j, j - 1] = -float(j)
    helmert /= np.linalg.norm(helmert, axis=0)
    return helmert * math.sqrt(s)


def balance(rows: np.ndarray, counts: Sequence[int]) -> Balance:
    """The balance measures of a design (see :class:`Balance`)."""
    rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(counts))
    n, k = rows.shape
    imbalance = 0
    for c, s in enumerate(counts):
        freq = np.bincount(rows[:, c], minlength=s)
        imbalance = max(imbalance, int(freq.max() - freq.min()))
    deviation = 0.0
    for i, j in itertools.combinations(range(k), 2):
        table = np.zeros((counts[i], counts[j]))
        np.add.at(table, (rows[:, i], rows[:, j]), 1)
        deviation = max(deviation, float(np.abs(table - n / (counts[i] * counts[j])).max()))
    blocks = [contrasts(s)[rows[:, c]] for c, s in enumerate(counts)]
    corr = 0.0
    for i, j in itertools.combinations(range(k), 2):
        if blocks[i].shape[1] and blocks[j].shape[1] and n > 1:
            a = blocks[i] - blocks[i].mean(axis=0)
            b = blocks[j] - blocks[j].mean(axis=0)
            na, nb = np.linalg.norm(a, axis=0), np.linalg.norm(b, axis=0)
            ok_a, ok_b = na > 1e-12, nb > 1e-12
            if ok_a.any() and ok_b.any():
                c = (a[:, ok_a] / na[ok_a]).T @ (b[:, ok_b] / nb[ok_b])
                corr = max(corr, float(np.abs(c).max()))
    x = np.hstack([np.ones((n, 1)), *blocks])
    p = x.shape[1]
    if n < p:  # fewer points than parameters: the model cannot be fit, its efficiency is undefined
        d_eff = math.nan
    else:
        sign, logdet = np.linalg.slogdet(x.T @ x / n)
        d_eff = 100.0 * math.exp(logdet / p) if sign > 0 else 0.0
    return Balance(n, imbalance, deviation, corr, d_eff, imbalance == 0 and deviation < 1e-9, p)
