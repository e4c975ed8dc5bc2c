"""SFT of language models through harnesses: demonstration rows, the agent-token mask, bad
arguments, and a reduced run whose model beats the untrained one.

Rows and arguments run in the default suite (no model). Tests that load the embedded model's
tokenizer or weights are marked ``llm``; the reduced training run is also ``slow``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from harness_gym.cli import CLIExit, main
from harness_gym.core.harness import Harness
from harness_gym.core.registry import make_env
from harness_gym.llm.chat import chat_messages
from harness_gym.train.grpo_lm import TrainingSetupError
from harness_gym.train.sft_lm import SFTLMConfig, demonstration_rows

TRAINED = Harness(step_budget=1)
SPACE = Path(__file__).resolve().parents[1] / "examples" / "llm-space.yaml"


# -- demonstration rows are what the env renders (no model) --------------------------------------


@pytest.mark.parametrize(
    "harness",
    [
        TRAINED,
        Harness(few_shot=2, field_order="reversed", obs_format="markdown"),
        Harness(tool_style="python"),
    ],
    ids=["canonical", "reversed-markdown-examples", "python"],
)
def test_step_rows_are_the_env_rendering_followed_by_the_oracle_reply(harness: Harness) -> None:
    seeds = [5, 6, 7]
    rows = demonstration_rows("ClickButton", [harness], seeds, "step")
    env = make_env("ClickButton", harness)
    assert [r["seed"] for r in rows] == seeds  # ClickButton: one step per episode
    for row, seed in zip(rows, seeds):
        observation, info = env.reset(seed=seed)
        oracle = env.oracle_action()
        expected = chat_messages(harness, info["system_prompt"], observation, (), info["examples"])
        assert row["messages"] == [*expected, {"role": "assistant", "content": oracle}]
        assert row["trained_from"] == len(expected)  # only the reply is trained
        assert row["harness_id"] == harness.id and row["success"] and row["tools"] is None
    env.close()


def test_native_rows_end_with_the_oracle_tool_call() -> None:
    harness = Harness(tool_channel="native", few_shot=1)
    [row] = demonstration_rows("ClickButton", [harness], [3], "step")
    env = make_env("ClickButton", harness)
    env.reset(seed=3)
    call = json.loads(env.oracle_action())
    reply = row["messages"][-1]
    assert reply["role"] == "assistant" and len(reply["tool_calls"]) == 1
    function = reply["tool_calls"][0]["function"]
    assert function["name"] == call["name"] and json.loads(function["arguments"]) == call["arguments"]
    assert json.loads(row["tools"]) == env.bound.openai_tools
    env.close()


def test_episode_rows_train_every_reply_after_the_worked_examples() -> None:
    harness = Harness(few_shot=1)  # ClickButton under the default budget: still one step
    [row] = demonstration_rows("ClickButton", [harness], [4], "episode")
    roles = [m["role"] for m in row["messages"]]
    assert roles[: row["trained_from"]] == ["system", "user", "assistant"]  # the worked example
    assert roles[row["trained_from"] :] == ["user", "assistant"]


def test_several_harnesses_share_the_seeds_in_turn() -> None:
    harnesses = [TRAINED, TRAINED.replace(field_order="reversed"), TRAINED.replace(obs_format="yaml")]
    rows = demonstration_rows("ClickButton", harnesses, list(range(100, 106)), "step")
    assert [r["harness_id"] for r in rows] == [h.id for h in harnesses] * 2
    assert [r["seed"] for r in rows] == list(range(100, 106))


def test_a_harness_whose_ceiling_is_below_one_gives_no_demonstrations() -> None:
    with pytest.raises(TrainingSetupError, match="demonstrations must succeed"):
        demonstration_rows("ClickButton", [TRAINED.replace(drop_tools=("click",))], [0], "step")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"unit": "turn"}, "unit must be one of"),
        ({"precision": "fp8"}, "precision must be one of"),
        ({"harnesses": []}, "at least one training harness"),
        ({"harnesses": [TRAINED, TRAINED]}, "not distinct"),
        ({"train_seeds": [0]}, "at least one seed per harness"),
        ({"batch_size": 8, "micro_batch_size": 3}, "micro_batch_size 3 must divide batch_size 8"),
        ({"epochs": 0}, "epochs and learning_rate must be > 0"),
        ({"lora_r": -1}, "lora_r and warmup_steps >= 0"),
        ({"warmup_steps": -1}, "lora_r and warmup_steps >= 0"),
        ({"lr_scheduler": "step"}, "lr_scheduler must be one of linear, constant"),
        ({"eval_every": -1}, "eval_every must be >= 0"),
        ({"eval_every": 5, "eval_seeds": []}, "a learning curve needs eval_seeds"),
        ({"stop_at": 0.9}, "needs eval_every > 0"),
        ({"eval_every": 5, "stop_at": 1.5}, "stop_at must be a success rate from 0 to 1"),
    ],
)
def test_bad_sft_config_is_refused(changes: dict, message: str) -> None:
    """Refused when the config is made: before any model loads."""
    base = {"task": "ClickButton", "harnesses": [TRAINED, TRAINED.replace(field_order="reversed")]}
    base["train_seeds"] = [0, 1]
    base.update(changes)
    with pytest.raises(TrainingSetupError, match=message):
        SFTLMConfig(**base)


# -- the CLI refuses bad arguments before anything is written ------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--env", "harness_gym/ClickLink-v0"], "one task"),
        (["--steps", "5"], "grpo-lm: --algo sft-lm would ignore it"),
        (["--grouping", "cross"], "grpo-lm: --algo sft-lm would ignore it"),
        (["--hyperparams", "{bad"], "--hyperparams"),
        (["--hyperparams", '{"learning_rat": 1e-3}'], "has no 'learning_rat'"),
        (["--hyperparams", '{"task": "EnterText"}'], "has no 'task'"),
        (["--beta", "0.1"], "--beta is for grpo-lm: --algo sft-lm would ignore it"),
        (["--max-actions", "8"], "--max-actions is for maskable_ppo, ppo, dqn"),
        (["--out", "/proc/m"], "--out /proc/m cannot be written"),
        (["--subset", "balanced:1"], "--subset needs --space"),
        (["--space", str(SPACE), "--train-seeds", "1"], "cannot demonstrate"),
        (["--batch-size", "8", "--micro-batch", "3"], "--micro-batch 3 must divide --batch-size 8"),
        (["--epochs", "0"], "--epochs"),
        (["--lora-r", "-1"], "--lora-r"),
        (["--unit", "turn"], "--unit"),
        (["--precision", "fp8"], "--precision"),
        (["--harness", "no-such-preset"], "no-such-preset"),
        (["--max-context-tokens", "0"], "--max-context-tokens"),
        (["--lr-scheduler", "step"], "--lr-scheduler"),
        (["--warmup-steps", "-1"], "--warmup-steps"),
        (["--stop-at", "0.9"], "needs --eval-every"),
        (["--eval-every", "5", "--stop-at", "2"], "a success rate from 0 to 1"),
        (["--eval-every", "5", "--curve-seeds", "0"], "--curve-seeds"),
    ],
)
def test_sft_lm_cli_rejects_bad_arguments(tmp_path: Path, extra: list[str], message: str) -> None:
    out = tmp_path / "run"
    argv = ["train", "--algo", "sft-lm", "--env", "harness_gym/ClickButton-v0", "--out", str(out), *extra]
    with pytest.raises(CLIExit) as info:
        main(argv, out=io.StringIO())
    assert message in str(info.value)
    assert not out.exists()


@pytest.mark.parametrize("algo", ["sft-lm", "grpo-lm"])
def test_bf16_is_refused_where_the_machine_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, algo: str
) -> None:
    import harness_gym.train.precision as precision

    monkeypatch.setattr(precision, "bf16_supported", lambda: False)
    out = tmp_path / "run"
    argv = [
        "train",
        "--algo",
        algo,
        "--env",
        "harness_gym/ClickButton-v0",
        "--precision",
        "bf16",
        "--out",
        str(out),
    ]
    with pytest.raises(CLIExit) as info:
        main(argv, out=io.StringIO())
    assert "no native bf16" in str(info.value)
    assert not out.exists()
    with pytest.raises(precision.PrecisionError, match="no native bf16"):
        precision.resolve_precision("bf16")
    assert precision.resolve_precision("auto") == "fp32"  # the fall-back


def test_vllm_generation_needs_cuda() -> None:
    import torch

    from harness_gym.train.grpo_lm import GRPOLMConfig, train_grpo_lm

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the vLLM mode is not refused here")
    config = GRPOLMConfig("ClickButton", [TRAINED], [0, 1], vllm_mode="server")
    with pytest.raises(TrainingSetupError, match="needs CUDA"):
        train_grpo_lm(config, "/nonexistent/never-written")
    with pytest.raises(TrainingSetupError, match="vllm_mode must be"):
        GRPOLMConfig("ClickButton", [TRAINED], [0, 1], vllm_mode="remote")


# -- the agent-token mask (the embedded model's tokenizer) ---------------------------------------


@pytest.fixture(scope="module")
def tokenizer():  # noqa: ANN201
    from harness_gym.llm.embedded import embedded_model_path
    from harness_gym.train.grpo_lm import load_tokenizer

    return load_tokenizer(Path(embedded_model_path()))


def _trained_text(tokenizer, row: dict) -> tuple[str, list[int]]:  # noqa: ANN001
    from harness_gym.train.sft_lm import sft_tokens

    tools = json.loads(row["tools"]) if row["tools"] else None
    tokens = sft_tokens(tokenizer, row["messages"], tools, row["trained_from"])
    ids = [t for t, m in zip(tokens["input_ids"], tokens["assistant_masks"]) if m]
    return tokenizer.decode(ids), tokens["input_ids"]


@pytest.mark.llm
def test_only_the_agents_reply_and_its_end_token_are_trained(tokenizer) -> None:  # noqa: ANN001
    from harness_gym.train.chat_tokens import render

    harness = Harness(few_shot=2, step_budget=1)
    [row] = demonstration_rows("ClickButton", [harness], [8], "step")
    text, ids = _trained_text(tokenizer, row)
    reply = row["messages"][-1]["content"]
    assert text == reply + tokenizer.eos_token  # not the two worked examples' replies
    # The whole sequence is the template's rendering, and its prefix is the prompt eval sends.
    full = render(tokenizer, row["messages"], generation=False)
    assert tokenizer.decode(ids) == full
    prompt = render(tokenizer, row["messages"][:-1], generation=True)
    assert full.startswith(prompt) and full[len(prompt) :].startswith(reply)


@pytest.mark.llm
def test_native_tool_calls_are_trained_as_the_template_writes_them(tokenizer) -> None:  # noqa: ANN001
    harness = Harness(tool_channel="native", step_budget=1)
    [row] = demonstration_rows("ClickButton", [harness], [2], "step")
    text, _ = _trained_text(tokenizer, row)
    function = row["messages"][-1]["tool_calls"][0]["function"]
    assert text.startswith("<tool_call>\n") and f'"name": "{function["name"]}"' in text
    assert text.endswith("</tool_call>" + tokenizer.eos_token)


@pytest.mark.llm
def test_a_demonstration_longer_than_the_limit_is_refused_before_training(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["train", "--algo", "sft-lm", "--env", "harness_gym/ClickButton-v0", "--train-seeds", "2",
            "--max-context-tokens", "100", "--out", str(out)]  # fmt: skip
    with pytest.raises(CLIExit) as info:
        main(argv, out=io.StringIO())
    assert "over max_length=100" in str(info.value) and "ClickButton seed 10000" in str(info.value)
    assert not out.exists()


# -- a reduced SFT run (minutes) -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.llm
def test_reduced_sft_beats_the_untrained_model_on_held_out_seeds(tmp_path: Path) -> None:
    """64 demonstrations, one epoch (8 steps): the untrained model, without worked examples,
    writes no action that parses; the fine-tuned one writes a click on every held-out seed and
    succeeds more often, by a margin the 95% Wilson intervals separate over 100 seeds. At this
    budget it has learnt the format, not the choice: its success is near the 16.8% of a random
    legal click (docs/lm_field_order.md), so the margin is the format's. The folder then
    evaluates through ``hf:FOLDER`` and trains further with ``grpo-lm --model FOLDER``."""
    from harness_gym.llm.embedded import embedded_model_path
    from harness_gym.train.lm_eval import evaluate_folder
    from harness_gym.train.sft_lm import train_sft_lm

    config = SFTLMConfig(
        "ClickButton",
        [TRAINED],
        list(range(10_000, 10_064)),
        epochs=1,
        batch_size=8,
        micro_batch_size=4,
        learning_rate=1e-4,
        threads=2,
    )
    trained = train_sft_lm(config, tmp_path / "sft", progress=False)
    assert len(trained.history) == 8 and trained.history[-1]["loss"] < trained.history[0]["loss"]
    seeds = range(100)
    before = evaluate_folder(embedded_model_path(), "ClickButton", TRAINED, seeds, threads=2, max_tokens=32)
    after = evaluate_folder(trained.path, "ClickButton", TRAINED, seeds, threads=2, max_tokens=32)
    assert after.interval[0] > before.interval[1], (before, after)
    assert all(reply.startswith('{"name": "click"') for [reply] in after.replies), after.replies
    record = json.loads((trained.path / "harness_gym_training.json").read_text())
    assert record["kind"] == "sft-lm" and record["config"]["harness_ids"] == [TRAINED.id]
    rows = tmp_path / "rows.jsonl"
    argv = ["eval", "--agent", f"hf:{trained.path}", "--env", "harness_gym/ClickButton-v0", "--harness",
            str(trained.path / "harness.yaml"), "--episodes", "4", "--max-tokens", "32",
            "--out", str(rows)]  # fmt: skip
    assert main(argv, out=io.StringIO()) == 0
    assert len(rows.read_text().splitlines()) == 4
    argv = ["train", "--algo", "grpo-lm", "--model", str(trained.path), "--env", "harness_gym/ClickButton-v0",
            "--harness", str(trained.path / "harness.yaml"), "--steps", "1", "--group-size", "2",
            "--train-seeds", "2", "--max-tokens", "32", "--eval-episodes", "0", "--threads", "2",
            "--out", str(tmp_path / "grpo")]  # fmt: skip
    text = io.StringIO()
    assert main(argv, out=text) == 0
    assert "saved ClickButton model trained with GRPO" in text.getvalue()


# -- the shared prefix ----------------------------------------------------------------------------


def _batch(tokenizer, harnesses: list[Harness], seeds: list[int]) -> dict:  # noqa: ANN001
    import torch

    from harness_gym.train.sft_lm import sft_tokens

    rows = demonstration_rows("ClickButton", harnesses, seeds)
    encoded = [sft_tokens(tokenizer, r["messages"], None, r["trained_from"]) for r in rows]
    width = max(len(e["input_ids"]) for e in encoded)
    ids, mask, labels = [], [], []
    for e in encoded:
        pad = width - len(e["input_ids"])  # right padding, as TRL's collator pads
        ids.append(e["input_ids"] + [tokenizer.pad_token_id] * pad)
        mask.append([1] * len(e["input_ids"]) + [0] * pad)
        labels.append([t if m else -100 for t, m in zip(e["input_ids"], e["assistant_masks"])] + [-100] * pad)
    return {k: torch.tensor(v) for k, v in (("input_ids", ids), ("attention_mask", mask), ("labels", labels))}


@pytest.mark.llm
@pytest.mark.parametrize("mixed", [False, True], ids=["one-harness", "two-harnesses"])
def test_shared_prefix_loss_equals_the_full_rows_loss_and_gradients(tokenizer, mixed: bool) -> None:  # noqa: ANN001
    """The loss and every gradient with the shared prefix run once equal transformers' own
    loss over the full rows (fp32), for rows of one harness (the whole system prompt shared)
    and of two (a shorter common start)."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness_gym.llm.embedded import embedded_model_path
    from harness_gym.train.sft_lm import shared_prefix_length, shared_prefix_loss

    torch.set_num_threads(2)
    harnesses = [TRAINED, TRAINED.replace(obs_format="markdown")] if mixed else [TRAINED]
    batch = _batch(tokenizer, harnesses, [10_000, 10_001, 10_002, 10_003])
    shared = shared_prefix_length(batch["input_ids"], batch["attention_mask"], batch["labels"])
    first_trained = int((batch["labels"] != -100).any(dim=0).nonzero()[0])
    assert 0 < shared < first_trained
    if not mixed:
        assert shared > batch["attention_mask"].sum(dim=1).min() / 2  # most of each row is shared
    model = AutoModelForCausalLM.from_pretrained(embedded_model_path(), dtype=torch.float32)
    reference = model(**batch).loss
    reference.backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    loss, count, correct = shared_prefix_loss(model, batch)
    loss.backward()
    assert count == int((batch["labels"][:, 1:] != -100).sum()) and 0 <= correct <= count
    assert torch.allclose(loss, reference, rtol=1e-5), (float(loss), float(reference))
    got = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert got.keys() == expected.keys()
    for name, grad in expected.items():
        assert torch.allclose(got[name], grad, rtol=1e-3, atol=1e-6), name


@pytest.mark.slow
@pytest.mark.llm
def test_the_default_recipe_learns_clickbutton_with_text_before_ref(tmp_path: Path) -> None:
    """The CLI's defaults (lr 1e-4, 5 warm-up steps, linear decay) under the package's full
    prompt with each element's text before its ref: measured at 11/30 validation seeds after 10
    steps and 30/30 after 20, then 100/100 held-out (docs/lm_field_order.md). Stopped by the
    curve at 90%; at most 50 steps (400 demonstrations, so the decay is faster than in the
    documented 200-step run: this exact configuration was not run on the loaded machine where the
    figures were measured). The curve is in the record."""
    out = tmp_path / "sft"
    argv = ["train", "--algo", "sft-lm", "--env", "harness_gym/ClickButton-JsonElementsReversed-v0",
            "--precision", "auto", "--threads", "2", "--micro-batch", "8",
            "--train-seeds", "400", "--eval-every", "10", "--stop-at", "0.9", "--eval-episodes", "100",
            "--out", str(out)]  # fmt: skip
    text = io.StringIO()
    assert main(argv, out=text) == 0
    rate = float(text.getvalue().split("greedy success on")[1].split(": ")[1].split("%")[0])
    assert rate >= 80.0, text.getvalue()
    record = json.loads((out / "harness_gym_training.json").read_text())
    curve = [h for h in record["history"] if "held_out" in h]
    assert curve[0]["step"] == 0 and curve[-1]["held_out"] >= 27 and curve[-1]["episodes"] == 30
    assert record["config"]["learning_rate"] == 1e-4 and record["config"]["warmup_steps"] == 5
