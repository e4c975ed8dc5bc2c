"""The least-squares model of a sweep's harness means: effect coding, which main effects and
two-factor interactions a design can separate, and the split of the harness sum of squares.

:func:`build_model` builds the model for a design (one row of level indices per harness);
:class:`Model` records its terms and, in words, what the design cannot separate. Its own
module because this is the design's linear algebra, independent of the outcomes' inference
(:mod:`harness_gym.analysis.effects_inference`) and shared by the estimators
(:mod:`harness_gym.analysis.effects`) and the report's variance split.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np


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


def _chi2_999(k: int) -> float:
    """The 99.9% point of a chi-square with ``k`` degrees of freedom (Wilson-Hilferty)."""
    z = 3.090232306167813
    return k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3


def _pair_block(model: Model, pair: tuple[str, str]) -> np.ndarray:
    i, j = model.factors.index(pair[0]), model.factors.index(pair[1])
    a = effect_coding(len(model.levels[pair[0]]))[model.codes[:, i]]
    b = effect_coding(len(model.levels[pair[1]]))[model.codes[:, j]]
    return (a[:, :, None] * b[:, None, :]).reshape(len(model.codes), -1)


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
