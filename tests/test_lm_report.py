# ruff: noqa: F811  (the stand-in fixture is imported by name)
"""The report's language-model section against agents whose true answer is known by construction.

The statistics (tokens per episode, rates, tokens per success, the deploy answer) are checked
over many simulated sweeps of scripted agents with known success rates and token counts: 95%
intervals cover the truth about 95% of the time, equal harnesses are called a tie, and a
clearly better one is named. One real sweep end to end: an ``openai:`` agent whose scripted
server (the stand-in of tests/test_llm_faults.py) solves the native channel 90% of the time and
truncates text-channel replies, so the report must name native, flag the truncation, and count
exactly the tokens the server reported.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_llm_faults import StandIn, _send, completion_body, stand_in  # noqa: F401

from harness_gym.analysis.lm_report import deploy_table, deploy_text, lm_summary, summarize
from harness_gym.analysis.report import build_report
from harness_gym.analysis.stats import ratio_ci
from harness_gym.analysis.sweep import SweepSpec, load_rows, run_sweep
from harness_gym.core.space import HarnessSpace

# -- scripted agents with known answers ----------------------------------------------------------


def scripted_rows(
    rng: np.random.Generator,
    success: dict[str, float],
    seeds: int,
    tokens_per_step: float = 100.0,
    invalid: float = 0.2,
    truncate: float = 0.1,
    tasks: tuple[str, ...] = ("T1", "T2"),
) -> pd.DataFrame:
    """Rows of one LM agent over harnesses ``success`` (harness -> true success rate).

    Each episode takes 1-6 steps (uniform); each request is truncated with probability
    ``truncate`` and otherwise invalid with probability ``invalid``; prompt tokens per step are
    Poisson(``tokens_per_step``), completion tokens Poisson(10).
    """
    records = []
    for harness, p in success.items():
        for task in tasks:
            for seed in range(seeds):
                steps = int(rng.integers(1, 7))
                cut = int(rng.binomial(steps, truncate))
                bad = int(rng.binomial(steps - cut, invalid))
                records.append(
                    {
                        "agent": "openai:m",
                        "model": "m",
                        "task_id": task,
                        "harness_name": harness,
                        "level_tool_channel": harness,
                        "seed": seed,
                        "success": bool(rng.random() < p),
                        "steps": steps,
                        "llm_requests": steps,
                        "invalid_actions": bad + cut,
                        "truncated_replies": cut,
                        "prompt_tokens": int(rng.poisson(tokens_per_step, steps).sum()),
                        "completion_tokens": int(rng.poisson(10, steps).sum()),
                        "reasoning_tokens": 0,
                        "llm_latency": float(rng.exponential(0.5, steps).sum()),
                        "llm_errors": json.dumps({"truncated": cut} if cut else {}),
                        "error": None,
                    }
                )
    return pd.DataFrame.from_records(records)


def covered(value: float, low: float, high: float) -> bool:
    return low <= value <= high


# (replications, band a 95% interval's coverage must fall in): a fast run in the default suite
# (its band is wide: 60 replications), the full one under -m slow.
COVERAGE = [
    pytest.param(60, (0.85, 1.0), id="fast"),
    pytest.param(400, (0.92, 0.98), id="full", marks=pytest.mark.slow),
]
# (replications, most share of false "unique best" claims for equal harnesses allowed)
FALSE_CLAIMS = [
    pytest.param(60, 0.12, id="fast"),
    pytest.param(400, 0.065, id="full", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("reps", "band"), COVERAGE)
def test_summary_intervals_cover_the_truth_about_95_percent(reps: int, band: tuple[float, float]) -> None:
    """Success, tokens per episode, invalid and truncation rates, tokens per success."""
    rng = np.random.default_rng(0)
    p, tps, invalid, truncate = 0.6, 100.0, 0.2, 0.1
    mean_steps = 3.5
    truth = {
        "success": p,
        "prompt_tokens": tps * mean_steps,
        "invalid_rate": (1 - truncate) * invalid,
        "truncation_rate": truncate,
        "tokens_per_success": (tps + 10) * mean_steps / p,
    }
    hits = dict.fromkeys(truth, 0)
    for _ in range(reps):
        s = summarize(scripted_rows(rng, {"h": p}, seeds=40, invalid=invalid, truncate=truncate))
        for name, value in truth.items():
            hits[name] += covered(value, s[f"{name}_low"], s[f"{name}_high"])
    rates = {k: v / reps for k, v in hits.items()}
    assert all(band[0] <= r <= band[1] for r in rates.values()), rates


@pytest.mark.parametrize("rate", [False, True])
@pytest.mark.parametrize(("reps", "band"), [(300, (0.91, 0.985)), *COVERAGE[1:]])
def test_ratio_ci_covers_about_95_percent_with_clusters(
    rate: bool, reps: int, band: tuple[float, float]
) -> None:
    """Clustered units (four per cluster sharing a cluster effect): the interval still covers."""
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(reps):
        effect = np.repeat(rng.uniform(0.05, 0.45, 30), 4)  # each cluster's own rate
        den = rng.integers(1, 8, effect.size).astype(float)
        num = rng.binomial(den.astype(int), effect) if rate else rng.poisson(den * 10 * effect)
        truth = 0.25 if rate else 2.5  # E[effect] (x 10)
        _, low, high = ratio_ci(num, den, clusters=np.repeat(np.arange(30), 4), rate=rate)
        hits += covered(truth, low, high)
    assert band[0] <= hits / reps <= band[1], hits / reps


def test_ratio_ci_edges() -> None:
    assert all(np.isnan(ratio_ci([1, 2], [0, 0])))
    value, low, high = ratio_ci([0, 0, 0], [5, 5, 5], rate=True)
    assert value == 0 and low == 0 and 0 < high < 1  # a floor, not a point
    assert np.isnan(ratio_ci([3], [4])[1])  # one cluster: no interval
    with pytest.raises(ValueError, match="one denominator per numerator"):
        ratio_ci([1, 2], [1])


def _verdicts(rows: pd.DataFrame) -> dict[str, str]:
    d = deploy_table(rows)
    return dict(zip(d["harness"], d["verdict"]))


@pytest.mark.parametrize(("reps", "most"), FALSE_CLAIMS)
def test_equal_harnesses_are_a_tie_and_a_worse_one_is_named(reps: int, most: float) -> None:
    rng = np.random.default_rng(2)
    unique_winner, c_worse = 0, 0
    for _ in range(reps):
        verdicts = _verdicts(scripted_rows(rng, {"A": 0.7, "B": 0.7, "C": 0.35}, seeds=60))
        unique_winner += "tied" not in (verdicts["A"], verdicts["B"])
        c_worse += verdicts["C"] == "worse"
    assert unique_winner / reps <= most, unique_winner / reps  # a false "A beats B"
    assert c_worse / reps >= 0.95, c_worse / reps  # 35 pp on 120 instances: found


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize(("reps", "most"), FALSE_CLAIMS)
def test_a_unique_best_is_claimed_falsely_at_most_5_percent(k: int, reps: int, most: float) -> None:
    rng = np.random.default_rng(3 + k)
    claims = 0
    for _ in range(reps):
        verdicts = _verdicts(scripted_rows(rng, {f"h{i}": 0.5 for i in range(k)}, seeds=40))
        claims += "tied" not in verdicts.values()
    assert claims / reps <= most, claims / reps


def test_deploy_text_says_ties_as_ties_and_names_a_clear_winner() -> None:
    rng = np.random.default_rng(4)
    tie = deploy_text(deploy_table(scripted_rows(rng, {"A": 0.5, "B": 0.5}, seeds=30)))
    assert len(tie) == 1 and "a tie" in tie[0] and "cannot be told apart" in tie[0]
    clear = deploy_text(deploy_table(scripted_rows(rng, {"A": 0.9, "B": 0.2}, seeds=50)))
    assert re.search(r"deploy under `A`.*beats every other harness.*`B`, by \+\d", clear[0]), clear
    none = deploy_text(deploy_table(scripted_rows(rng, {"A": 0.0, "B": 0.0}, seeds=5)))
    assert "no harness succeeded" in none[0]


def test_outage_rows_are_left_out() -> None:
    rng = np.random.default_rng(5)
    rows = scripted_rows(rng, {"A": 0.5}, seeds=20)
    lost = rows.iloc[:5].copy()
    lost["error"] = "LLMBackendError: 1 of 1 model requests got no reply (cannot reach ...)"
    lost["success"] = False
    both = pd.concat([rows, lost], ignore_index=True)
    assert lm_summary(both)["episodes"].tolist() == [len(rows)]


# -- one sweep end to end, through a scripted server -------------------------------------------


def _scripted_model(handler, request: dict) -> None:
    """Native channel: the right click 90% of the time (by the request seed); text channel: a
    reply cut inside a tool-call block. Usage: 11 prompt + 7 completion tokens per request."""
    observation = json.loads(request["messages"][-1]["content"])
    target = re.search(r'"(.+?)" button', observation["instruction"]).group(1)
    ref = next(c["ref"] for c in observation["page"][0]["children"] if c.get("text") == target)
    right = int(hashlib.sha256(str(request["seed"]).encode()).hexdigest(), 16) % 10 < 9
    call = {"name": "click", "arguments": json.dumps({"ref": ref if right else 99})}
    if request.get("tools"):
        body = completion_body(None, [call], "tool_calls")
    else:
        body = completion_body('<tool_call>\n{"name": "click", "arg', None, "length")
    _send(handler, 200, json.dumps(body).encode(), {"Content-Type": "application/json"})


def test_report_names_the_better_harness_and_flags_truncation(stand_in: StandIn, tmp_path: Path) -> None:
    stand_in.default = _scripted_model
    space = HarnessSpace({"tool_channel": ["text", "native"]})
    agent = f"openai:stand-in@{stand_in.base_url}?cache=off&retries=0"
    spec = SweepSpec.build([agent], tasks=["ClickButton"], space=space, subset="all", seeds=30, ceiling=False)
    run_sweep(spec, tmp_path / "sweep", workers=0, progress=False)
    report = build_report(tmp_path / "sweep")
    md = report.markdown.read_text()
    assert "## Language-model agents" in md
    deploy = pd.read_csv(report.tables["lm_deploy.csv"])
    assert deploy.iloc[0]["levels"] == "tool_channel=native" and deploy.iloc[0]["verdict"] == "best"
    assert deploy.iloc[1]["verdict"] == "worse" and deploy.iloc[1]["truncation_rate"] == 1.0
    assert re.search(r"deploy under `h\d+` \(tool_channel=native\)", md)
    assert "were cut at max_tokens" in md and "most under tool_channel=text (100.0% of its replies)" in md
    rows = load_rows(tmp_path / "sweep")
    summary = pd.read_csv(report.tables["lm_summary.csv"])
    episodes = len(rows)
    assert summary.loc[0, "prompt_tokens"] == pytest.approx(11 * rows["llm_requests"].sum() / episodes)
    assert summary.loc[0, "completion_tokens"] == pytest.approx(7 * rows["llm_requests"].sum() / episodes)
    text_rows = rows[rows["level_tool_channel"] == "text"]
    assert (text_rows["truncated_replies"] == text_rows["llm_requests"]).all()
    assert (text_rows["invalid_actions"] == text_rows["truncated_replies"]).all()
    assert set(rows["server_version"]) == {"unknown"}  # the stand-in has no GET /version
    factor = pd.read_csv(report.tables["lm_by_factor.csv"])
    native = factor[factor["level"] == "native"].iloc[0]
    assert native["invalid_rate"] == pytest.approx(
        rows[rows["level_tool_channel"] == "native"]["invalid_actions"].sum()
        / rows[rows["level_tool_channel"] == "native"]["steps"].sum()
    )


def test_no_section_without_language_model_rows() -> None:
    from harness_gym.analysis.lm_report import lm_section

    rows = scripted_rows(np.random.default_rng(6), {"A": 0.5}, seeds=3)
    assert lm_section(rows.assign(model=None), ["tool_channel"]) == (None, {})
    assert lm_section(rows.drop(columns=["model", "llm_requests"]), ["tool_channel"]) == (None, {})
    section, tables = lm_section(rows, ["tool_channel"])
    assert section is not None and set(tables) == {"lm_summary.csv", "lm_by_factor.csv", "lm_deploy.csv"}


def test_context_window_errors_are_named_with_their_level() -> None:
    from harness_gym.analysis.lm_report import warnings

    rows = scripted_rows(np.random.default_rng(7), {"short": 0.5, "long": 0.5}, seeds=5, truncate=0.0)
    rows.loc[rows["harness_name"] == "long", "llm_errors"] = json.dumps({"context_length": 1})
    [line] = warnings(rows, ["tool_channel"])
    assert "did not fit the model's context window" in line and "most under tool_channel=long" in line


def test_costs_stay_positive_and_every_harness_has_a_cost_per_episode() -> None:
    """Skewed token counts (one 40k-token episode among 200-token ones) and few successes gave
    'tokens per success 1,283 [-14,752, 17,318]': cost intervals are on the log scale; a harness
    where nothing succeeds still shows its tokens per episode; the model and server are named."""
    import pandas as pd

    from harness_gym.analysis.lm_report import deploy_table, lm_summary, model_identity, positive_interval

    records = []
    for harness, wins in (("good", {0, 3}), ("never", set())):
        for seed in range(6):
            records.append(
                {
                    "agent": "lm", "task_id": "T", "seed": seed, "harness_name": harness, "error": None,
                    "success": float(seed in wins), "model": "tiny", "model_identity": "sha256:abc",
                    "server_version": "0.6.1", "llm_requests": 3, "steps": 3, "invalid_actions": 0,
                    "truncated_replies": 0, "prompt_tokens": 40000 if seed == 5 else 200,
                    "completion_tokens": 20, "llm_latency": 0.1 if seed else 9.0, "level_f": harness,
                }
            )  # fmt: skip
    rows = pd.DataFrame(records)
    summary = lm_summary(rows).iloc[0]
    for m in ("tokens_per_success", "latency_s", "prompt_tokens", "tokens_per_episode"):
        assert 0 < summary[f"{m}_low"] <= summary[m] <= summary[f"{m}_high"], m
    deploy = deploy_table(rows).set_index("harness")
    never = deploy.loc["never"]
    assert never["tokens_per_success"] != never["tokens_per_success"]  # no success: no ratio
    assert (
        0
        < never["tokens_per_episode_low"]
        <= never["tokens_per_episode"]
        == pytest.approx((5 * 220 + 40020) / 6)
    )
    assert positive_interval(10.0, -5.0, 25.0) == pytest.approx(
        (10.0, 10.0 * np.exp(-1.5), 10.0 * np.exp(1.5))
    )
    said = " ".join(model_identity(rows))
    assert "`tiny`" in said and "sha256:abc" in said and "0.6.1" in said
