"""Ceilings by exact search, and preference recovery against exact action values."""

from __future__ import annotations

import numpy as np
import pytest

from harness_gym import Harness, make_env
from harness_gym.analysis.ceiling import ceiling, seed_ceiling
from harness_gym.analysis.preferences import (
    SoftOptimalPolicy,
    UniformPolicy,
    collect_states,
    recover_preferences,
    soft_optimal_log_probs,
)
from harness_gym.analysis.stats import mcnemar_exact, mean_ci, wilson


@pytest.mark.parametrize("budget", [1, 2, 3, 4, 5])
def test_click_checkboxes_ceiling_equals_the_hand_count(budget: int) -> None:
    """Each wanted box takes one click and Submit one more: success iff that fits the budget."""
    for seed in range(12):
        env = make_env("ClickCheckboxes")
        env.reset(seed=seed)
        needed = len(env.task.wanted) + 1
        value, method = seed_ceiling("ClickCheckboxes", Harness(step_budget=budget), seed)
        assert method == "exact"
        assert value == float(needed <= budget), (seed, needed, budget)


def test_single_and_two_step_tasks() -> None:
    assert ceiling("ClickButton", Harness(step_budget=1), range(10)).values == [1.0] * 10
    assert ceiling("EnterText", Harness(step_budget=1), range(10)).values == [0.0] * 10
    assert ceiling("EnterText", Harness(step_budget=2), range(10)).values == [1.0] * 10


@pytest.mark.parametrize(
    ("task", "tool"),
    [("EnterText", "type"), ("LoginUser", "type"), ("ClickButton", "click"), ("ChooseList", "select")],
)
def test_dropping_a_needed_tool_lowers_the_ceiling(task: str, tool: str) -> None:
    full = ceiling(task, "Json", range(10))
    dropped = ceiling(task, Harness(drop_tools=(tool,)), range(10))
    assert full.mean == 1.0 and full.exact
    assert dropped.mean < full.mean
    assert dropped.high < 1.0 or dropped.mean <= 0.5


def test_presentation_does_not_move_the_ceiling() -> None:
    for preset in ("BundleMarkdown", "BundleXml", "BundleYaml", "BundleHtml"):
        assert ceiling("NavigateTree", preset, range(8)).mean == 1.0


def test_interval_is_wilson_for_success_rates() -> None:
    est = ceiling("ClickCheckboxes", Harness(step_budget=2), range(20))
    k = sum(est.values)
    assert (est.low, est.high) == pytest.approx(wilson(k, 20))
    assert est.low <= est.mean <= est.high
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    mean, low, high = mean_ci([0.5, 1.5, 1.0, 2.0])
    assert low < mean < high


def test_search_too_big_falls_back_to_the_oracle() -> None:
    # Without the type tool success is out of reach, so the search must be exhaustive.
    value, method = seed_ceiling("EnterText", Harness(drop_tools=("type",)), seed=1, node_limit=3)
    assert (value, method) == (0.0, "oracle")
    assert seed_ceiling("EnterText", Harness(drop_tools=("type",)), seed=1) == (0.0, "exact")


def test_soft_optimal_policy_recovers_exact_preferences() -> None:
    """The identity of DESIGN.md, checked on the exact KL-regularized optimum."""
    beta = 0.3
    states = collect_states("EnterText", Harness(step_budget=3), range(30))
    assert len(states) > 10 and any(len(set(s.q)) > 1 for s in states)
    reference = UniformPolicy()
    recovered = recover_preferences(SoftOptimalPolicy(reference, states, beta), reference, states, beta)
    np.testing.assert_allclose(recovered.implied, recovered.exact, atol=1e-9)
    assert recovered.pearson == pytest.approx(1.0) and recovered.sign_agreement == 1.0


def test_preferences_change_with_the_harness() -> None:
    """An optimum under a tight budget disagrees with the action values of a loose one."""
    beta = 0.3
    tight = collect_states("EnterText", Harness(step_budget=2), range(40))
    loose = collect_states("EnterText", Harness(step_budget=6), range(40))
    reference = UniformPolicy()
    tight_policy = SoftOptimalPolicy(reference, tight, beta)
    shared = [s for s in loose if (s.observation, s.texts) in tight_policy._q]
    assert len(shared) > 10
    own = recover_preferences(tight_policy, reference, tight, beta)
    other = recover_preferences(tight_policy, reference, shared, beta)
    assert own.pearson > 0.99 and other.pearson < 0.8


def test_soft_optimal_is_normalized() -> None:
    logp = soft_optimal_log_probs(np.log([0.2, 0.3, 0.5]), np.array([1.0, 0.0, 0.0]), beta=0.5)
    assert np.exp(logp).sum() == pytest.approx(1.0)
    assert logp[0] - logp[1] - (np.log(0.2) - np.log(0.3)) == pytest.approx(2.0)


def test_soft_values_approach_hard_values_as_beta_shrinks() -> None:
    hard = collect_states("EnterText", Harness(step_budget=4), range(12), max_prefix=1)
    for beta, tolerance in ((0.5, 1.0), (0.01, 0.05)):
        soft = collect_states("EnterText", Harness(step_budget=4), range(12), max_prefix=1, soft_beta=beta)
        assert [s.texts for s in soft] == [s.texts for s in hard]
        gap = max(float(np.max(np.abs(s.q - h.q))) for s, h in zip(soft, hard, strict=True))
        assert gap <= tolerance
        assert all(np.all(s.q <= h.q + 1e-12) for s, h in zip(soft, hard, strict=True))


def test_identity_is_exact_with_soft_values_in_a_multi_step_task() -> None:
    beta = 0.1
    harness = Harness(step_budget=5)
    states = collect_states("ClickCheckboxes", harness, range(20), max_prefix=2, soft_beta=beta)
    reference = UniformPolicy()
    recovered = recover_preferences(SoftOptimalPolicy(reference, states, beta), reference, states, beta)
    np.testing.assert_allclose(recovered.implied, recovered.exact, atol=1e-9)


def test_a_harness_that_can_write_no_action_has_ceiling_zero() -> None:
    """JSON calls are longer than 16 characters: no policy can act, and the search knows it."""
    harness = Harness(max_action_chars=16)
    est = ceiling("ClickButton", harness, range(6))
    assert est.values == [0.0] * 6 and est.exact
    env = make_env("ClickButton", harness)
    _, info = env.reset(seed=0)
    assert info["legal_actions"] == [] and env.oracle_action() == ""
    _, reward, *_ = env.step('{"name": "click", "arguments": {"ref": 2}}')
    assert reward == 0.0
    # The same limit in a terser style leaves every action expressible.
    assert ceiling("ClickButton", Harness(tool_style="command", max_action_chars=16), range(6)).mean == 1.0


def test_a_harness_that_can_write_some_actions_has_the_ceiling_of_those() -> None:
    """Python calls: click(ref=2) fits in 16 characters, type(ref=3, text='...') does not."""
    assert ceiling("ClickButton", Harness(tool_style="python", max_action_chars=16), range(6)).mean == 1.0
    assert ceiling("EnterText", Harness(tool_style="python", max_action_chars=16), range(6)).mean == 0.0
    # At 24 characters the typed word decides, seed by seed, and the oracle agrees.
    harness = Harness(tool_style="python", max_action_chars=24)
    values = []
    for seed in range(12):
        env = make_env("EnterText", harness)
        env.reset(seed=seed)
        oracle_text = make_env("EnterText", Harness(tool_style="python")).format_action(env.task.oracle())
        value, method = seed_ceiling("EnterText", harness, seed)
        assert method == "exact"
        assert value == float(len(oracle_text) <= 24), (seed, oracle_text)
        values.append(value)
    assert 0.0 < sum(values) < len(values)


def test_the_checker_agrees_with_the_ceiling_on_inexpressible_actions() -> None:
    from harness_gym.core.checker import check_harness

    for harness, expected in [
        (Harness(max_action_chars=16), 0.0),
        (Harness(tool_style="python", max_action_chars=16), 0.0),
    ]:
        report = check_harness(harness, "EnterText", seeds=range(3))
        assert report.ok and report.checks["inexpressible"] > 0
        assert "oracle" not in report.checks  # no longer pure presentation
        assert "max_action_chars=16" in str(report)
        assert ceiling("EnterText", harness, range(3)).mean == expected
    report = check_harness(Harness(tool_style="command", max_action_chars=16), "EnterText", seeds=range(3))
    assert report.ok and "inexpressible" not in report.checks and report.checks["oracle"] == 3


def test_mcnemar_exact_is_a_sign_test_on_discordant_pairs() -> None:
    assert mcnemar_exact(0, 0) == 1.0  # no discordant pair: no evidence
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)  # 2 * (1/2)^5
    assert mcnemar_exact(0, 5) == mcnemar_exact(5, 0)
    assert mcnemar_exact(6, 1) == pytest.approx(2 * (1 + 7) / 128)
    # Simulated pairs where the two conditions are the same coin: p >= 0.05 about 95% of the time.
    rng = np.random.default_rng(0)
    rejections = 0
    for _ in range(400):
        first, second = rng.random(30) < 0.4, rng.random(30) < 0.4
        rejections += mcnemar_exact(int((first & ~second).sum()), int((second & ~first).sum())) < 0.05
    assert rejections / 400 <= 0.07
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)
