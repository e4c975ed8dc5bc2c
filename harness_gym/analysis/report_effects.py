"""The sweep report's effects section in words and tables: which rows the effects come from
(a search folder's test seeds only), the largest significant effects, what is withheld or
aliased and why, the minimum detectable effects, and how the estimator works.

Its own module because it is the one section that reads an
:class:`~harness_gym.analysis.effects.Effects` result; the summary reuses its table of the
largest effects.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from harness_gym.analysis.report_render import _pretty


def _effect_rows(rows: Any, sweep_dir: Path) -> tuple[Any, list[str]]:
    """The rows factor effects may be estimated from, and a sentence saying which.

    A sweep's rows are a design: all of them. A harness search's are adaptive (each harness
    played the dev seeds its race gave it, chosen by what earlier seeds showed), so effects
    come only from the test seeds, which the search never looked at, and only from the
    harnesses that played every one of them on every task (shared seeds, no filled cells).
    Fewer than two such harnesses: no rows, and the sentence says so.
    """
    from harness_gym.analysis.search.report import is_search_folder

    if not is_search_folder(sweep_dir):
        return rows, []
    import json

    import pandas as pd

    from harness_gym.analysis.search.run import SEARCH_FILE

    spec = json.loads((sweep_dir / SEARCH_FILE).read_text(encoding="utf-8"))
    spec = spec.get("spec", spec)
    test = {int(s) for s in spec.get("test_seeds", [])}
    ok = rows[rows["error"].isna()] if "error" in rows else rows
    on_test = ok[ok["seed"].astype(int).isin(test)]
    cells = len(test) * on_test["task_id"].nunique()
    # Distinct (task, seed) instances each (agent, harness) played on the test seeds.
    played = (
        on_test.drop_duplicates(["agent", "harness_name", "task_id", "seed"])
        .groupby(["agent", "harness_name"])["seed"]
        .size()
    )
    full = {key for key, n in played.items() if cells and n >= cells}
    mask = [(a, h) in full for a, h in zip(on_test["agent"], on_test["harness_name"])]
    keep = on_test.loc[pd.Series(mask, index=on_test.index, dtype=bool)]
    harnesses = keep["harness_name"].nunique()
    if harnesses < 2:
        return keep.iloc[0:0], [
            "Search folder: factor effects are not estimated. The search's own rows are adaptive (each "
            "harness played the dev seeds its race gave it), and fewer than two harnesses played every "
            "test seed; run a sweep of a design after the search (harness-gym sweep --space ... "
            "--subset foldover) to measure them."
        ]
    return keep, [
        f"Search folder: factor effects come only from the {harnesses} harnesses that played every one of "
        f"the {len(test)} test seeds on every task (the search never looked at those seeds, and every "
        "harness compared played the same instances); the dev rows are adaptive and left out. A few "
        "harnesses chosen by a search separate few factors: a sweep of a design after the search "
        "(--subset foldover) measures them all."
    ]


def _top_effects(effects: Any, n: int = 10) -> Any:
    """The largest effects that stay significant after Holm's correction (family-wise error 5%
    over each agent's level effects), with their intervals and adjusted p-values (no rows: an
    empty table with the same columns)."""
    if not len(effects):
        import pandas as pd

        return pd.DataFrame(columns=["agent", "factor", "level", "n", "effect (pp)", "estimator"])
    keep = effects["effect"].notna() & effects["effect_low"].notna()
    if "significant" in effects:
        keep &= effects["significant"].astype(bool)
    e = (
        effects[keep]
        .assign(size=lambda d: d["effect"].abs())
        .sort_values("size", ascending=False, kind="stable")
        .head(n)
    )
    out = e[["agent", "factor", "level", "n"]].copy()
    out["effect (pp)"] = [
        f"{100 * s:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        for s, lo, hi in zip(e.effect, e.effect_low, e.effect_high)
    ]
    if "p_holm" in e:
        out["p (Holm)"] = [f"{p:.2g}" for p in e["p_holm"]]
    out["estimator"] = e["estimator"]
    return out


def _effects_text(estimated: Any, design: dict[str, Any] | None) -> list[str]:
    """What the effects mean, how sure they are, what is withheld and why, in words."""
    from harness_gym.analysis.effects import PAIRED

    table = estimated.table
    lines: list[str] = []
    if estimated.estimator == PAIRED and estimated.unmet:
        shown = "; ".join(f"{f} = {', '.join(lv)}" for f, lv in estimated.unmet.items())
        lines.append(
            "Flip effects hold at the base harnesses: each is averaged over the bases' levels of the other "
            f"factors. No base takes {shown}; an interaction with these levels (e.g. a factor that matters "
            "only when another takes one of them) cannot show here. Flips of more base points "
            "(balanced:N+flips) or a design clear of interactions (foldover) measure them."
        )
    lines += [f"Warning: {w}." for w in estimated.warnings]
    bases = getattr(estimated, "bases", None)
    if estimated.estimator == PAIRED and bases is not None and len(bases):
        lines.append(
            "Each factor flipped at two or more bases is tested for an effect that differs between "
            "bases (an interaction with the factors they differ in; Holm over each agent's factors): "
            + (
                "; ".join(
                    f"`{a}` {f}" for a, f, d in zip(bases["agent"], bases["factor"], bases["differs"]) if d
                )
                or "none differs"
            )
            + "."
        )
    for agent in dict.fromkeys(table["agent"]) if len(table) else []:
        none = estimated.no_effect.get(agent, [])
        exact = set(estimated.exact_zero.get(agent, []))
        if not none:
            continue
        where = " at the base harnesses" if estimated.estimator == PAIRED and estimated.unmet else ""
        parts = []
        if exact:
            names = ", ".join(f for f in none if f in exact)
            parts.append(
                f"no paired episode differed{where} for {names}"
                if estimated.estimator == PAIRED
                else f"every task instance gives exactly zero effect of {names}"
            )
        rest = [f for f in none if f not in exact]
        if rest:
            parts.append(
                f"no detectable effect{where} of " + ", ".join(_with_power(estimated, agent, f) for f in rest)
            )
        lines.append(
            f"`{agent}`: " + "; ".join(parts) + ": no level significant after Holm's correction, overall or "
            "in any task, and no task x factor heterogeneity found. Smaller effects may exist; the "
            "minimum detectable effect (80% power) is the size these tests would have seen."
        )
    het = estimated.heterogeneity
    if het is not None and len(het) and het["heterogeneous"].any():
        flagged = het[het["heterogeneous"]]
        lines.append(
            "Effects that differ by task (one-way test over tasks, Holm over each agent's factors): "
            + "; ".join(f"`{a}` {f}" for a, f in zip(flagged["agent"], flagged["factor"]))
            + ". An overall effect of these factors averages tasks that disagree; see the task table."
        )
    return lines


def _effects_method(estimated: Any) -> list[str]:
    """How the effects and their intervals are made (the folded part under the effects)."""
    table = estimated.table
    clusters = int(table["clusters"].max()) if len(table) and "clusters" in table else 0
    return [
        "A level's effect is its success rate's deviation from the average over the factor's levels, in "
        "percentage points; the difference between two levels is the difference of their effects. Each "
        "(task, seed) cluster has its own value of every effect (the estimators are linear in the "
        f"harness means); the 95% interval is Student's t over the {clusters} clusters (cluster-robust, "
        "with the small-sample correction), or, where every cluster gives the same value, an exact "
        "bound from how often a cluster could differ unseen. Largest effects lists the effects that stay "
        "significant after Holm's correction: family-wise error 5% over each agent's level effects.",
        _estimator_text(estimated.estimator),
    ]


def _aliased_effects(effects: Any) -> Any:
    """Effects of completely aliased factors, printed as what they are: "main effect or
    interaction" (the design cannot tell them apart), with their interval and Holm p."""
    if not len(effects) or "aliased_with" not in effects:
        return effects.iloc[0:0]
    e = effects[(effects["aliased_with"].fillna("") != "") & effects["effect_low"].notna()]
    out = e[["agent", "level"]].copy()
    out.insert(1, "main effect or", [f"{f} or {pairs}" for f, pairs in zip(e["factor"], e["aliased_with"])])
    out["effect (pp)"] = [
        f"{100 * s:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        for s, lo, hi in zip(e.effect, e.effect_low, e.effect_high)
    ]
    out["p (Holm)"] = [f"{p:.2g}" for p in e["p_holm"]]
    return out


def _with_power(estimated: Any, agent: str, factor: str) -> str:
    """``factor (would see +/-X pp overall, +/-Y pp within a task)``: the minimum detectable
    effects of the "no detectable effect" statement."""
    overall, task = getattr(estimated, "detectable", {}).get((agent, factor), (math.nan, math.nan))
    sizes = []
    if overall == overall:
        sizes.append(f"+/-{100 * overall:.0f} pp overall")
    if task == task:
        sizes.append(f"+/-{100 * task:.0f} pp within a task")
    return f"{factor} (minimum detectable effect {', '.join(sizes)})" if sizes else factor


def _effects_tables(estimated: Any) -> list[tuple[str, Any]]:
    tables = [
        ("Largest effects (significant after Holm's correction)", _pretty(_top_effects(estimated.table)))
    ]
    aliased = _aliased_effects(estimated.table)
    if len(aliased):
        tables.append(
            (
                "Main effect or interaction (completely aliased in this design, never called a main "
                "effect; --subset foldover separates them)",
                aliased,
            )
        )
    by_task = estimated.by_task
    if by_task is not None and len(by_task) and by_task["significant"].any():
        t = by_task[by_task["significant"]].assign(size=lambda d: d["effect"].abs())
        t = t.sort_values("size", ascending=False, kind="stable").head(12)
        out = t[["agent", "task_id", "factor", "level"]].copy()
        out["effect (pp)"] = [
            f"{100 * s:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
            for s, lo, hi in zip(t.effect, t.effect_low, t.effect_high)
        ]
        out["p (Holm)"] = [f"{p:.2g}" for p in t["p_holm"]]
        tables.append(
            ("Task-level effects (significant after Holm's correction over the agent's task rows)", out)
        )
    return tables


def _effects_diagnostics(estimated: Any) -> list[tuple[str, Any]]:
    """The effects model's diagnostics (the lack-of-fit table), shown folded."""
    fit = estimated.fit
    if fit is None or not len(fit):
        return []
    shown = fit.copy()
    shown["lack_of_fit_p"] = [("-" if p != p else f"{p:.2g}") for p in shown["lack_of_fit_p"]]
    return [("Lack of fit of the main-effects model", shown)]


def _estimator_text(estimator: str) -> str:
    from harness_gym.analysis.effects import PAIRED

    if estimator == PAIRED:
        return (
            "Estimator: paired flips. Each flip compares two harnesses that differ in one factor "
            "on the same (task, seed); level effects are the least-squares fit of those paired "
            "differences, averaged over the base harnesses. Interactions cannot leak into them: a "
            "factor the agent ignores has exactly zero differences."
        )
    return (
        "Estimator: least squares on the harnesses' mean success with every factor's main effect "
        "(effect coding). Its estimates hold when the two-factor interactions are zero or orthogonal "
        "to them; a lack-of-fit test of this model per agent decides it from the data. Where the "
        "model does not fit, the factors whose main effect moves with the interactions carrying the "
        "misfit are named and get no interval. Aliasing the test cannot see is settled from the design "
        "(see Design): completely aliased effects read 'main effect or interaction'."
    )
