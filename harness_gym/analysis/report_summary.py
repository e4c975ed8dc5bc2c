"""The sweep report's first section: per agent, one line a reader acts on (the factors that
matter, the largest harness gap beyond noise, ceiling vs mismatch).

Its own module because it only restates numbers the sections below print, gathered from the
effects, the worst-harness table and the mismatch table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness_gym.analysis.report_effects import _top_effects
from harness_gym.analysis.report_section import Section


def _summary_section(agents: Sequence[str], estimated: Any, worst: Any, by_agent: Any) -> Section:
    """What a reader acts on, per agent, in one line each: the factors that matter (interval and
    the design's caveat), the largest harness gap the data support, ceiling vs mismatch. Every
    number is one the sections below print."""
    lines = []
    for agent in agents:
        parts = [
            _summary_effects(estimated, agent),
            _summary_gap(worst, agent),
            _summary_mismatch(by_agent, agent),
        ]
        lines.append(f"`{agent}`: " + " ".join(p for p in parts if p))
    return Section("Summary", lines or ["No finished episodes."])


def _summary_effects(estimated: Any, agent: str) -> str:
    table = estimated.table
    mine = table[table["agent"] == agent] if len(table) else table
    top = _top_effects(mine, n=3)
    said = [
        f"{f}={lv} {e} pp" + (" (holds at the flip bases)" if estimated.unmet else "")
        for f, lv, e in zip(top["factor"], top["level"], top["effect (pp)"])
    ]
    if len(mine) and "aliased_with" in mine:
        al = mine[(mine["aliased_with"].fillna("") != "") & mine["effect_low"].notna()]
        if len(al):
            r = al.sort_values("p_holm", kind="stable").iloc[0]
            said.append(
                f"{r['factor']}={r['level']} or {r['aliased_with']} {100 * r['effect']:+.1f} "
                f"[{100 * r['effect_low']:+.1f}, {100 * r['effect_high']:+.1f}] pp "
                f"(Holm p {r['p_holm']:.2g}; this design cannot tell a main effect from that "
                "interaction; foldover separates them)"
            )
    withheld = sorted(set(mine[mine["effect_low"].isna()]["factor"])) if len(mine) else []
    if said:
        text = "Factors that matter: " + "; ".join(said) + "."
    elif len(mine) and mine["effect_low"].isna().all():
        text = "No factor effect can be estimated from this design."
    else:
        text = "No factor effect is significant."
    if withheld:
        text += f" Withheld (see Marginal effects): {', '.join(withheld)}."
    return text


def _summary_gap(worst: Any, agent: str) -> str:
    w = worst[worst["agent"] == agent] if len(worst) else worst
    if not len(w):
        return ""
    real = w[w["different"].fillna(False).astype(bool)] if "different" in w else w.iloc[0:0]
    if not len(real):
        return "No task's best-to-worst harness gap is beyond noise."
    r = real.sort_values("spread", ascending=False, kind="stable").iloc[0]
    return (
        f"Largest harness gap: {r['task_id']}, best `{r['best_harness']}` {100 * r['best_success']:.0f}% vs "
        f"worst `{r['worst_harness']}` {100 * r['worst_success']:.0f}% ({100 * r['spread']:.0f} pp; "
        f"beyond noise in {len(real)} of {len(w)} task(s))."
    )


def _summary_mismatch(by_agent: Any, agent: str) -> str:
    a = by_agent[by_agent["agent"] == agent] if len(by_agent) else by_agent
    if not len(a) or a["ceiling"].isna().all():
        return ""
    r = a.iloc[0]
    return (
        f"Ceiling {r['ceiling']:.2f}, deployed {r['deployed']:.2f}, mismatch {r['mismatch']:.2f} "
        f"[{r['mismatch_low']:.2f}, {r['mismatch_high']:.2f}]."
    )
