"""Factor effects against synthetic agents whose answers are known by construction, over many
design seeds: interval coverage, false positives after Holm's correction, aliasing decided by
the data, effects that cancel across tasks, flips at their bases, and design seeds.

Rows are simulated (the scripted agent's rule applied to each cell) so hundreds of sweeps
cost seconds; one end-to-end sweep through the CLI checks the report. The default suite runs
a few repetitions of each; ``-m slow`` runs enough to measure coverage and error rates.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from effects_spaces import BINARY, MIXED, xml_and_yaml, xml_only

from harness_gym.analysis.effects import factor_effects
from harness_gym.analysis.effects_inference import cluster_t, holm
from harness_gym.analysis.sweep.spec import SweepError, SweepSpec
from harness_gym.core.designs import clear_design, interaction_aliasing, orthogonal_array
from harness_gym.core.space import HarnessSpace

#: Three 3-level factors: the orthogonal array is a 9-run Latin square.
LATIN = HarnessSpace(
    {
        "obs_format": ["json", "xml", "yaml"],
        "tool_style": ["json", "xml", "python"],
        "tool_naming": ["canonical", "synonyms", "opaque"],
    }
)

P = Callable[[str, dict], float]  # (task, levels) -> success probability


def cancelling(task: str, lv: dict) -> float:
    """Parser +40 pp on task T0, -40 pp on T1: zero on average."""
    up = lv.get("parser") == "lenient"
    return (0.7 if up else 0.3) if task == "T0" else (0.3 if up else 0.7)


def sparse(task: str, lv: dict) -> float:
    """A small effect whose paired differences are rare: xml costs 3 pp."""
    return 0.97 if lv.get("tool_style") == "xml" else 1.0


def null(task: str, lv: dict) -> float:
    return 0.5


def truth(space: HarnessSpace, p: P, tasks: list[str], points: list | None = None) -> dict:
    """Effect-coded main effects of ``p``: over the full factorial, or over ``points``' levels of
    the other factors for flips (averaged over the bases, see flip_truth)."""
    grid = pd.DataFrame([space.levels_of(h) for h in space])
    grid["p"] = [np.mean([p(t, r) for t in tasks]) for r in grid.to_dict("records")]
    out = {}
    for f in space.factor_names:
        means = grid.groupby(f)["p"].mean()
        for level, value in means.items():
            out[(f, level)] = float(value - means.mean())
    return out


def flip_truth(space: HarnessSpace, p: P, tasks: list[str], bases: list) -> dict:
    out = {}
    for f in space.factor_names:
        levels = [lv for lv in next(x for x in space.factors if x.name == f).level_names]
        per = []
        for h in bases:
            lv0 = space.levels_of(h)
            probs = {lv: np.mean([p(t, {**lv0, f: lv}) for t in tasks]) for lv in levels}
            mean = np.mean(list(probs.values()))
            per.append({lv: v - mean for lv, v in probs.items()})
        for lv in levels:
            out[(f, lv)] = float(np.mean([b[lv] for b in per]))
    return out


def simulate(
    space: HarnessSpace, points: list, p: P, tasks: int, seeds: int, rng: np.random.Generator, shared: bool
) -> pd.DataFrame:
    """Rows of a sweep: ``shared`` gives one coin per (task, seed) seen by every harness (a real
    agent on one task instance); otherwise an independent coin per cell."""
    levels = [space.levels_of(h) for h in points]
    records = []
    for t in range(tasks):
        task = f"T{t}"
        probs = np.array([p(task, lv) for lv in levels])
        for s in range(seeds):
            u = np.full(len(points), rng.random()) if shared else rng.random(len(points))
            for i, lv in enumerate(levels):
                records.append(
                    {
                        "agent": "x",
                        "task_id": task,
                        "seed": s,
                        "harness_name": f"h{i:03d}",
                        "error": None,
                        "success": float(u[i] < probs[i]),
                        **{f"level_{f}": v for f, v in lv.items()},
                    }
                )
    return pd.DataFrame(records)


def levels_of(space: HarnessSpace) -> dict:
    return {f.name: list(f.level_names) for f in space.factors}


def design(space: HarnessSpace, kind: str, seed: int) -> tuple[list, dict | None, list]:
    """Points, the flips record (or None) and the base points of a design of ``space``."""
    if kind == "balanced":
        return space.balanced(2, seed=seed), None, []
    if kind == "covering":
        return space.covering(2, seed=seed), None, []
    if kind == "foldover":
        counts = [len(f.levels) for f in space.factors]
        return space.points(clear_design(counts, seed)), None, []
    base = space.balanced_design(2, max_points=int(kind.split(":")[1]), seed=seed)
    d = space.flips(base, "all")
    points = space.points(d)
    names = [f"h{i:03d}" for i in range(len(points))]
    record = {"flips": [[names[b], names[g], space.factor_names[c]] for b, g, c in d.flips]}
    return points, record, space.points(base)


def run(space, kind, p, seed, tasks=2, seeds=10, shared=False):  # noqa: ANN001, ANN201
    points, record, bases = design(space, kind, seed)
    rng = np.random.default_rng([seed, tasks, seeds, int(shared)])
    rows = simulate(space, points, p, tasks, seeds, rng, shared)
    effects = factor_effects(rows, list(space.factor_names), design=record, levels=levels_of(space))
    names = [f"T{t}" for t in range(tasks)]
    true = flip_truth(space, p, names, bases) if record else truth(space, p, names)
    return effects, true


def coverage(space, kind, p, reps, **kw) -> tuple[float, int, float]:  # noqa: ANN001
    """(share of printed intervals that cover the truth, how many, share of sweeps with a
    Holm-significant effect of a factor whose true effect is zero)."""
    hit = total = false_sweeps = 0
    coverage.possible = 0  # type: ignore[attr-defined]
    for seed in range(reps):
        effects, true = run(space, kind, p, seed, **kw)
        coverage.possible += len(effects.table)  # type: ignore[attr-defined]
        t = effects.table[effects.table["effect_low"].notna()]
        inside = [
            lo - 1e-9 <= true[(f, lv)] <= hi + 1e-9
            for f, lv, lo, hi in zip(t["factor"], t["level"], t["effect_low"], t["effect_high"])
        ]
        hit += sum(inside)
        total += len(inside)
        zero = [abs(true[(f, lv)]) < 1e-12 for f, lv in zip(t["factor"], t["level"])]
        false_sweeps += bool((t["significant"].to_numpy() & np.array(zero, dtype=bool)).any())
    return hit / max(total, 1), total, false_sweeps / reps


# -- fast versions (default suite) -------------------------------------------------------------


def test_cluster_t_is_exact_when_no_cluster_disagrees() -> None:
    """20 clusters, all equal: the interval is the exact bound, not [c, c]."""
    theta = np.zeros((20, 1))
    est = cluster_t(theta, np.zeros(1), (np.array([-0.5]), np.array([0.5])))
    q = 1 - 0.025 ** (1 / 20)
    assert est.low[0] == pytest.approx(-0.5 * q) and est.high[0] == pytest.approx(0.5 * q)
    assert est.p[0] == 1.0
    one = cluster_t(np.zeros((1, 1)), np.zeros(1), (np.array([-1.0]), np.array([1.0])))
    assert np.isnan(one.low[0]) and one.clusters == 1


def test_holm_matches_a_hand_computation() -> None:
    assert holm([0.01, 0.04, 0.03, float("nan")])[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert np.isnan(holm([0.01, float("nan")])[1])


def test_sparse_disagreements_keep_their_coverage() -> None:
    """xml costs 3 pp and most clusters never see a difference: the old bootstrap printed
    [0, 0]; these intervals cover the truth."""
    share, total, _ = coverage(BINARY, "flips:6", sparse, reps=6, tasks=2, seeds=10, shared=True)
    assert total and share >= 0.9


def test_latin_square_interaction_is_flagged_and_aliased_factors_get_no_interval() -> None:
    effects, _ = run(LATIN, "balanced", xml_and_yaml, 0, tasks=2, seeds=30)
    fit = effects.fit.iloc[0]
    assert not fit["fits"]
    withheld = effects.table[effects.table["effect_low"].isna()]
    assert "tool_naming" in set(withheld["factor"])  # which the agent never reads
    warned = " ".join(effects.warnings)
    assert "tool_naming is aliased with obs_format x tool_style" in warned
    assert not (effects.table["note"].str.contains("aliased") & effects.table["effect_low"].notna()).any()
    # a main-effects agent on the same design: the model fits, and the effects it prints are
    # those of "main effect or interaction" where the Latin square aliases them completely
    plain, _ = run(LATIN, "balanced", xml_only, 0, tasks=2, seeds=30)
    assert bool(plain.fit["fits"].iloc[0])
    t = plain.table
    # 9 runs, 7 parameters: every cell interaction moves a main effect by more than half of what
    # the 2 residual degrees of freedom see of it, so no main-effect interval is printed
    assert t["effect_low"].isna().all() and t["note"].str.contains("partially aliased with").all()
    assert not t["significant"].any()


def test_foldover_keeps_main_effects_clear_of_the_interaction() -> None:
    counts = [2] * 5
    assert interaction_aliasing(orthogonal_array(counts).rows, counts) > 0.5
    assert interaction_aliasing(clear_design(counts).rows, counts) < 1e-9
    assert interaction_aliasing(clear_design([3, 3, 3]).rows, [3, 3, 3]) < 1e-9
    share, total, false = coverage(BINARY, "foldover", xml_and_yaml, reps=4, tasks=2, seeds=15)
    assert total == 4 * 10 and share >= 0.9  # nothing withheld: no main effect moves with it


def test_effects_that_cancel_across_tasks_are_reported_per_task() -> None:
    effects, true = run(BINARY, "foldover", cancelling, 0, tasks=2, seeds=20, shared=False)
    assert abs(true[("parser", "lenient")]) < 1e-12
    het = effects.heterogeneity.set_index("factor")
    assert het.loc["parser", "heterogeneous"]
    task = effects.by_task[(effects.by_task["factor"] == "parser") & effects.by_task["significant"]]
    assert set(task["task_id"]) == {"T0", "T1"}
    assert "parser" not in effects.no_effect.get("x", [])


def test_flips_from_two_bases_name_the_levels_they_never_meet() -> None:
    effects, _ = run(MIXED, "flips:2", xml_only, 0, tasks=2, seeds=10)
    assert "obs_format" in effects.unmet and len(effects.unmet["obs_format"]) == 4


def test_null_agents_show_no_significant_effect() -> None:
    for shared in (False, True):
        _, _, false = coverage(MIXED, "balanced", null, reps=10, tasks=2, seeds=10, shared=shared)
        assert false <= 0.1


def test_few_clusters_withhold_intervals_below_two() -> None:
    effects, _ = run(BINARY, "balanced", xml_only, 0, tasks=1, seeds=1)
    assert effects.table["effect_low"].isna().all()
    assert effects.table["note"].str.contains("needs at least 2").all()


def test_design_seed_redraws_covering_and_balanced_designs_and_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "space.yaml"
    MIXED.save(path)
    for subset in ("covering", "balanced:10"):
        a = SweepSpec.build("random", tasks=["ClickButton"], space=str(path), subset=subset, seeds=1)
        b = SweepSpec.build(
            "random", tasks=["ClickButton"], space=str(path), subset=subset, seeds=1, design_seed=3
        )
        assert [p.harness.id for p in a.harnesses] != [p.harness.id for p in b.harnesses], subset
        assert b.to_dict()["design_seed"] == 3 and b.to_dict()["design"]["seed"] == 3
        assert a.id != b.id
    with pytest.raises(SweepError, match="design seed"):
        SweepSpec.build("random", tasks=["ClickButton"], space=str(path), design_seed=-1)


def test_cli_sweep_names_the_aliased_factors_and_prints_no_interval_for_them(tmp_path: Path) -> None:
    """End to end: a scripted agent that fails only when tool_style = xml AND obs_format = yaml,
    swept through ``harness-gym sweep`` on the Latin square; the report names the aliasing and
    draws no interval for those factors."""
    from harness_gym.cli import main

    space = tmp_path / "latin space.yaml"
    LATIN.save(space)
    agent = tmp_path / "agents.py"
    agent.write_text(
        textwrap.dedent(
            """
            import zlib
            import numpy as np
            from harness_gym.core.env import unwrap_harness_env
            from harness_gym.core.space import level_name

            class Interaction:
                def __init__(self, env):
                    self.env = unwrap_harness_env(env, "Interaction")
                    self.seed = 0
                def reset(self, seed=None):
                    self.seed = int(seed or 0)
                def act(self, observation, info):
                    spec = info["harness"]
                    style, fmt = level_name(spec.get("tool_style")), level_name(spec.get("obs_format"))
                    bad = style == "xml" and fmt == "yaml"
                    ids = (info["task_id"], info["harness_id"])
                    key = [zlib.crc32(ids[0].encode()), self.seed, zlib.crc32(ids[1].encode())]
                    u = np.random.default_rng(key).random()
                    return self.env.oracle_action() if u < (0.1 if bad else 0.8) else "<<not an action>>"

            def interaction(env):
                return Interaction(env)
            """
        )
    )
    out = tmp_path / "sweep"
    code = main(
        [
            "sweep", "--agent", f"{agent}:interaction", "--tasks", "ClickButton", "ClickLink",
            "--space", str(space), "--subset", "balanced", "--seeds", "12", "--design-seed", "1",
            "--workers", "0", "--no-ceiling", "--quiet", "--out", str(out), "--report",
        ]
    )  # fmt: skip
    assert code == 0
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["design_seed"] == 1 and meta["design"]["seed"] == 1
    table = pd.read_csv(out / "report" / "marginal_effects.csv")
    naming = table[table["factor"] == "tool_naming"]
    assert naming["effect_low"].isna().all() and naming["note"].str.contains("aliased with").all()
    text = (out / "report" / "report.md").read_text()
    assert "does not fit" in text and "tool_naming is aliased with obs_format x tool_style" in text
    assert "confounded with two-factor interactions" not in text


# -- slow: coverage and error rates over many design seeds -------------------------------------

SLOW_CASES = [
    # (space, design, agent, tasks, seeds, shared coin)
    (MIXED, "balanced", xml_only, 2, 10, False),
    (MIXED, "covering", xml_only, 2, 10, True),
    (MIXED, "flips:6", xml_only, 2, 10, True),
    (MIXED, "flips:2", xml_only, 2, 10, False),
    (LATIN, "balanced", xml_and_yaml, 2, 10, False),
    (MIXED, "covering", xml_and_yaml, 2, 10, False),
    (BINARY, "foldover", xml_and_yaml, 2, 10, False),
    (BINARY, "flips:6", sparse, 2, 10, True),
    (BINARY, "balanced", sparse, 2, 10, False),
    (BINARY, "balanced", cancelling, 2, 10, False),
    (BINARY, "balanced", xml_only, 1, 3, False),  # 3 clusters
    (BINARY, "flips:6", xml_only, 2, 3, True),  # 6 clusters, as the demo's language-model sweep
    (MIXED, "balanced", null, 2, 10, False),
    (MIXED, "balanced", null, 2, 10, True),
    (MIXED, "flips:6", null, 2, 10, False),
    (MIXED, "flips:6", xml_and_yaml, 2, 10, False),
    (MIXED, "flips:2", xml_and_yaml, 2, 10, False),
    (MIXED, "covering", cancelling, 2, 10, True),
    (BINARY, "flips:6", cancelling, 2, 10, False),
    (MIXED, "covering", null, 2, 10, False),
    (BINARY, "flips:1", xml_only, 2, 3, False),  # the demo's language-model sweep: 1 base, 6 clusters
]


RESOLUTION_III_INTERACTIONS = [(LATIN, "balanced", xml_and_yaml), (MIXED, "covering", xml_and_yaml)]


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW_CASES, ids=lambda c: f"{c[1]}-{c[2].__name__}-{c[3] * c[4]}cl-{c[5]}")
def test_coverage_and_false_positives_over_many_design_seeds(case) -> None:  # noqa: ANN001
    space, kind, p, tasks, seeds, shared = case
    share, total, false = coverage(space, kind, p, reps=100, tasks=tasks, seeds=seeds, shared=shared)
    printed = total / coverage.possible  # type: ignore[attr-defined]
    print(
        f"{kind} {p.__name__} clusters={tasks * seeds} shared={shared}: coverage {share:.3f} of {total} "
        f"printed intervals ({printed:.1%} of all), false-positive sweeps {false:.3f}"
    )
    assert false <= 0.10
    if (space, kind, p) in RESOLUTION_III_INTERACTIONS:
        # Known limit: when the lack-of-fit check misses the interaction (rare at this size) the
        # aliased intervals it lets through are biased; the check withholds almost all of them.
        assert printed <= 0.10 and (total == 0 or share >= 0.7)
    else:
        assert total > 0 and share >= 0.90


def test_report_lists_only_holm_significant_effects_and_flags_cancelling_tasks() -> None:
    from harness_gym.analysis.report_effects import _effects_text, _top_effects

    quiet, _ = run(MIXED, "balanced", null, 0, tasks=2, seeds=10, shared=True)
    assert len(_top_effects(quiet.table)) == 0
    said = " ".join(_effects_text(quiet, None))  # one coin per instance: no harness ever differs
    assert "every task instance gives exactly zero effect of " in said
    both, _ = run(BINARY, "foldover", cancelling, 0, tasks=2, seeds=20)
    text = " ".join(_effects_text(both, None))
    assert "Effects that differ by task" in text and "`x` parser" in text
    assert "does not matter" not in text
    assert "parser" not in text.split("no detectable effect")[-1].split(".")[0]


@pytest.mark.parametrize("value", ["-1", "x"])
def test_cli_rejects_a_bad_design_seed(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from harness_gym.cli import main

    with pytest.raises(SystemExit) as info:
        main(["sweep", "--agent", "random", "--design-seed", value, "--out", "unused"])
    assert info.value.code == 2
    assert "--design-seed" in capsys.readouterr().err
