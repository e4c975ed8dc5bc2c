"""Which main effects two-factor interactions can bias, and what the estimators do about it.

Two checks of a main-effects :class:`~harness_gym.analysis.effects_model.Model`. From the
design: :func:`alias_profile` finds the interactions each main effect moves with (completely
aliased: no test can see them; partially: the lack-of-fit test sees too little of them), and
the least-squares estimator labels, re-estimates or withholds those effects. From the data:
the lack-of-fit test asks whether the main-effects model fits and names the omitted
interactions that carry the misfit, whose aliased main effects are withheld. Its own module
because only the least-squares estimator in :mod:`harness_gym.analysis.effects` consults it
(paired flips need none of it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness_gym.analysis.effects_inference import mean_zero_test
from harness_gym.analysis.effects_model import Model, _pair_block, effect_coding

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


#: The lack-of-fit check flags a model at this p-value: generous, because a missed interaction
#: biases intervals while a false flag only withholds some of them.
LACK_OF_FIT_ALPHA = 0.2

#: An omitted interaction whose columns carry at least this share of the misfit is named.
SHARE = 0.1


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
