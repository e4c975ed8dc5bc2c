"""The honest part of a search: the test-seed tables.

:func:`finish` plays the chosen harness, the default, the default's best one-factor changes
(picked on dev) and every incumbent the search accepted on the test seeds, and builds the
``final``, ``improvements``, ``trajectory`` and ``candidates`` tables. Every paired test
those tables report is Holm-adjusted as one family.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness_gym.analysis.search.racing import SearchState
from harness_gym.analysis.search.spec import SearchSpec
from harness_gym.analysis.search.stats import ALPHA, Score, ceiling_flags, paired_difference, score
from harness_gym.analysis.stats import holm
from harness_gym.core.harness import Harness


def finish(state: SearchState, chosen: Harness) -> dict[str, Any]:
    """Evaluate the chosen, default, best one-factor changes and every accepted incumbent on the
    test seeds; build the tables (pandas DataFrames)."""
    import pandas as pd

    spec, ev = state.spec, state.ev
    changes = _best_changes(state)
    shown = list(dict.fromkeys([chosen, spec.default, *changes]))
    traj_ids = [t["incumbent_id"] for t in state.trajectory]
    replay = [
        state.harness[i] for i in dict.fromkeys([*traj_ids, *[x["from_id"] for x in state.improvements]])
    ]
    to_test = list(dict.fromkeys([*shown, *replay]))
    state.note(f"test: {len(to_test)} harness(es) on {len(spec.test_seeds)} test seed(s)")
    state.evaluate(to_test, spec.test_seeds)
    test = {h.id: state.rows(h, spec.test_seeds) for h in to_test}
    flags = ceiling_flags(test)
    base = test[spec.default.id]

    final = []
    for h in shown:
        role = "chosen" if h == chosen else "default" if h == spec.default else "one-factor change"
        if h == chosen and h == spec.default:
            role = "chosen (= default)"
        s = score(list(test[h.id].values()))
        d = paired_difference(test[h.id], base)
        low, gap = flags[h.id]
        final.append(
            {
                "role": role,
                "harness": state.names[h.id],
                "harness_id": h.id,
                "change": _change(spec, h),
                **_score_columns(s),
                "vs_default": d.mean,
                "vs_default_low": d.low,
                "vs_default_high": d.high,
                "vs_default_wins": d.wins,
                "vs_default_losses": d.losses,
                "vs_default_p": d.p_value,
                "ceiling_limited": low,
                "ceiling_gap": gap,
            }
        )
    improvements = []
    for imp in state.improvements:
        new, old = test[imp["to_id"]], test[imp["from_id"]]
        d = paired_difference(new, old)
        s_new, s_old = score(list(new.values())), score(list(old.values()))
        improvements.append(
            {
                **{k: v for k, v in imp.items() if not k.endswith("_id")},
                "test_success_from": s_old.success,
                "test_success_to": s_new.success,
                "test_difference": d.mean,
                "test_low": d.low,
                "test_high": d.high,
                "test_wins": d.wins,
                "test_losses": d.losses,
                "test_p": d.p_value,
                "accepted_on_test": s_new.key() > s_old.key(),
            }
        )
    _holm_family(final, improvements, [h.id for h in shown], spec.default.id)
    trajectory = []
    for t in state.trajectory:
        s = score(list(test[t["incumbent_id"]].values()))
        trajectory.append({**t, "test_success": s.success, "test_steps": s.steps})
    dev_rows = {
        h: {(t, s): r for (t, hid, s), r in ev.rows.items() if hid == h and s in ev.dev} for h in state.names
    }
    dev_flags = ceiling_flags(dev_rows)
    candidates = []
    for hid, name in state.names.items():
        depth = state.depth.get(hid, 0)
        if not depth:
            continue
        h = state.harness[hid]
        s = state.score(h, spec.dev_seeds[:depth])
        candidates.append(
            {
                "harness": name,
                "harness_id": hid,
                "stage": state.stage[hid],
                "dev_seeds": depth,
                **_score_columns(s),
                "ceiling_limited": dev_flags[hid][0],
                "chosen": h == chosen,
                **spec.space.levels_of(h),
            }
        )
    return {
        "final": pd.DataFrame.from_records(final),
        "improvements": pd.DataFrame.from_records(improvements, columns=_IMPROVEMENT_COLUMNS),
        "trajectory": pd.DataFrame.from_records(trajectory),
        "candidates": pd.DataFrame.from_records(candidates).sort_values(
            ["dev_seeds", "success", "steps"], ascending=[False, False, True], kind="stable"
        ),
    }


_IMPROVEMENT_COLUMNS = [
    "step",
    "stage",
    "from",
    "to",
    "dev_seeds",
    "dev_success_from",
    "dev_success_to",
    "dev_difference",
    "dev_steps_from",
    "dev_steps_to",
    "decided_by",
    "episodes_spent",
    "test_success_from",
    "test_success_to",
    "test_difference",
    "test_low",
    "test_high",
    "test_wins",
    "test_losses",
    "test_p",
    "test_p_holm",
    "accepted_on_test",
    "significant_on_test",
]


def _holm_family(
    final: list[dict[str, Any]], improvements: list[dict[str, Any]], shown: Sequence[str], default_id: str
) -> None:
    """One search, one family: every paired test it reports on the test seeds (each shown
    harness against the default, each accepted improvement replayed) is Holm-adjusted together,
    so the chance that a search calls anything significant when nothing differs stays <= 5%."""
    tests = [r for r, hid in zip(final, shown) if hid != default_id]
    adjusted = holm([r["vs_default_p"] for r in tests] + [r["test_p"] for r in improvements])
    for r in final:
        r["vs_default_p_holm"] = 1.0
    for r, p in zip(tests, adjusted):
        r["vs_default_p_holm"] = p
    for r in final:
        r["significant"] = bool(r["vs_default_p_holm"] < ALPHA)
    for r, p in zip(improvements, adjusted[len(tests) :]):
        r["test_p_holm"] = p
        r["significant_on_test"] = bool(p < ALPHA and r["test_difference"] > 0)


def _score_columns(s: Score) -> dict[str, Any]:
    return {
        "n": s.n,
        "errors": s.errors,
        "success": s.success,
        "success_low": s.success_low,
        "success_high": s.success_high,
        "ceiling": s.ceiling,
        "mismatch": s.mismatch,
        "steps": s.steps,
        "obs_chars": s.obs_chars,
        "action_chars": s.action_chars,
        "tokens": s.tokens,
    }


def _best_changes(state: SearchState) -> list[Harness]:
    """The default's one-factor changes ranked on dev (deepest rung first, then score)."""
    spec = state.spec
    raced = [h for h in spec.neighbours(spec.default) if state.depth.get(h.id)]
    ranked = sorted(
        raced,
        key=lambda h: (state.depth[h.id], state.score(h, spec.dev_seeds[: state.depth[h.id]]).key()),
        reverse=True,
    )
    return ranked[: spec.top_changes]


def _change(spec: SearchSpec, h: Harness) -> str:
    """How ``h`` differs from the default, as ``factor=level`` pairs."""
    mine, theirs = spec.space.levels_of(h), spec.space.levels_of(spec.default)
    diff = [f"{f}={mine[f]}" for f in spec.space.factor_names if mine[f] != theirs[f]]
    return ", ".join(diff) if diff else "(default)"
