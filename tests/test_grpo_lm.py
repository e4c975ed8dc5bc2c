"""GRPO for language models through harnesses: grouping, token masks, bad input, training.

The grouping and argument tests run in the default suite. Everything that loads the embedded
model's tokenizer or weights is marked ``llm`` (``make test-llm``, one process).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from harness_gym.cli import CLIExit, main
from harness_gym.core.harness import Harness
from harness_gym.train.lm_dataset import build_rows

H1, H2, H3 = Harness(), Harness(field_order="reversed"), Harness(tool_style="python")
TRAINED = Harness(few_shot=2, step_budget=1)


# -- grouping (no model) ------------------------------------------------------------------------


def test_within_rows_hold_one_seed_under_one_harness() -> None:
    rows = build_rows("ClickButton", [H1, H2], [5, 6, 7], "within", group_size=4)
    assert [(r.seed, r.harnesses) for r in rows] == [
        (5, (H1,)), (5, (H2,)), (6, (H1,)), (6, (H2,)), (7, (H1,)), (7, (H2,)),
    ]  # fmt: skip
    assert len({r.prompt for r in rows}) == len(rows)
    assert all(r.harness_for(k) == r.harnesses[0] for r in rows for k in range(4))


def test_cross_rows_spread_one_seed_over_harnesses_equally() -> None:
    rows = build_rows("ClickButton", [H1, H2], [5, 6], "cross", group_size=4)
    assert [r.seed for r in rows] == [5, 6]
    for row in rows:
        group = [row.harness_for(k) for k in range(4)]
        assert group.count(H1) == group.count(H2) == 2


def test_cross_rows_rotate_when_harnesses_outnumber_a_group() -> None:
    harnesses = [H1, H2, H3, Harness(obs_format="yaml")]
    rows = build_rows("ClickButton", harnesses, list(range(4)), "cross", group_size=2)
    assert all(len(r.harnesses) == 2 and len(set(r.harnesses)) == 2 for r in rows)
    played = [h for r in rows for h in r.harnesses]
    assert all(played.count(h) == 2 for h in harnesses)


@pytest.mark.parametrize(
    ("harnesses", "grouping", "group_size", "message"),
    [
        ([H1], "cross", 4, "at least two"),
        ([H1, H2, H3], "cross", 4, "multiple of 3"),
        ([H1, H1], "within", 4, "not distinct"),
        ([H1], "within", 1, "at least 2"),
        ([H1], "sideways", 4, "grouping must be"),
        ([], "within", 4, "at least one harness"),
    ],
)
def test_bad_grouping_is_refused(harnesses: list, grouping: str, group_size: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_rows("ClickButton", harnesses, [0, 1], grouping, group_size)


def test_micro_batches_must_split_a_step_evenly() -> None:
    from harness_gym.train.grpo_lm import GRPOLMConfig, TrainingSetupError

    with pytest.raises(TrainingSetupError, match="micro_batch_size 3 must divide the 8 episodes"):
        GRPOLMConfig("ClickButton", [H1], [0, 1], group_size=4, groups_per_step=2, micro_batch_size=3)
    whole = GRPOLMConfig("ClickButton", [H1], [0, 1], group_size=4, micro_batch_size=16)
    assert whole.micro_batch == 4  # never more than a step holds
    split = GRPOLMConfig("ClickButton", [H1], [0, 1], group_size=8, micro_batch_size=2)
    assert (split.step_episodes, split.micro_batch) == (8, 2)


# -- the CLI refuses bad arguments before importing torch ----------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--env", "harness_gym/ClickLink-v0"], "one task"),
        (["--grouping", "cross"], "at least two"),
        (["--temperature", "0"], "--temperature: must be > 0"),
        (["--subset", "balanced:1"], "--subset needs --space"),
        (["--lora-r", "-1"], "--lora-r"),
        (["--group-size", "4", "--micro-batch", "3"], "--micro-batch 3 must divide the 4 episodes"),
    ],
)
def test_grpo_lm_cli_rejects_bad_arguments(tmp_path: Path, extra: list[str], message: str) -> None:
    out = tmp_path / "run"
    argv = ["train", "--algo", "grpo-lm", "--env", "harness_gym/ClickButton-v0", "--out", str(out), *extra]
    with pytest.raises(CLIExit) as info:
        main(argv, out=io.StringIO())
    assert message in str(info.value)
    assert not out.exists()


@pytest.mark.parametrize("algo", ["grpo-lm", "sft-lm"])
def test_vllm_mode_is_refused_in_one_line_without_cuda(
    tmp_path: Path, algo: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM generation in GRPO needs CUDA (and is untested here, its help says so): without a GPU
    the command refuses before loading a model; sft-lm, which generates nothing, refuses it too."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the vLLM mode is not refused here")
    with pytest.raises(SystemExit):
        main(["train", "--help"], out=io.StringIO())
    assert "Needs CUDA; untested" in " ".join(capsys.readouterr().out.split())
    out = tmp_path / "run"
    argv = ["train", "--algo", algo, "--env", "harness_gym/ClickButton-v0", "--vllm-mode", "server",
            "--out", str(out)]  # fmt: skip
    with pytest.raises(CLIExit) as info:
        main(argv, out=io.StringIO())
    line = str(info.value)
    ignored = "--vllm-mode is for grpo-lm: --algo sft-lm would ignore it"
    expected = "--vllm-mode server needs CUDA" if algo == "grpo-lm" else ignored
    assert expected in line and "\n" not in line
    assert not out.exists()


# -- token sequences (the embedded model's tokenizer) -------------------------------------------


@pytest.fixture(scope="module")
def tokenizer():  # noqa: ANN201
    from harness_gym.llm.embedded import embedded_model_path
    from harness_gym.train.grpo_lm import load_tokenizer

    return load_tokenizer(Path(embedded_model_path()))


def scripted(tokenizer, replies: list[str], end: bool = True):  # noqa: ANN001, ANN201
    """A generator that answers turn ``t`` of every episode with ``replies[t]`` (eos-ended if ``end``)."""
    turn = {"n": 0}

    def generate(batch):  # noqa: ANN001, ANN202
        text = replies[min(turn["n"], len(replies) - 1)]
        turn["n"] += 1
        ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids = ids + [tokenizer.eos_token_id] if end else ids
        return [(ids, [-0.5] * len(ids)) for _ in batch]

    return generate


def runs(mask: list[int], ids: list[int], value: int) -> list[list[int]]:
    """The maximal runs of ``ids`` where ``mask`` equals ``value``."""
    out: list[list[int]] = []
    for m, t in zip(mask, ids):
        if m == value:
            if not out or out[-1] is None:
                out.append([])
            out[-1].append(t)
        elif out and out[-1] is not None:
            out.append(None)  # type: ignore[arg-type]
    return [r for r in out if r is not None]


@pytest.mark.llm
def test_env_mask_covers_exactly_the_observation_tokens(tokenizer) -> None:  # noqa: ANN001
    from harness_gym.core.registry import make_env
    from harness_gym.train.chat_tokens import ChatTokenizer, render
    from harness_gym.train.lm_rollout import RolloutConfig, _messages, play_episodes

    harness = Harness(few_shot=1)
    env = make_env("ClickButton", harness)
    env.reset(seed=3)
    oracle = env.oracle_action()
    replies = ["I am not sure.", oracle]
    chat = ChatTokenizer(tokenizer)
    [episode] = play_episodes(
        [("ClickButton", harness, 3)], chat, scripted(tokenizer, replies), RolloutConfig(max_reply_tokens=64)
    )
    assert episode.turns == 2 and episode.success and episode.valid_actions == 1
    t = episode.tokens
    assert len(t.completion_ids) == len(t.env_mask) == len(t.logprobs)
    model_runs = runs(t.env_mask, t.completion_ids, 1)
    assert [tokenizer.decode(r) for r in model_runs] == [r + tokenizer.eos_token for r in replies]
    [env_run] = runs(t.env_mask, t.completion_ids, 0)
    env_text = tokenizer.decode(env_run)
    observation_1 = env.step(replies[0])[0]
    assert observation_1 in env_text and oracle not in env_text
    assert env_text.startswith("\n<|im_start|>user\n") and env_text.endswith("<|im_start|>assistant\n")
    assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.env_mask) if m == 0)
    # The whole sequence is the chat template's rendering of the finished transcript.
    env.reset(seed=3)
    from harness_gym.llm.chat import Turn

    first = env.reset(seed=3)[0]
    second = env.step(replies[0])[0]
    full = _messages(env, second, [Turn(first, replies[0])]) + [{"role": "assistant", "content": oracle}]
    rendered = render(tokenizer, full, generation=False)
    decoded = tokenizer.decode(t.ids)
    assert rendered.startswith(decoded) and rendered[len(decoded) :].strip() == ""
    env.close()


@pytest.mark.llm
def test_template_without_chat_support_is_refused_at_construction(tokenizer) -> None:  # noqa: ANN001
    from harness_gym.train.chat_tokens import ChatTemplateError, ChatTokenizer

    original = tokenizer.chat_template
    try:
        tokenizer.chat_template = None
        with pytest.raises(ChatTemplateError, match="no chat template"):
            ChatTokenizer(tokenizer)
        # A template that keeps the system message and the last two others drops earlier turns.
        tokenizer.chat_template = (
            "{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
            "{% for m in messages[1:][-2:] %}"
            "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
        )
        with pytest.raises(ChatTemplateError, match="drops or rewrites earlier turns"):
            ChatTokenizer(tokenizer)
    finally:
        tokenizer.chat_template = original
    ChatTokenizer(tokenizer)  # the real template passes


@pytest.mark.llm
def test_never_ending_replies_and_context_overflow_are_recorded_not_raised(tokenizer) -> None:  # noqa: ANN001
    from harness_gym.train.chat_tokens import ChatTokenizer
    from harness_gym.train.lm_rollout import RolloutConfig, play_episodes

    chat = ChatTokenizer(tokenizer)
    harness = Harness(few_shot=1)
    rambling = "word " * 40
    [episode] = play_episodes(
        [("ClickButton", harness, 4)], chat, scripted(tokenizer, [rambling], end=False), RolloutConfig(64)
    )
    assert episode.reply_truncated == episode.turns >= 1 and not episode.success
    assert not episode.context_truncated
    # Each cut reply is closed by an eos the environment added (masked out of the loss).
    eos_positions = [i for i, t in enumerate(episode.tokens.completion_ids) if t == tokenizer.eos_token_id]
    assert eos_positions and all(episode.tokens.env_mask[i] == 0 for i in eos_positions)
    first_prompt = len(episode.tokens.prompt_ids)
    tight = RolloutConfig(max_reply_tokens=64, max_context_tokens=first_prompt + 100)
    [short] = play_episodes([("ClickButton", harness, 4)], chat, scripted(tokenizer, ["no"]), tight)
    assert short.context_truncated and len(short.tokens.ids) <= first_prompt + 100
    assert short.turns < episode.turns


@pytest.mark.llm
def test_first_prompt_longer_than_the_context_fails_before_training(tokenizer) -> None:  # noqa: ANN001
    from harness_gym.train.grpo_lm import TrainingSetupError, check_prompts_fit
    from harness_gym.train.lm_rollout import RolloutConfig

    rows = build_rows("ClickButton", [Harness(few_shot=4)], [0], "within", 2)
    with pytest.raises(TrainingSetupError, match="exceeds max_context_tokens=300"):
        check_prompts_fit(rows, tokenizer, RolloutConfig(max_reply_tokens=48, max_context_tokens=300))


@pytest.mark.llm
def test_tool_environment_exposes_the_harness_tools(tokenizer) -> None:  # noqa: ANN001
    from transformers.utils import get_json_schema

    from harness_gym.core.registry import make_env
    from harness_gym.train.tool_env import tool_environment

    harness = Harness(tool_naming="synonyms", tool_order="reversed", tool_descriptions="terse")
    cls = tool_environment("ClickButton", harness)
    env = make_env("ClickButton", harness)
    expected = [t["function"] for t in env.bound.openai_tools]
    assert cls.harness_tool_order == tuple(f["name"] for f in expected)
    instance = cls()
    observation = instance.reset(seed=2)
    assert observation == env.reset(seed=2)[0]
    for function in expected:
        schema = get_json_schema(getattr(instance, function["name"]))["function"]
        assert schema["name"] == function["name"]
        assert schema["description"] == function["description"]
        assert set(schema["parameters"]["properties"]) == set(function["parameters"]["properties"])
    call = json.loads(env.oracle_action())
    result = getattr(instance, call["name"])(**call["arguments"])
    assert isinstance(result, str) and instance.done and instance.get_reward() == 1.0
    with pytest.raises(ValueError, match="cannot be a method name"):
        tool_environment("ClickButton", Harness(rename_tools=(("click", "reset"),)))


# -- training with the embedded model -----------------------------------------------------------


def _config(**changes):  # noqa: ANN003, ANN202
    from harness_gym.train.grpo_lm import GRPOLMConfig
    from harness_gym.train.lm_rollout import RolloutConfig

    # The settings of experiments/lm_field_order.py's first training run, whose first step has
    # valid and invalid replies in its group (reward variance; measured, reproducible by seed).
    base = dict(
        task="ClickButton",
        harnesses=[TRAINED],
        train_seeds=list(range(10_000, 10_024)),
        group_size=4,
        steps=3,
        learning_rate=3e-5,
        rollout=RolloutConfig(max_reply_tokens=32),
        threads=2,
        seed=0,
    )
    base.update(changes)
    return GRPOLMConfig(**base)


@pytest.fixture(scope="module")
def trained_twice(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    from harness_gym.train.grpo_lm import train_grpo_lm

    root = tmp_path_factory.mktemp("grpo")
    first = train_grpo_lm(_config(), root / "a", progress=False)
    second = train_grpo_lm(_config(), root / "b", progress=False)
    return first, second


def _weights(folder: Path):  # noqa: ANN202
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.llm
def test_three_grpo_steps_change_the_weights_and_log_rewards(trained_twice) -> None:  # noqa: ANN001
    from harness_gym.llm.embedded import embedded_model_path

    first, _ = trained_twice
    assert [h["step"] for h in first.history] == [1, 2, 3]
    rewards = [h["reward"] for h in first.history]
    assert any(r != 0 for r in rewards)
    assert any(h.get("reward_std", 0) > 0 for h in first.history)  # variance inside a group
    before = _weights(Path(embedded_model_path()))
    after = _weights(first.path)
    changed = [k for k in after if not (after[k] == before[k]).all()]
    assert changed, "no weight changed in three GRPO steps"
    record = json.loads((first.path / "harness_gym_training.json").read_text())
    assert record["config"]["harness_ids"] == [TRAINED.id]
    assert Harness.from_yaml(first.path / "harness.yaml") == TRAINED
    assert 0 < first.timings["env_seconds"] < first.timings["train_seconds"]


@pytest.mark.llm
def test_training_is_reproducible_with_a_fixed_seed(trained_twice) -> None:  # noqa: ANN001
    first, second = trained_twice
    a, b = _weights(first.path), _weights(second.path)
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    assert [h["reward"] for h in first.history] == [h["reward"] for h in second.history]


@pytest.mark.llm
def test_micro_batches_train_the_same_step(tmp_path: Path) -> None:
    """A step's four episodes in two micro-batches of 2 (gradients accumulated, the loss
    normalised over the whole step) play the same episodes, compute the same loss and move the
    weights the same way as one pass of 4. The weights agree only up to Adam's first step,
    which is sign-like (lr x g / |g|): parameters whose gradient is near zero can flip with the
    order of the float sums (measured cosine 0.965)."""
    import torch

    from harness_gym.llm.embedded import embedded_model_path
    from harness_gym.train.grpo_lm import train_grpo_lm

    whole = train_grpo_lm(_config(steps=1, micro_batch_size=4), tmp_path / "whole", progress=False)
    split = train_grpo_lm(_config(steps=1, micro_batch_size=2), tmp_path / "split", progress=False)
    assert whole.history[0]["reward"] == split.history[0]["reward"]
    assert whole.history[0]["reward_std"] == split.history[0]["reward_std"]
    assert whole.history[0]["loss"] == pytest.approx(split.history[0]["loss"], rel=1e-3, abs=1e-6)
    before = _weights(Path(embedded_model_path()))
    a, b = _weights(whole.path), _weights(split.path)
    da = torch.cat([(a[k] - before[k]).flatten() for k in sorted(a)])
    db = torch.cat([(b[k] - before[k]).flatten() for k in sorted(b)])
    assert da.abs().max() > 0
    assert torch.nn.functional.cosine_similarity(da, db, dim=0) > 0.9


@pytest.mark.llm
def test_saved_model_reloads_with_identical_greedy_actions(trained_twice) -> None:  # noqa: ANN001
    import torch
    from transformers import AutoModelForCausalLM

    from harness_gym.train.chat_tokens import ChatTokenizer
    from harness_gym.train.grpo_lm import load_tokenizer
    from harness_gym.train.lm_eval import evaluate_folder
    from harness_gym.train.lm_rollout import RolloutConfig, model_generator, play_episodes

    first, _ = trained_twice
    greedy = RolloutConfig(max_reply_tokens=32, temperature=0.0)
    jobs = [("ClickButton", TRAINED, s) for s in range(3)]
    tokenizer = load_tokenizer(first.path)
    chat = ChatTokenizer(tokenizer)
    replies = []
    for _ in range(2):  # load twice: the saved folder, not a model object, decides the actions
        model = AutoModelForCausalLM.from_pretrained(str(first.path), dtype=torch.float32)
        generate = model_generator(model, tokenizer.pad_token_id, tokenizer.eos_token_id, greedy)
        replies.append([e.replies for e in play_episodes(jobs, chat, generate, greedy)])
    assert replies[0] == replies[1]
    # The eval path (hf:FOLDER) on single-step episodes acts the same as the rollout.
    rate = evaluate_folder(first.path, "ClickButton", TRAINED, range(3), threads=1, max_tokens=32)
    assert [r[0].strip() for r in rate.replies] == [r[0].strip() for r in replies[0]]


@pytest.mark.llm
def test_grpo_lm_command_trains_saves_and_evaluates(tmp_path: Path) -> None:
    out = tmp_path / "run"
    text = io.StringIO()
    argv = [
        "train", "--algo", "grpo-lm", "--model", "llm", "--env", "harness_gym/ClickButton-JsonFewShot-v0",
        "--steps", "1", "--group-size", "2", "--train-seeds", "2", "--max-tokens", "16",
        "--eval-episodes", "2", "--threads", "1", "--out", str(out),
    ]  # fmt: skip
    assert main(argv, out=text) == 0
    assert "saved ClickButton model trained with GRPO" in text.getvalue()
    assert "greedy success on harness_gym/ClickButton-JsonFewShot-v0 (seeds 0..1)" in text.getvalue()
    record = json.loads((out / "harness_gym_training.json").read_text())
    assert record["config"]["steps"] == 1 and record["config"]["group_size"] == 2
    assert len(record["history"]) == 1
    rows = tmp_path / "rows.jsonl"
    argv = ["eval", "--agent", f"hf:{out}", "--env", "harness_gym/ClickButton-JsonFewShot-v0",
            "--episodes", "2", "--max-tokens", "16", "--out", str(rows)]  # fmt: skip
    assert main(argv, out=io.StringIO()) == 0
    assert len(rows.read_text().splitlines()) == 2


# -- training on bigger machines: precision, checkpointing, context, accelerate -------------------


@pytest.mark.llm
def test_max_context_tokens_on_the_cli_refuses_a_prompt_that_cannot_fit(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["train", "--algo", "grpo-lm", "--env", "harness_gym/ClickButton-JsonFewShot-v0",
            "--max-context-tokens", "100", "--out", str(out)]  # fmt: skip
    with pytest.raises(CLIExit) as info:
        main(argv, out=io.StringIO())
    assert "exceeds max_context_tokens=100" in str(info.value)
    assert not out.exists()


@pytest.mark.llm
def test_bf16_and_gradient_checkpointing_train_a_step(tmp_path: Path) -> None:
    """One GRPO step in bf16 mixed precision with activations recomputed: the weights move and
    stay fp32 in the saved folder (master weights), and the record says how it was trained."""
    from harness_gym.train.grpo_lm import train_grpo_lm
    from harness_gym.train.precision import bf16_supported

    if not bf16_supported():
        pytest.skip("no native bf16 on this machine")
    run = train_grpo_lm(
        _config(steps=1, group_size=2, precision="bf16", gradient_checkpointing=True), tmp_path / "bf16"
    )
    record = json.loads((run.path / "harness_gym_training.json").read_text())
    assert record["config"]["precision"] == "bf16" and record["config"]["gradient_checkpointing"]
    weights = _weights(run.path)
    assert all(str(w.dtype) == "torch.float32" for w in weights.values())


@pytest.mark.slow
@pytest.mark.llm
def test_accelerate_launch_runs_the_training_command(tmp_path: Path) -> None:
    import os
    import shutil
    import subprocess
    import sys

    launcher = shutil.which("accelerate") or str(Path(sys.executable).with_name("accelerate"))
    out = tmp_path / "run"
    argv = [launcher, "launch", "--cpu", "--num_processes", "1", "--num_machines", "1",
            "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "harness_gym.cli", "train",
            "--algo", "sft-lm", "--env", "harness_gym/ClickButton-v0", "--train-seeds", "2", "--epochs", "1",
            "--batch-size", "2", "--eval-episodes", "0", "--threads", "2", "--out", str(out)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ), timeout=3600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "fine-tuned on 2 oracle demonstrations" in done.stdout
    assert (out / "model.safetensors").is_file() and (out / "harness.yaml").is_file()
