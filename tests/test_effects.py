"""Factor effects against agents whose true effects are known by construction.

A scripted agent reads its harness from ``info["harness"]`` and succeeds (plays the oracle)
with a probability set by one factor's level, or by a two-factor interaction; otherwise it
writes nonsense. Its coin depends only on (task, seed), so every harness of a task instance
sees the same coin, as a real agent would see the same instance. The true effect of a level
is then its success probability minus the average over the factor's levels (averaged over
the other factor's levels for the interaction agent).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness_gym.analysis.effects import LEAST_SQUARES, PAIRED, factor_effects
from harness_gym.analysis.sweep import SweepSpec, run_sweep
from harness_gym.core.space import HarnessSpace, level_name

SPACE = HarnessSpace(
    {
        "obs_format": ["json", "markdown", "xml", "yaml", "key_value", "html"],
        "field_order": ["canonical", "reversed"],
        "tool_style": ["json", "xml", "python", "command"],
        "invalid_action": ["feedback", "end", "ignore"],
        "parser": ["strict", "lenient"],
    }
)
FACTORS = list(SPACE.factor_names)
LEVELS = {f.name: list(f.level_names) for f in SPACE.factors}


def p_one(levels: dict[str, str]) -> float:
    """Succeeds mostly under XML tool syntax, whatever else the harness does."""
    return 0.9 if levels["tool_style"] == "xml" else 0.2


def p_pair(levels: dict[str, str]) -> float:
    """An interaction: tool style python helps only when invalid actions end the episode."""
    return 0.85 if (levels["tool_style"] == "python") == (levels["invalid_action"] == "end") else 0.25


def true_effects(p) -> dict[tuple[str, str], float]:  # noqa: ANN001
    """Effect-coded main effects of ``p``, by averaging over the full factorial."""
    grid = pd.DataFrame([SPACE.levels_of(h) for h in SPACE])
    grid["p"] = [p(r) for r in grid.to_dict("records")]
    out = {}
    for f in FACTORS:
        means = grid.groupby(f)["p"].mean()
        for level, value in means.items():
            out[(f, level)] = float(value - means.mean())
    return out


def coin(task_id: str, seed: int) -> float:
    return float(np.random.default_rng([zlib.crc32(task_id.encode()), seed]).random())


class Scripted:
    """Plays the oracle when its coin falls under ``p(levels)``, else writes nonsense."""

    def __init__(self, env, p) -> None:  # noqa: ANN001
        from harness_gym.core.env import unwrap_harness_env

        self.env = unwrap_harness_env(env, "Scripted")
        self.p = p
        self.seed = 0

    def reset(self, seed: int | None = None) -> None:
        self.seed = int(seed or 0)

    def act(self, observation: str, info: dict) -> str:  # noqa: ANN001
        spec = info["harness"]
        levels = {f: level_name(spec.get(f, "")) for f in FACTORS}
        if coin(info["task_id"], self.seed) < self.p(levels):
            return self.env.oracle_action()
        return "<<not an action>>"


def one_factor(env):  # noqa: ANN001, ANN201
    return Scripted(env, p_one)


def interaction(env):  # noqa: ANN001, ANN201
    return Scripted(env, p_pair)


AGENTS = {"one_factor": p_one, "interaction": p_pair}


def base_effects(p, base: list) -> dict[tuple[str, str], float]:  # noqa: ANN001
    """What flips estimate: per base harness, each level's success probability minus the
    average over the factor's levels (all else as in the base), averaged over the bases."""
    out = {}
    for f in FACTORS:
        per_base = []
        for h in base:
            levels = SPACE.levels_of(h)
            probs = {lv: p({**levels, f: lv}) for lv in LEVELS[f]}
            mean = sum(probs.values()) / len(probs)
            per_base.append({lv: v - mean for lv, v in probs.items()})
        for lv in LEVELS[f]:
            out[(f, lv)] = sum(b[lv] for b in per_base) / len(per_base)
    return out


def check(table: pd.DataFrame, p, agent: str, estimator: str, truth: dict | None = None) -> None:  # noqa: ANN001
    """Every true effect inside its interval; every factor the agent ignores contains 0; no
    interval withheld."""
    truth = truth or true_effects(p)
    rows = table[table["agent"] == agent]
    assert set(rows["estimator"]) == {estimator}
    assert len(rows) == sum(len(v) for v in LEVELS.values())
    assert rows["effect_low"].notna().all(), rows[rows["effect_low"].isna()]
    used = {f for (f, _), v in truth.items() if abs(v) > 1e-9}
    for r in rows.itertuples():
        true = truth[(r.factor, r.level)]
        assert r.effect_low - 1e-9 <= true <= r.effect_high + 1e-9, (agent, r.factor, r.level, true, r)
        if r.factor not in used:
            assert r.effect_low <= 0 <= r.effect_high
    for f in used:  # and the effects that exist are found: some interval excludes 0
        assert (rows[rows["factor"] == f]["effect_low"] > 0).any()


def check_honest(table: pd.DataFrame, p, agent: str) -> None:  # noqa: ANN001
    """Where the design cannot give every main effect (aliasing): each printed main-effect
    interval covers the truth, every other row says why in its note, and neither a withheld
    nor a completely aliased effect is called significant."""
    truth = true_effects(p)
    rows = table[table["agent"] == agent]
    aliased = rows["aliased_with"].fillna("") != ""
    printed = rows[rows["effect_low"].notna() & ~aliased]
    for r in printed.itertuples():
        assert r.effect_low - 1e-9 <= truth[(r.factor, r.level)] <= r.effect_high + 1e-9, r
    assert (rows[~rows.index.isin(printed.index)]["note"].fillna("") != "").all()
    assert not rows[~rows.index.isin(printed.index)]["significant"].any()


def simulate(points: list, p, tasks: int = 3, seeds: int = 20, agent: str = "x") -> pd.DataFrame:  # noqa: ANN001
    """The rows a scripted agent gives, without running episodes (same coin, same rule)."""
    records = []
    for t in range(tasks):
        for s in range(seeds):
            u = coin(f"T{t}", s)
            for i, h in enumerate(points):
                levels = SPACE.levels_of(h)
                records.append(
                    {
                        "agent": agent,
                        "task_id": f"T{t}",
                        "seed": s,
                        "harness_name": f"h{i:03d}",
                        "harness_id": h.id,
                        "error": None,
                        "success": float(u < p(levels)),
                        **{f"level_{f}": v for f, v in levels.items()},
                    }
                )
    return pd.DataFrame(records)


@pytest.mark.parametrize("design_seed", [0, 1, 2])
@pytest.mark.parametrize("kind", ["covering", "balanced"])
def test_least_squares_recovers_a_one_factor_effect(kind: str, design_seed: int) -> None:
    points = getattr(SPACE, kind)(2, seed=design_seed)
    effects = factor_effects(simulate(points, p_one), FACTORS, levels=LEVELS, replicates=400)
    if kind == "balanced":
        check(effects.table, p_one, "x", LEAST_SQUARES)
    else:  # the 24-point covering array aliases main effects with interactions: withheld, said so
        check_honest(effects.table, p_one, "x")


@pytest.mark.parametrize("design_seed", [0, 1, 2])
def test_least_squares_recovers_an_interaction_agent_on_a_balanced_design(design_seed: int) -> None:
    """In the orthogonal array tool_style x invalid_action is orthogonal to every main effect."""
    points = SPACE.balanced(2, seed=design_seed)
    effects = factor_effects(simulate(points, p_pair), FACTORS, levels=LEVELS, replicates=400)
    check(effects.table, p_pair, "x", LEAST_SQUARES)


@pytest.mark.parametrize("design_seed", [0, 1, 2])
def test_a_covering_array_that_cannot_find_the_truth_says_so(design_seed: int) -> None:
    """A 24-point covering array of this space cannot tell tool_style x invalid_action from
    other explanations; the lack-of-fit check sees the misfit, and every factor whose estimate
    moves with the interactions that carry it is named and gets no interval. Every interval
    that is printed covers the truth."""
    points = SPACE.covering(2, seed=design_seed)
    effects = factor_effects(simulate(points, p_pair), FACTORS, levels=LEVELS)
    truth = true_effects(p_pair)
    table = effects.table
    assert not effects.fit["fits"].iloc[0]
    printed = table[table["effect_low"].notna()]
    for r in printed.itertuples():
        assert r.effect_low - 1e-9 <= truth[(r.factor, r.level)] <= r.effect_high + 1e-9, r
    warned = " ".join(effects.warnings)
    assert "does not fit" in warned
    for factor in set(table[table["effect_low"].isna()]["factor"]):
        assert f"{factor} is aliased with" in warned, (factor, effects.warnings)
    assert "tool_style x invalid_action" in warned


@pytest.mark.parametrize("design_seed", [0, 1])
@pytest.mark.parametrize("mode", ["all", "next"])
def test_paired_flips_recover_known_effects_and_exact_zeros(design_seed: int, mode: str) -> None:
    base = SPACE.balanced_design(max_points=6, seed=design_seed)
    design = SPACE.flips(base, mode)
    points = SPACE.points(design)
    names = [f"h{i:03d}" for i in range(len(points))]
    record = {"flips": [[names[b], names[f], FACTORS[c]] for b, f, c in design.flips]}
    for agent, p in AGENTS.items():
        rows = simulate(points, p)
        effects = factor_effects(rows, FACTORS, design=record, levels=LEVELS, replicates=400)
        assert effects.estimator == PAIRED
        # the interaction shows as effects that differ between the bases; nothing else warns
        differs = set(effects.bases[effects.bases["differs"]]["factor"])
        assert differs == (
            {"tool_style", "invalid_action"} if agent == "interaction" and mode == "all" else set()
        )
        assert len(effects.warnings) == len(differs)
        if mode == "all":  # the average effect over the base harnesses, interactions or not
            check(effects.table, p, "x", PAIRED, base_effects(p, SPACE.points(base)))
        elif agent == "one_factor":  # next-level chains: exact without interactions
            check(effects.table, p, "x", PAIRED)
        ignored = effects.table[effects.table["factor"].isin(["obs_format", "field_order", "parser"])]
        # exactly zero, and no paired episode differed; the interval is the exact bound for
        # "nothing disagreed in G clusters", not [0, 0]
        assert (ignored["effect"] == 0).all() and (ignored["effect_low"] < 0).all(), agent
        assert (ignored["effect_high"] > 0).all() and not ignored["significant"].any()
        assert {"obs_format", "field_order", "parser"} <= set(effects.exact_zero["x"])


def test_raw_marginal_means_on_a_covering_array_would_invent_effects() -> None:
    """The failure the estimators fix: on this covering array the raw per-level success of an
    ignored factor (the parser) moves with the factor the agent uses; the model's estimate does not."""
    points = SPACE.covering(2)
    rows = simulate(points, p_one)
    raw = rows.groupby("level_parser")["success"].mean()
    assert raw.max() - raw.min() > 0.1
    table = factor_effects(rows, FACTORS, levels=LEVELS, replicates=200, assume_no_interactions=True).table
    parser = table[table["factor"] == "parser"]
    assert (parser["effect_low"] <= 0).all() and (parser["effect_high"] >= 0).all()
    assert parser["effect"].abs().max() < 0.02
    # by default the report withholds it: an interaction could move it more than the lack-of-fit
    # test would see (partial aliasing), and the row says so
    default = factor_effects(rows, FACTORS, levels=LEVELS).table
    withheld = default[(default["factor"] == "parser") & default["effect_low"].isna()]
    assert withheld["note"].str.contains("partially aliased").all() and withheld["effect"].isna().all()


def test_confounded_designs_are_named_in_words() -> None:
    few = SPACE.covering(2)[:5]
    effects = factor_effects(simulate(few, p_one, seeds=4), FACTORS, levels=LEVELS, replicates=50)
    assert any("cannot separate the main effects" in w for w in effects.warnings)
    assert effects.table["effect"].isna().any()
    # The design alone no longer decides: a main-effects agent on an orthogonal array fits its
    # model, so no confounding warning is printed for it.
    oa = factor_effects(simulate(SPACE.balanced(), p_one, seeds=4), FACTORS, levels=LEVELS)
    assert not any("confounded" in w or "does not fit" in w for w in oa.warnings), oa.warnings
    assert bool(oa.fit["fits"].iloc[0])


@pytest.mark.parametrize("subset", ["covering", "balanced"])
def test_sweeps_of_scripted_agents_recover_their_effects(tmp_path: Path, subset: str) -> None:
    """End to end: agents read the harness from ``info`` in real episodes; the report's table."""
    from harness_gym.analysis.report import build_report

    path = tmp_path / "space.yaml"
    SPACE.save(path)
    spec = SweepSpec.build(
        [one_factor, interaction],
        tasks=["ClickButton", "ClickLink"],
        space=str(path),
        subset=subset,
        seeds=8,
        ceiling=False,
    )
    run_sweep(spec, tmp_path / "sweep", workers=0, progress=False)
    report = build_report(tmp_path / "sweep")
    table = pd.read_csv(report.out_dir / "marginal_effects.csv")
    # The interaction agent only on the balanced design: the covering array cannot separate
    # its interaction (test_a_covering_array_that_cannot_find_the_truth_says_so).
    for agent, p in AGENTS.items() if subset == "balanced" else [("one_factor", p_one)]:
        name = next(a.name for a in spec.agents if a.name.endswith(agent))
        if subset == "balanced":
            check(table, p, name, LEAST_SQUARES)
        else:
            check_honest(table, p, name)
    text = report.markdown.read_text()
    assert "Estimator: least squares" in text
    kind = {"balanced": "orthogonal array", "covering": "covering array"}[subset]
    assert f"harness(es): {kind} (" in text


def test_oracle_at_json_shows_no_effect_of_what_it_ignores_on_the_demo_space(tmp_path: Path) -> None:
    """``oracle@Json`` never reads the observation: under the demo's design (flips) every
    observation factor has exactly zero effect, while tool syntax and policy factors move it."""
    from harness_gym.analysis.report import build_report

    spec = SweepSpec.build(
        "oracle@Json",
        tasks=["ClickButton", "EnterText", "ChooseList"],
        space="examples/demo-space.yaml",
        subset=_demo_subset(),
        seeds=3,
        ceiling=False,
    )
    run_sweep(spec, tmp_path, workers=0, progress=False)
    report = build_report(tmp_path)
    table = pd.read_csv(report.out_dir / "marginal_effects.csv")
    assert set(table["estimator"]) == {PAIRED}
    for factor in ("obs_format", "field_order"):
        rows = table[table["factor"] == factor]
        assert len(rows) == {"obs_format": 6, "field_order": 2}[factor]
        assert (
            (rows["effect"] == 0).all()
            and (rows["effect_low"] <= 0).all()
            and (rows["effect_high"] >= 0).all()
        )
        assert not rows["significant"].any(), factor
    used = table[table["factor"].isin(["tool_style", "invalid_action"])]
    assert (used["effect_low"] > 0).any()
    text = report.markdown.read_text()
    assert "paired flips" in text
    # The bases never take most levels: the report says effects hold at the bases, lists the
    # unmet levels, and never says a factor "does not matter".
    assert "Flip effects hold at the base harnesses" in text and "No base takes" in text
    assert "does not matter" not in text
    assert "no paired episode differed at the base harnesses for obs_format, field_order" in text


def _demo_subset() -> str:
    """The --subset of ``make demo`` (read from the Makefile, so the test follows it)."""
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text()
    return makefile.split("--subset", 1)[1].split()[0]
