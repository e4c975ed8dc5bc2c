"""The torch text policy: scores, log-probabilities, KL, grouping, GRPO training, persistence."""

from __future__ import annotations

import copy
import io
import json

import numpy as np
import pytest
import torch

from harness_gym import PRESETS, make_env  # noqa: E402
from harness_gym.baselines.agents import RandomAgent  # noqa: E402
from harness_gym.baselines.text_policy import (  # noqa: E402
    TextPolicy,
    TextPolicyAgent,
    TextPolicyConfig,
    TextPolicyGRPOConfig,
    TextPolicyGRPOTrainer,
    collate,
    group_advantages,
    kl_to_reference,
    make_groups,
    masked_log_softmax,
    play,
    success_rate,
)
from harness_gym.cli import build_parser, train
from harness_gym.cli import evaluate as evaluate_verb
from harness_gym.rollout import evaluate, run_episode  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = TextPolicyConfig(dim=16, hidden=16, dilations=(1, 2))


def states(task: str = "EnterText", preset: str = "Json", n: int = 6) -> list[tuple[str, list[str]]]:
    env = make_env(task, preset)
    out = []
    for seed in range(n):
        obs, info = env.reset(seed=seed)
        out.append((obs, info["legal_actions"]))
    return out


# -- log-probabilities ------------------------------------------------------------------------


def test_untrained_policy_is_uniform_and_log_probs_normalize() -> None:
    torch.manual_seed(0)
    policy = TextPolicy(SMALL)
    for obs, legal in states("ClickButton", "BundleMarkdown"):
        logp = policy.log_probs(obs, legal)
        assert logp.shape == (len(legal),) and logp.dtype == np.float64
        np.testing.assert_allclose(logp, -np.log(len(legal)), atol=1e-6)
    perturb(policy)
    obs, legal = states("ClickButton", "BundleMarkdown")[0]
    logp = policy.log_probs(obs, legal)
    assert np.exp(logp).sum() == pytest.approx(1.0, abs=1e-6)
    assert logp.std() > 1e-4


def test_log_probs_do_not_depend_on_batch_padding() -> None:
    """A state scored alone equals the same state scored next to longer ones."""
    torch.manual_seed(1)
    policy = perturb(TextPolicy(SMALL))
    batch = (
        states("EnterText", "Json", 2)
        + states("ClickCheckboxes", "BundleXml", 2)
        + states("BookFlight", "BundleHtml", 1)
    )
    together = policy.log_probs_batch(batch)
    for (obs, legal), joint in zip(batch, together):
        np.testing.assert_allclose(policy.log_probs(obs, legal), joint, atol=1e-5)


def test_the_policy_reads_the_harness_rendering() -> None:
    """Same task instance, field order reversed: the policy's input and its scores change."""
    torch.manual_seed(2)
    policy = perturb(TextPolicy(SMALL))
    (obs_a, legal_a), (obs_b, legal_b) = (
        states("EnterText", "Json", 1)[0],
        states("EnterText", "JsonReversed", 1)[0],
    )
    assert legal_a == legal_b and obs_a != obs_b
    assert not np.allclose(policy.log_probs(obs_a, legal_a), policy.log_probs(obs_b, legal_b))


def test_bad_inputs_raise_with_a_fix() -> None:
    policy = TextPolicy(SMALL)
    with pytest.raises(TypeError, match="rendered text"):
        policy.log_probs(b"obs", ["a"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="legal_actions"):
        policy.log_probs("obs", "click 1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one legal action"):
        policy.log_probs("obs", [])


# -- KL and grouping -----------------------------------------------------------------------------


def test_kl_is_zero_for_the_reference_and_positive_otherwise() -> None:
    torch.manual_seed(3)
    policy = perturb(TextPolicy(SMALL))
    reference = copy.deepcopy(policy)
    batch = collate([policy.encode(o, a) for o, a in states("ClickCheckboxes", "Json", 8)])
    mask = batch["act_mask"]
    with torch.no_grad():
        ref_logp = masked_log_softmax(reference(batch))
        same = kl_to_reference(masked_log_softmax(policy(batch)), ref_logp, mask)
        assert same.shape == (8,) and torch.all(same.abs() < 1e-6)
        policy.head[-1].weight.add_(2.0 * torch.randn_like(policy.head[-1].weight))
        moved = kl_to_reference(masked_log_softmax(policy(batch)), ref_logp, mask)
    assert torch.all(moved > 0) and float(moved.mean()) > 1e-4


def test_kl_matches_the_definition_on_toy_distributions() -> None:
    p = torch.tensor([[0.7, 0.2, 0.1, 0.0]])
    q = torch.tensor([[1 / 3, 1 / 3, 1 / 3, 0.0]])
    mask = torch.tensor([[True, True, True, False]])
    logp, logq = torch.log(p.clamp(min=1e-30)), torch.log(q.clamp(min=1e-30))
    expected = sum(pi * np.log(pi / qi) for pi, qi in [(0.7, 1 / 3), (0.2, 1 / 3), (0.1, 1 / 3)])
    assert float(kl_to_reference(logp, logq, mask)[0]) == pytest.approx(expected, rel=1e-5)


def episodes_for_grouping() -> list[dict]:
    return [
        {"task_id": "EnterText", "seed": s, "harness_id": h, "episode_return": r}
        for s in (10, 11, 12)
        for h in ("h-json", "h-yaml")
        for r in (0.0, 1.0)
    ]


def test_within_groups_share_task_instance_and_harness() -> None:
    eps = episodes_for_grouping()
    groups = make_groups(eps, "within")
    assert len(groups) == 6 and all(len(m) == 2 for m in groups.values())
    for members in groups.values():
        assert len({(eps[i]["seed"], eps[i]["harness_id"]) for i in members}) == 1


def test_cross_groups_span_harnesses_of_one_task_instance() -> None:
    eps = episodes_for_grouping()
    groups = make_groups(eps, "cross")
    assert len(groups) == 3 and all(len(m) == 4 for m in groups.values())
    for members in groups.values():
        assert len({eps[i]["seed"] for i in members}) == 1
        assert {eps[i]["harness_id"] for i in members} == {"h-json", "h-yaml"}
    with pytest.raises(ValueError, match="grouping"):
        make_groups(eps, "global")


def test_group_advantages_are_relative_to_the_group() -> None:
    returns = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    groups = {"a": [0, 1], "b": [2, 3], "c": [4, 5]}
    adv = group_advantages(returns, groups)
    assert adv[0] > 0 > adv[1] and adv[0] == pytest.approx(-adv[1])
    assert adv[2:].tolist() == [0.0, 0.0, 0.0, 0.0]  # a group that agrees teaches nothing


def test_trainer_forms_the_groups_it_claims_to() -> None:
    """Cross grouping mixes both harnesses of a seed; within keeps them apart."""
    factories = [lambda: make_env("EnterText", "Json"), lambda: make_env("EnterText", "BundleYaml")]
    for grouping in ("within", "cross"):
        cfg = TextPolicyGRPOConfig(instances=3, group_size=2, grouping=grouping, seed=0)
        trainer = TextPolicyGRPOTrainer(TextPolicy(SMALL), factories, cfg)
        episodes = trainer.collect()
        assert len(episodes) == 3 * 2 * 2
        groups = make_groups([vars(e) for e in episodes], grouping)
        harness_ids = {PRESETS["Json"].id, PRESETS["BundleYaml"].id}
        for members in groups.values():
            seen = {episodes[i].harness_id for i in members}
            assert len({episodes[i].seed for i in members}) == 1
            if grouping == "cross":
                assert seen == harness_ids
            else:
                assert len(seen) == 1
        assert len(groups) == (3 if grouping == "cross" else 6)
    with pytest.raises(ValueError, match="same task"):
        TextPolicyGRPOTrainer(
            TextPolicy(SMALL), [lambda: make_env("EnterText"), lambda: make_env("ClickButton")]
        )


# -- training -------------------------------------------------------------------------------------


def test_text_policy_beats_random_on_a_single_step_task() -> None:
    """GRPO on ClickButton (Json): a clear margin over uniform random on 200 paired seeds."""
    torch.manual_seed(0)
    policy = TextPolicy(TextPolicyConfig(dim=32, hidden=64))
    factory = lambda: make_env("ClickButton", "Json")  # noqa: E731
    trainer = TextPolicyGRPOTrainer(
        policy, [factory], TextPolicyGRPOConfig(iterations=12, learning_rate=6e-3, seed=0)
    )
    history = trainer.train()
    assert len(history) == 12 and all(np.isfinite(row["kl"]) for row in history)
    trained = success_rate(policy, factory, range(200))
    random = np.mean([r.success for r in evaluate(factory(), RandomAgent(0), range(200))])
    assert trained >= random + 0.3, (trained, random)


def test_training_is_seeded() -> None:
    def run() -> list[float]:
        torch.manual_seed(5)
        policy = TextPolicy(SMALL)
        trainer = TextPolicyGRPOTrainer(
            policy,
            [lambda: make_env("EnterText", "Json")],
            TextPolicyGRPOConfig(instances=4, group_size=4, seed=5),
        )
        trainer.train(2)
        return policy.log_probs(*states()[0]).tolist()

    assert run() == run()


def test_play_greedy_and_agent_adapter_agree() -> None:
    torch.manual_seed(4)
    policy = perturb(TextPolicy(SMALL))
    envs = [make_env("EnterText", "BundleYaml") for _ in range(3)]
    batched = play(policy, list(zip(envs, [0, 1, 2])), greedy=True)
    agent = TextPolicyAgent(policy)
    single = [run_episode(make_env("EnterText", "BundleYaml"), agent, s) for s in (0, 1, 2)]
    assert [e.success for e in batched] == [r.success for r in single]
    assert [e.episode_return for e in batched] == [r.episode_return for r in single]
    with pytest.raises(ValueError, match="distinct env"):
        play(policy, [(envs[0], 0), (envs[0], 1)])


def test_save_and_load_keep_the_log_probs(tmp_path) -> None:  # noqa: ANN001
    torch.manual_seed(6)
    policy = perturb(TextPolicy(SMALL))
    path = policy.save(tmp_path / "p.pt", {"task_id": "EnterText"})
    loaded = TextPolicy.load(path)
    assert loaded.config == SMALL and loaded.metadata == {"task_id": "EnterText"}
    for obs, legal in states():
        np.testing.assert_array_equal(policy.log_probs(obs, legal), loaded.log_probs(obs, legal))


def test_cli_trains_saves_and_evaluates_a_text_policy(tmp_path) -> None:  # noqa: ANN001
    args = build_parser().parse_args(
        [
            "train", "--algo", "text_policy", "--env", "harness_gym/EnterText-Json-v0",
            "--env", "harness_gym/EnterText-BundleYaml-v0", "--grouping", "cross", "--iterations", "1",
            "--hyperparams", json.dumps({"instances": 2, "group_size": 2, "dim": 16, "hidden": 16}),
            "--eval-episodes", "3", "--out", str(tmp_path / "run"),
        ]
    )  # fmt: skip
    out = io.StringIO()
    assert run_verb(train.run, args, out) == 0
    assert "saved text policy (cross grouping, 2 harness(es))" in out.getvalue()
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["algo"] == "text_policy" and len(run["harnesses"]) == 2 and run["grpo"]["grouping"] == "cross"

    rows_file = tmp_path / "rows.jsonl"
    eval_args = build_parser().parse_args(
        ["eval", "--model", str(tmp_path / "run"), "--env", "harness_gym/EnterText-BundleMarkdown-v0",
         "--episodes", "3", "--out", str(rows_file)]
    )  # fmt: skip
    out = io.StringIO()
    assert run_verb(evaluate_verb.run_model_eval, eval_args, out) == 0
    assert "harness_gym/EnterText-BundleMarkdown-v0" in out.getvalue()
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert len(rows) == 3 and rows[0]["harness_id"] == PRESETS["BundleMarkdown"].id


@pytest.mark.slow
@pytest.mark.parametrize("task", ["EnterText", "ClickCheckboxes"])
def test_text_policy_learns_a_multi_step_task(task: str) -> None:
    """The budget the reproduction experiment relies on: >= 85% under one harness."""
    torch.manual_seed(0)
    policy = TextPolicy()
    factory = lambda: make_env(task, "Json")  # noqa: E731
    TextPolicyGRPOTrainer(policy, [factory], TextPolicyGRPOConfig(iterations=40, seed=0)).train()
    assert success_rate(policy, factory, range(200)) >= 0.85


def perturb(policy: TextPolicy) -> TextPolicy:
    """Move the zero-initialized scoring layer so the policy is no longer uniform."""
    with torch.no_grad():
        policy.head[-1].weight.normal_(0.0, 1.0)
        policy.head[-1].bias.zero_()
    return policy


def run_verb(verb, args, out) -> int:  # noqa: ANN001
    """A CLI verb on parsed arguments, through the CLI's error layer (one line, exit code 2)."""
    from harness_gym.cli.common import run_guarded

    return run_guarded(lambda: verb(args, out), debug=False)


def test_old_grpo_names_still_resolve_with_a_deprecation_warning() -> None:
    """The text policy's trainer was named like TRL's GRPOTrainer; the old names still work."""
    import harness_gym.baselines.text_policy as text_policy

    with pytest.warns(DeprecationWarning, match="use TextPolicyGRPOTrainer"):
        assert text_policy.GRPOTrainer is TextPolicyGRPOTrainer
    with pytest.warns(DeprecationWarning, match="use TextPolicyGRPOConfig"):
        from harness_gym.baselines.text_policy import GRPOConfig
    assert GRPOConfig is TextPolicyGRPOConfig
    with pytest.raises(AttributeError):
        text_policy.NoSuchName  # noqa: B018
