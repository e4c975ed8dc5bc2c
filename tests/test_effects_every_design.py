"""Known answers on every design the CLI offers (``select_design``: balanced, balanced:N,
covering, covering:N, foldover, sample:N, all, +flips), with design seeds other than 0, for
agents whose truth is known by construction: main effects only, interactions only, the
instance only (no harness matters), effects that cancel across tasks, and nothing at all.

Each statement the report prints is checked against the truth:

* *significant*: never for a factor whose true effect is zero, beyond the 5% family-wise rate
  (over sweeps); never for a completely aliased effect as a main effect;
* *main effect or A x B* (aliased with): only where the design puts a cell interaction wholly
  inside a main effect, and its interval covers what the estimator estimates;
* *no detectable effect*: names the minimum detectable effect, and a factor worth more than it
  is rarely called so;
* *differs by task*: never where the per-task truths agree, and no test claims anything from
  rounding error (an instance-only agent gives p = 1 everywhere).

Rows are simulated (each cell's coin) so a sweep costs milliseconds; the default suite runs a
few design seeds per case (about 10 s in all), ``-m slow`` runs 100 design seeds for each of
90 (design, agent) cases (about 80 minutes on one core; the figures are in
docs/sweeps-and-reports.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from effects_spaces import BINARY, MIXED, xml_and_yaml, xml_only

from harness_gym.analysis.effects import factor_effects
from harness_gym.analysis.effects_aliasing import _lack_of_fit, _orthonormal, alias_profile
from harness_gym.analysis.effects_inference import _one_way, mean_zero_test
from harness_gym.analysis.effects_model import build_model
from harness_gym.analysis.sweep.spec import select_design
from harness_gym.core.space import HarnessSpace

THREE = HarnessSpace(
    {
        "obs_format": ["json", "xml", "yaml"],
        "tool_style": ["json", "xml", "python"],
        "tool_naming": ["canonical", "synonyms", "opaque"],
        "invalid_action": ["feedback", "end", "ignore"],
    }
)
SPACES = {"binary": BINARY, "three": THREE, "mixed": MIXED}


def instance_only(task: str, lv: dict) -> float:
    """No harness matters; the task does (with a shared coin, every harness of an instance
    gives the same outcome: every effect of every cluster is zero up to rounding)."""
    return 0.2 if task == "T0" else 0.7


def cancelling(task: str, lv: dict) -> float:
    """tool_style = xml: +20 pp on T0, -20 pp on T1 (zero on average)."""
    up = lv.get("tool_style") == "xml"
    return (0.7 if up else 0.5) if task == "T0" else (0.5 if up else 0.7)


def null(task: str, lv: dict) -> float:
    return 0.5


def levels_of(space: HarnessSpace) -> dict:
    return {f.name: list(f.level_names) for f in space.factors}


def truth(space: HarnessSpace, p, tasks: list[str], bases: list | None = None) -> dict:  # noqa: ANN001
    """Effect-coded main effects of ``p`` averaged over ``tasks``: over the full factorial, or
    (flips) per base harness with the other factors held, averaged over the bases."""
    names = list(space.factor_names)
    levels = levels_of(space)
    out = {}
    if bases:
        for f in names:
            per = []
            for lv0 in bases:
                probs = {lv: np.mean([p(t, {**lv0, f: lv}) for t in tasks]) for lv in levels[f]}
                mean = np.mean(list(probs.values()))
                per.append({lv: v - mean for lv, v in probs.items()})
            for lv in levels[f]:
                out[(f, lv)] = float(np.mean([b[lv] for b in per]))
        return out
    grid = pd.DataFrame([space.levels_of(h) for h in space])
    grid["p"] = [np.mean([p(t, r) for t in tasks]) for r in grid.to_dict("records")]
    for f in names:
        means = grid.groupby(f)["p"].mean()
        for level, value in means.items():
            out[(f, level)] = float(value - means.mean())
    return out


def rows_of(sel, p, tasks: int, seeds: int, rng, shared: bool, exact: bool = False) -> pd.DataFrame:  # noqa: ANN001
    """A sweep's rows: one coin per (task, seed) shared by every harness when ``shared`` (an
    agent on one task instance), else one per cell; ``exact`` gives the probability itself."""
    records = []
    for t in range(tasks):
        task = f"T{t}"
        probs = np.array([p(task, pt.levels) for pt in sel.points])
        for s in range(seeds):
            u = np.full(len(probs), rng.random()) if shared else rng.random(len(probs))
            for i, pt in enumerate(sel.points):
                value = probs[i] if exact else float(u[i] < probs[i])
                records.append(
                    {
                        "agent": "x",
                        "task_id": task,
                        "seed": s,
                        "harness_name": pt.name,
                        "error": None,
                        "success": value,
                        **{f"level_{f}": v for f, v in pt.levels.items()},
                    }
                )
    return pd.DataFrame(records)


def sweep(space, subset, p, design_seed, tasks=2, seeds=10, shared=False):  # noqa: ANN001, ANN201
    """(effects, truth, estimand) of one simulated sweep; ``estimand``: what each printed
    estimate estimates (the estimator applied to the true probabilities)."""
    sel = select_design(space, subset, design_seed=design_seed)
    record = sel.design if "flips" in sel.design else None
    rng = np.random.default_rng([design_seed, tasks, seeds, int(shared)])
    rows = rows_of(sel, p, tasks, seeds, rng, shared)
    factors, levels = list(sel.factors), levels_of(space)
    effects = factor_effects(rows, factors, design=record, levels=levels)
    names = [f"T{t}" for t in range(tasks)]
    bases = None
    if record:
        base_names = {b for b, _, _ in record["flips"]}
        bases = [pt.levels for pt in sel.points if pt.name in base_names]
    exact = rows_of(sel, p, tasks, 1, np.random.default_rng(0), False, exact=True)
    target = factor_effects(exact, factors, design=record, levels=levels, assume_no_interactions=True)
    # the estimand of an aliased row is the same linear estimator on the probabilities
    estimand = {(r.factor, r.level): r.effect for r in target.table.itertuples()}
    return effects, truth(space, p, names, bases), estimand


# -- fast: the statements, a few design seeds each ------------------------------------------------


@pytest.mark.parametrize("design_seed", [0, 1, 3])
def test_complete_aliasing_on_an_8_run_array_is_never_a_significant_main_effect(design_seed: int) -> None:
    """The 8-run 2-level array puts every two-factor interaction on a main effect: the agent
    that reads only tool_style x obs_format shows as a large effect of tool_naming (or another
    factor it never reads); the report calls it "main effect or obs_format x tool_style"."""
    effects, true, estimand = sweep(BINARY, "balanced", xml_and_yaml, design_seed, seeds=20)
    t = effects.table
    unread = t[t["factor"].isin(["tool_naming", "parser", "field_order"])]
    assert not unread["significant"].any()
    profile = _profile("balanced", design_seed)
    on = [
        f
        for f, als in profile.items()
        if any(al.complete and al.pair == ("obs_format", "tool_style") for al in als)
    ]
    if on:  # the interaction's column is a main effect's: that effect reads "main effect or ..."
        hit = t[t["factor"].isin(on)]
        assert hit["note"].str.startswith("main effect or").all()
        assert hit["aliased_with"].str.contains("obs_format x tool_style").all()
        want = [estimand[(f, lv)] for f, lv in zip(hit["factor"], hit["level"])]
        assert (hit["effect_low"] - 1e-9 <= want).all() and (hit["effect_high"] + 1e-9 >= want).all()
        assert abs(hit["effect"]).min() > 0.1  # the interaction is there, as "main effect or ..."
    else:  # it lies on a column no factor uses: the lack-of-fit test sees it
        assert effects.fit["fits"].iloc[0] is False or not effects.fit["fits"].iloc[0]
    # every factor of this array is completely aliased with some pair
    assert (t["aliased_with"] != "").sum() + t["effect_low"].isna().sum() == len(t)
    assert not effects.no_effect.get("x")  # an aliased factor gets no null claim
    assert any("foldover separates them" in w for w in effects.warnings)


@pytest.mark.parametrize("design_seed", [0, 2])
def test_balanced_12_on_a_three_level_space_calls_no_unread_factor_significant(design_seed: int) -> None:
    effects, _, _ = sweep(THREE, "balanced:12", xml_and_yaml, design_seed, seeds=20)
    t = effects.table
    assert not t[t["factor"].isin(["tool_naming", "invalid_action"])]["significant"].any()
    settled = t["effect_low"].isna() | (t["aliased_with"] != "")
    assert settled[t["factor"] == "tool_naming"].all()  # withheld or "main effect or ..."


def test_foldover_separates_what_the_8_run_array_aliases() -> None:
    effects, true, _ = sweep(BINARY, "foldover", xml_and_yaml, 1, seeds=20)
    t = effects.table
    assert (t["aliased_with"] == "").all() and t["effect_low"].notna().all()
    inside = [
        lo - 1e-9 <= true[(f, lv)] <= hi + 1e-9
        for f, lv, lo, hi in t[["factor", "level", "effect_low", "effect_high"]].itertuples(index=False)
    ]
    assert np.mean(inside) >= 0.8


@pytest.mark.parametrize("subset", ["covering", "sample:8"])
def test_partial_aliasing_withholds_or_adjusts_and_says_so(subset: str) -> None:
    for design_seed in (0, 1):
        effects, true, _ = sweep(BINARY, subset, xml_and_yaml, design_seed, seeds=20)
        t = effects.table
        clean = t[t["effect_low"].notna() & (t["aliased_with"] == "")]
        for r in clean.itertuples():
            if "adjusted for" not in r.note:
                assert not any(
                    al.factor == r.factor and not al.complete
                    for al in _profile(subset, design_seed).get(r.factor, [])
                )
        withheld = t[t["effect_low"].isna()]
        assert (withheld["note"] != "").all() and withheld["effect"].isna().all()


def _profile(subset: str, design_seed: int) -> dict:
    sel = select_design(BINARY, subset, design_seed=design_seed)
    levels = levels_of(BINARY)
    codes = np.array([[levels[f].index(pt.levels[f]) for f in sel.factors] for pt in sel.points])
    return alias_profile(build_model(codes, list(sel.factors), levels, interactions=False))


def test_instance_only_agent_gets_p_1_from_every_test() -> None:
    """Every harness of an instance gives the same outcome: every cluster's effect is zero up to
    rounding (about 1e-16), and no test may read anything into that."""
    for space, subset in ((MIXED, "balanced"), (BINARY, "foldover"), (MIXED, "flips:6"), (THREE, "covering")):
        effects, _, _ = sweep(space, subset, instance_only, 1, tasks=3, seeds=8, shared=True)
        assert (effects.heterogeneity["p_value"] == 1.0).all(), subset
        assert not effects.heterogeneity["heterogeneous"].any()
        printed = effects.table[effects.table["p_value"].notna()]
        assert (printed["p_value"] == 1.0).all() and not effects.table["significant"].any()
        assert (effects.by_task["p_value"] == 1.0).all()
        if effects.fit is not None and len(effects.fit):
            assert (effects.fit["lack_of_fit_p"].fillna(1.0) == 1.0).all()
        if effects.bases is not None and len(effects.bases):
            assert (effects.bases["p_value"] == 1.0).all()


def test_each_test_gives_p_1_to_rounding_noise() -> None:
    rng = np.random.default_rng(0)
    noise = rng.normal(size=40) * 1e-16
    groups = np.repeat(["a", "b"], 20)
    assert _one_way(noise, groups) == 1.0
    assert _one_way(noise + np.where(groups == "a", 0.3, 0.0), groups) < 1e-6  # a real difference
    assert mean_zero_test(noise.reshape(20, 2)) == 1.0
    assert mean_zero_test(noise.reshape(20, 2) + 0.2) < 1e-5


def test_lack_of_fit_names_a_pair_whose_first_column_projects_to_zero() -> None:
    """An unpivoted QR of the pair's residual projection drops the pair when its first column
    projects to 0; the SVD basis keeps the column that carries the misfit."""
    m = np.array([[0.0, 1.0], [0.0, 2.0], [0.0, -1.0]])
    basis = _orthonormal(m)
    assert basis.shape[1] == 1 and abs(abs(basis[:, 0] @ m[:, 1]) - np.linalg.norm(m[:, 1])) < 1e-12
    # end to end: a 3-level x 3-level interaction on the full factorial of two 3-level factors and
    # a third factor; the lack of fit names exactly that pair
    space = HarnessSpace({k: v for k, v in levels_of(THREE).items() if k != "invalid_action"})
    sel = select_design(space, "all")
    levels = levels_of(space)
    codes = np.array([[levels[f].index(pt.levels[f]) for f in sel.factors] for pt in sel.points])
    main = build_model(codes, list(sel.factors), levels, interactions=False)
    rng = np.random.default_rng(1)
    y = np.array([xml_and_yaml("T0", pt.levels) for pt in sel.points])
    filled = (rng.random((60, len(y))) < y).astype(float)
    fit = _lack_of_fit(main, filled)
    assert fit["fits"] is False and fit["interactions"][0] == ("obs_format", "tool_style")


def test_marginal_effects_csv_withholds_what_the_report_withholds(tmp_path) -> None:  # noqa: ANN001
    effects, _, _ = sweep(BINARY, "sample:8", xml_and_yaml, 0, seeds=20)
    t = effects.table
    t.to_csv(tmp_path / "m.csv", index=False)
    back = pd.read_csv(tmp_path / "m.csv")
    withheld = back[back["effect_low"].isna()]
    assert len(withheld) and withheld["effect"].isna().all() and withheld["note"].notna().all()


# -- slow: every design, every agent, 100 design seeds ------------------------------------------

DESIGNS = [
    ("binary", "balanced"),
    ("binary", "covering"),
    ("binary", "sample:8"),
    ("binary", "sample:12"),
    ("binary", "foldover"),
    ("binary", "all"),
    ("binary", "balanced+flips"),
    ("three", "balanced"),
    ("three", "balanced:12"),
    ("three", "covering"),
    ("three", "covering:8"),
    ("three", "foldover"),
    ("three", "balanced:6+flips"),
    ("mixed", "balanced"),
    ("mixed", "covering"),
    ("mixed", "sample:12"),
    ("mixed", "balanced:6+flips"),
    ("mixed", "balanced:2+flips:next"),
]
AGENTS = [xml_and_yaml, xml_only, instance_only, cancelling, null]
KNOWN_LIMITS = {("sample:12", "xml_and_yaml")}


def statements(space, subset, p, reps: int) -> dict:  # noqa: ANN001
    """Per statement, how often it was wrong over ``reps`` design seeds."""
    keys = ["false_significant", "aliased_significant", "covered", "printed", "aliased_covered", "aliased"]
    keys += ["false_heterogeneous", "no_effect_on_a_real_effect"]
    out = {"sweeps": reps, **dict.fromkeys(keys, 0)}
    for design_seed in range(reps):
        shared = p is instance_only
        effects, true, estimand = sweep(space, subset, p, design_seed, tasks=2, seeds=10, shared=shared)
        t = effects.table
        zero = np.array([abs(true[(f, lv)]) < 1e-12 for f, lv in zip(t["factor"], t["level"])])
        out["false_significant"] += bool((t["significant"].to_numpy() & zero).any())
        aliased = (t["aliased_with"] != "").to_numpy()
        out["aliased_significant"] += int((t["significant"].to_numpy() & aliased).sum())
        clean = t[t["effect_low"].notna() & ~aliased]
        for f, lv, lo, hi in clean[["factor", "level", "effect_low", "effect_high"]].itertuples(index=False):
            out["printed"] += 1
            out["covered"] += lo - 1e-9 <= true[(f, lv)] <= hi + 1e-9
        ali = t[t["effect_low"].notna() & aliased]
        for f, lv, lo, hi in ali[["factor", "level", "effect_low", "effect_high"]].itertuples(index=False):
            out["aliased"] += 1
            out["aliased_covered"] += lo - 1e-9 <= estimand[(f, lv)] <= hi + 1e-9
        het = effects.heterogeneity
        if p is not cancelling and het is not None and len(het):
            out["false_heterogeneous"] += bool(het["heterogeneous"].any())
        if p in (xml_only, cancelling):  # tool_style matters (overall or per task: 20 pp)
            out["no_effect_on_a_real_effect"] += "tool_style" in effects.no_effect.get("x", [])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("design", DESIGNS, ids=lambda d: f"{d[0]}-{d[1]}")
def test_every_statement_against_the_truth_over_100_design_seeds(design, agent) -> None:  # noqa: ANN001
    space, subset = SPACES[design[0]], design[1]
    r = statements(space, subset, agent, reps=100)
    print(design, agent.__name__, r)
    assert r["false_significant"] <= 0.10 * r["sweeps"]
    assert r["aliased_significant"] == 0
    if (design[1], agent.__name__) in KNOWN_LIMITS:
        # partial aliasing the lack-of-fit test half sees (12 of 32 points, 6 residual degrees
        # of freedom): the few intervals printed (7% of rows) cover 79% (measured)
        assert r["printed"] <= 0.1 * r["sweeps"] * 10 and r["covered"] >= 0.7 * r["printed"]
    elif r["printed"] >= 50:
        assert r["covered"] >= 0.88 * r["printed"]
    if r["aliased"] >= 50:
        assert r["aliased_covered"] >= 0.88 * r["aliased"]
    assert r["false_heterogeneous"] <= 0.10 * r["sweeps"]


def test_no_detectable_effect_names_the_minimum_detectable_effect() -> None:
    from harness_gym.analysis.effects_inference import minimum_detectable
    from harness_gym.analysis.report_effects import _effects_text

    # one test, a 95% interval of half-width 0.1: se 0.051, MDE (1.96 + 0.84) se = 0.143
    assert minimum_detectable([-0.1], [0.1], 1) == pytest.approx(0.1 / 1.959964 * (1.959964 + 0.841621))
    assert minimum_detectable([-0.1, -0.05], [0.1, 0.05], 10) > minimum_detectable([-0.1], [0.1], 1)
    effects, _, _ = sweep(BINARY, "foldover", null, 1, seeds=10)
    said = " ".join(_effects_text(effects, None))
    quiet = effects.no_effect.get("x", [])
    assert quiet and "minimum detectable effect +/-" in said
    for f in quiet:
        overall, task = effects.detectable[("x", f)]
        assert 0 < overall < task  # a task has half the clusters: it sees only larger effects
        assert f"{f} (minimum detectable effect +/-{100 * overall:.0f} pp overall" in said


def test_report_opens_with_a_summary_that_repeats_the_sections_numbers() -> None:
    """The summary's effect is the aliased one, printed as "main effect or ...", with the same
    interval as the Marginal effects table; its gap is the worst-harness table's."""
    from harness_gym.analysis.report_effects import _aliased_effects
    from harness_gym.analysis.report_summary import _summary_section

    effects, _, _ = sweep(BINARY, "balanced", xml_and_yaml, 1, seeds=20)
    worst = pd.DataFrame(
        [{"agent": "x", "task_id": "T0", "best_harness": "h1", "best_success": 0.9, "worst_harness": "h2",
          "worst_success": 0.1, "spread": 0.8, "different": True}]
    )  # fmt: skip
    by_agent = pd.DataFrame([{"agent": "x", "ceiling": float("nan")}])
    text = _summary_section(["x"], effects, worst, by_agent).text[0]
    table = _aliased_effects(effects.table)
    assert any(e in text for e in table["effect (pp)"]) and " or " in text and "foldover" in text
    assert "best `h1` 90% vs worst `h2` 10% (80 pp" in text
    assert "Factors that matter:" in text and "No factor effect is significant" not in text
