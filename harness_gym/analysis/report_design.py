"""The sweep report's Design section: what the sweep's design is (an array or base points with
one-factor flips), how balanced, and what its aliasing means for the effects, in words.

Its own module because it reads only the design record (``sweep.json``'s ``design``), never
the rows.
"""

from __future__ import annotations

from typing import Any


def _design_text(design: dict[str, Any] | None, n_harnesses: int) -> list[str]:
    """What the design is and how balanced, in words."""
    if not design:
        return [f"{n_harnesses} harness(es); the sweep did not record its design (an older sweep)."]
    lines = [
        f"{design.get('n', n_harnesses)} harness(es): {design['kind']} ({design.get('construction', '')})."
    ]
    base = design.get("base")
    if base:
        lines.append(
            f"Base points: {base['n']}, a {base['kind']} ({base.get('construction', '')}); "
            + _balance_text(base.get("balance"))
        )
        lines.append(
            f"{len(design.get('flips', []))} one-factor flips (mode {design.get('mode')}): each pairs a "
            "base harness with a copy that changes one factor. The effects come from these pairs, so the "
            "base points need not fit a main-effects model themselves."
        )
    elif design.get("balance"):
        lines.append(_balance_text(design["balance"]))
    aliasing = design.get("interaction_aliasing")
    if not base and aliasing is not None:
        lines.append(
            "Main effects are clear of two-factor interactions (resolution IV or more)."
            if aliasing < 1e-9
            else "Main effects are aliased with two-factor interactions (largest alias coefficient "
            f"{aliasing:.2f}): an interaction would show up as a main effect. Where an interaction lies "
            "wholly inside a main effect (complete aliasing) no test on this design can tell them "
            "apart: that effect is printed as 'main effect or interaction' and never called "
            "significant as a main effect. Where part of it shows in the residual but the main effect "
            "moves more than that part, the effect is re-estimated with the interaction in the "
            "model, or withheld where the design cannot hold both. The rest is left to each agent's "
            "lack-of-fit check (below). --subset foldover separates main effects from two-factor "
            "interactions."
        )
    return lines


def _balance_text(balance: dict[str, Any] | None) -> str:
    if not balance:
        return ""
    if balance.get("orthogonal"):
        return "balanced: every pair of levels of every two factors appears equally often."
    return (
        f"not balanced: level counts of a factor differ by up to {balance['level_imbalance']}, pair counts "
        f"deviate from the balanced value by up to {balance['pair_deviation']:.2f}, the largest "
        f"|correlation| between two factors' contrast columns is {balance['max_correlation']:.2f} and "
        f"the D-efficiency of the main-effects model {_d_efficiency_text(balance)} "
        "(0 and 100% for an orthogonal array)."
    )


def _d_efficiency_text(balance: dict[str, Any]) -> str:
    """``is X%``, or why it is not a number: fewer points than the main-effects model has
    parameters (not defined), or enough points whose model columns are aliased (0)."""
    d_eff, n, p = balance.get("d_efficiency"), balance.get("n"), balance.get("parameters")
    if d_eff is None or d_eff != d_eff:
        return (
            f"is not defined: {n} point(s) cannot fit its {p} parameters"
            if p
            else "is not defined: too few points to fit it"
        )
    if d_eff == 0:  # a sweep.json written before "parameters" was recorded says 0 for both cases
        too_few = f"{n} point(s) for {p} parameters" if p and n is not None and n < p else ""
        return (
            f"is not defined: {too_few}"
            if too_few
            else "is 0%: its columns are aliased in these points (or the points are fewer than its "
            "parameters), so it cannot be fit from them alone"
        )
    return f"is {d_eff:.1f}%"
