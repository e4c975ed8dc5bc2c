"""Supervised fine-tuning of a language model on oracle demonstrations rendered by harnesses (TRL).

:func:`demonstration_rows` plays the task's oracle through each training harness and keeps
the rows :mod:`harness_gym.integrations.export` writes (``harness-gym export``): the chat a
model acting through the harness is sent, ending with the oracle's reply (text in the
harness's action syntax, or a native tool call on the ``native`` tool channel). Several
harnesses form a balanced set: training seed ``i`` is played under harness ``i mod H``, so a
multi-harness run sees as many demonstrations as a single-harness one.

:func:`sft_tokens` tokenizes a row with the model's own chat template and marks the agent's
tokens: the replies of the episode and the end-of-turn token that closes each, never the
system prompt, the observations, or the harness's worked examples. Rows go to
``trl.SFTTrainer`` pre-tokenized (``input_ids`` and ``assistant_masks``), so the loss is on
the agent's tokens only for any chat template (TRL's own ``assistant_only_loss`` needs
``{% generation %}`` markers, which neither SmolLM2's template nor the embedded model's have).

With ``share_prefix`` (the default) each micro-batch runs the tokens its rows share at their
start (one harness's system prompt: about 60% of a ClickButton row) through the model once,
and the rows' own tokens on top of that cache, as evaluation does (:mod:`~harness_gym.llm.
transformers_backend`). The loss and its gradients are those of the full rows (the shared
tokens carry no loss), computed with fewer matrix products: :func:`shared_prefix_loss`.

The saved folder is what :mod:`~harness_gym.train.grpo_lm` writes: a Hugging Face model
folder with ``harness.yaml`` and ``harness_gym_training.json``, so ``hf:FOLDER`` evaluates it
and ``--algo grpo-lm --model FOLDER`` trains it further.
"""

from __future__ import annotations

import gc
import inspect
import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness_gym.core.harness import Harness
from harness_gym.progress import trainer_progress
from harness_gym.train.grpo_lm import (
    TrainingSetupError,
    load_tokenizer,
    model_path,
    save_record,
)
from harness_gym.train.precision import PRECISIONS, resolve_precision

UNITS = ("step", "episode")
LR_SCHEDULERS = ("linear", "constant", "constant_with_warmup", "cosine")
#: First seed of the learning curve's validation seeds (training seeds start at 10,000 and
#: reported evaluations use 0..N-1).
VALIDATION_SEED_START = 5_000


@dataclass
class SFTLMConfig:
    """Everything an SFT run through harnesses depends on (saved with the model).

    Attributes:
        task: the task id every demonstration plays.
        harnesses: the training harnesses (seed ``i`` is demonstrated under harness ``i mod H``).
        train_seeds: task seeds of the demonstrations (keep evaluation seeds apart).
        model: ``"llm"`` (the embedded model) or a Hugging Face model folder.
        unit: ``step`` (one row per step: the messages the eval agent sends, then the reply) or
            ``episode`` (one row per episode: the whole transcript, as GRPO training sees it).
        epochs: passes over the demonstrations.
        batch_size: rows per optimizer step.
        micro_batch_size: rows per forward/backward pass (gradients accumulate over a step;
            the vocabulary-wide logits of each row are what fills memory).
        learning_rate: AdamW learning rate (the peak of the schedule).
        lr_scheduler: ``linear`` (decay to zero, the default), ``constant``,
            ``constant_with_warmup`` or ``cosine`` (transformers' schedules of those names).
        warmup_steps: optimizer steps of linear warm-up before the schedule.
        lora_r: LoRA rank through ``peft`` (0: full fine-tuning); the saved folder holds merged weights.
        precision: ``auto`` (bf16 where supported), ``fp32`` or ``bf16`` (mixed precision:
            fp32 master weights, bf16 autocast).
        gradient_checkpointing: recompute activations in the backward pass (less memory, slower).
        share_prefix: run a micro-batch's common leading tokens once (the same loss and
            gradients; off: every row in full, through TRL's own loss).
        max_length: the longest row in tokens; a longer row is refused before training.
        seed: seeds data order and LoRA initialisation.
        threads: torch threads on CPU.
        eval_every: every this many optimizer steps (and at step 0), the model's greedy
            success on ``eval_seeds`` under the first training harness joins the history
            (``held_out`` rows: the learning curve); 0: never.
        eval_seeds: validation seeds of the learning curve (keep them apart from the seeds
            a final evaluation reports).
        stop_at: end training at the first curve point with at least this success
            (0: train for every epoch).
        max_reply_tokens: most tokens of a reply on the learning curve.

    The defaults learn ClickButton under the package's full prompt in either element order
    (docs/lm_field_order.md): lr 1e-4 with 5 warm-up steps and linear decay, batch 8. At
    lr 5e-4 the same run stalled at the position prior (the layout, not the instruction).
    """

    task: str
    harnesses: list[Harness]
    train_seeds: list[int]
    model: str = "llm"
    unit: str = "step"
    epochs: float = 2.0
    batch_size: int = 8
    micro_batch_size: int = 2
    learning_rate: float = 1e-4
    lr_scheduler: str = "linear"
    warmup_steps: int = 5
    lora_r: int = 0
    lora_alpha: int = 16
    precision: str = "fp32"
    gradient_checkpointing: bool = False
    share_prefix: bool = True
    max_length: int = 2048
    seed: int = 0
    threads: int = 2
    eval_every: int = 0
    eval_seeds: list[int] = field(
        default_factory=lambda: list(range(VALIDATION_SEED_START, VALIDATION_SEED_START + 30))
    )
    stop_at: float = 0.0
    max_reply_tokens: int = 32

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise TrainingSetupError(f"unit must be one of {', '.join(UNITS)}, got {self.unit!r}")
        if self.precision not in PRECISIONS:
            raise TrainingSetupError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if not self.harnesses:
            raise TrainingSetupError("give at least one training harness")
        if len({h.id for h in self.harnesses}) != len(self.harnesses):
            raise TrainingSetupError("the training harnesses are not distinct (two have the same id)")
        if len(self.train_seeds) < len(self.harnesses):
            raise TrainingSetupError(
                f"{len(self.train_seeds)} training seeds cannot demonstrate {len(self.harnesses)} harnesses "
                "(seed i is played under harness i mod H): give at least one seed per harness"
            )
        for name in ("batch_size", "micro_batch_size", "threads", "max_length"):
            if int(getattr(self, name)) < 1:
                raise TrainingSetupError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.batch_size % min(self.micro_batch_size, self.batch_size):
            raise TrainingSetupError(
                f"micro_batch_size {self.micro_batch_size} must divide batch_size {self.batch_size}"
            )
        if self.epochs <= 0 or self.learning_rate <= 0 or self.lora_r < 0 or self.warmup_steps < 0:
            raise TrainingSetupError("epochs and learning_rate must be > 0, lora_r and warmup_steps >= 0")
        if self.eval_every < 0 or (self.eval_every and not self.eval_seeds):
            raise TrainingSetupError("eval_every must be >= 0, and a learning curve needs eval_seeds")
        if not 0.0 <= self.stop_at <= 1.0 or (self.stop_at and not self.eval_every):
            raise TrainingSetupError(
                f"stop_at must be a success rate from 0 to 1 and needs eval_every > 0, got {self.stop_at}"
            )
        if self.lr_scheduler not in LR_SCHEDULERS:
            raise TrainingSetupError(
                f"lr_scheduler must be one of {', '.join(LR_SCHEDULERS)}, got {self.lr_scheduler!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["harnesses"] = [h.to_dict(full=False) for h in self.harnesses]
        data["harness_ids"] = [h.id for h in self.harnesses]
        return data


def demonstration_rows(
    task: str, harnesses: Sequence[Harness], seeds: Sequence[int], unit: str = "step"
) -> list[dict[str, Any]]:
    """The oracle's episodes as export rows, seed ``i`` under harness ``i mod H``.

    Each row is exactly what :func:`harness_gym.integrations.export.episode_rows` writes, plus
    ``trained_from``: the index of the first message that belongs to the episode (messages
    before it are the system prompt and the harness's worked examples).
    """
    from harness_gym.baselines.agents import OracleAgent
    from harness_gym.core.registry import make_env
    from harness_gym.integrations.export import episode_rows, record_episodes
    from harness_gym.llm.chat import chat_messages

    rows: list[dict[str, Any]] = []
    envs = {h.id: make_env(task, h) for h in harnesses}
    try:
        for i, seed in enumerate(seeds):
            harness = harnesses[i % len(harnesses)]
            env = envs[harness.id]
            [episode] = record_episodes(env, OracleAgent(env), [int(seed)], "oracle")
            if not episode.result.success:
                raise TrainingSetupError(
                    f"the oracle fails {task} seed {seed} under harness {harness.id} (its ceiling is below 1 "
                    "there): demonstrations must succeed; lift the step budget or drop that harness"
                )
            lead = len(chat_messages(harness, episode.system_prompt, "", (), episode.examples)) - 1
            for row in episode_rows(env, episode, unit):
                rows.append({**row, "trained_from": lead if unit == "episode" else len(row["messages"]) - 1})
    finally:
        for env in envs.values():
            env.close()
    return rows


def sft_tokens(
    tokenizer: Any, messages: Sequence[dict], tools: list | None, trained_from: int
) -> dict[str, list[int]]:
    """``input_ids`` of the templated chat and ``assistant_masks``: 1 on the tokens of every
    assistant message at index ``trained_from`` or later, through the end-of-turn token.

    The spans come from the template itself: an assistant turn starts where the chat before
    it, rendered with the generation prompt, ends (what the model is shown when it acts), and
    ends at the first end-of-sequence token after that.
    """
    from harness_gym.train.chat_tokens import ChatTemplateError, ChatTokenizer, render

    chat = ChatTokenizer(tokenizer)  # checks the template appends and closes turns with eos
    full = render(tokenizer, messages, tools, generation=False)
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant" or i < trained_from:
            continue
        start = len(render(tokenizer, messages[:i], tools, generation=True))
        end = full.find(chat.eos, start)
        if not full.startswith(render(tokenizer, messages[:i], tools, generation=True)) or end < 0:
            raise ChatTemplateError(
                "the chat template renders an assistant turn unlike its own generation prompt, or does "
                f"not close it with {chat.eos!r}: the agent's tokens cannot be located"
            )
        spans.append((start, end + len(chat.eos)))
    encoded = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    mask = [int(any(s <= a < e for s, e in spans)) for a, _ in encoded["offset_mapping"]]
    return {"input_ids": list(encoded["input_ids"]), "assistant_masks": mask}


def shared_prefix_length(input_ids: Any, attention_mask: Any, labels: Any) -> int:
    """How many leading tokens every row of the micro-batch shares and may run once: equal
    ids, none of them padding, and no loss on predicting any of them or the token after."""
    rows = input_ids.shape[0]
    if rows < 2:
        return 0
    same = (input_ids == input_ids[:1]).all(dim=0) & attention_mask.bool().all(dim=0)
    differ = (~same).nonzero()
    common = int(differ[0]) if len(differ) else input_ids.shape[1]
    trained = (labels != -100).any(dim=0).nonzero()
    first_label = int(trained[0]) if len(trained) else input_ids.shape[1]
    # The logit at position t predicts token t + 1: the prefix's last position may not predict
    # a trained token, and every row keeps at least one token of its own.
    return max(0, min(common, first_label - 1, int(attention_mask.sum(dim=1).min()) - 1))


def shared_prefix_loss(model: Any, inputs: dict[str, Any], num_items: Any = None) -> tuple[Any, int, int]:
    """The summed next-token loss of a micro-batch's trained tokens, divided by ``num_items``
    (all trained tokens of the optimizer step; default: this micro-batch's), with the rows'
    shared prefix run once and its cache repeated for every row: autograd sums the rows'
    gradients through the repeated cache, so the result equals the full-row loss.

    Returns the loss, the trained tokens counted, and how many of them the model's top
    token got right (TRL's ``mean_token_accuracy``).
    """
    import torch
    import torch.nn.functional as F
    from transformers import DynamicCache

    ids, mask, labels = inputs["input_ids"], inputs["attention_mask"], inputs["labels"]
    shared = shared_prefix_length(ids, mask, labels)
    backbone = model.get_decoder()
    if shared > 0:
        # transformers renamed ``past_key_values`` to ``cache`` during 5.x.
        name = "cache" if "cache" in inspect.signature(backbone.forward).parameters else "past_key_values"
        cache = DynamicCache(config=model.config)
        backbone(input_ids=ids[:1, :shared], use_cache=True, **{name: cache})
        cache.batch_repeat_interleave(ids.shape[0])
        hidden = backbone(
            input_ids=ids[:, shared:], attention_mask=mask, use_cache=True, **{name: cache}
        ).last_hidden_state
    else:
        hidden = backbone(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
    targets = labels[:, shared + 1 :]
    scored = targets != -100
    logits = model.get_output_embeddings()(hidden[:, :-1][scored]).float()
    wanted = targets[scored]
    total = F.cross_entropy(logits, wanted, reduction="sum")
    count = int(scored.sum())
    denominator = num_items if num_items is not None else count
    loss = total / torch.as_tensor(denominator, device=total.device).clamp(min=1)
    correct = int((logits.argmax(dim=-1) == wanted).sum())
    return loss, count, correct


@dataclass
class TrainedSFT:
    """A finished SFT run: where it was saved, its per-step log and its timings."""

    path: Path
    config: SFTLMConfig
    history: list[dict[str, Any]]
    timings: dict[str, float]


def train_sft_lm(
    config: SFTLMConfig,
    out: str | Path,
    progress: bool = True,
    log: Any = None,
    callbacks: Sequence[Any] = (),
) -> TrainedSFT:
    """Fine-tune ``config.model`` on oracle demonstrations through the harnesses; save to ``out``.

    ``callbacks``: more ``transformers.TrainerCallback`` objects for the trainer (checkpoints
    at chosen steps, a time limit: ``experiments/lm_sft_curve.py``)."""
    import os

    import torch

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(config.threads)
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    out = Path(out)
    path = model_path(config.model)
    precision = resolve_precision(config.precision)
    tokenizer = load_tokenizer(path)
    tokenizer.padding_side = "right"  # training pads on the right; generation (eval) loads its own
    started = time.perf_counter()
    rows = demonstration_rows(config.task, config.harnesses, config.train_seeds, config.unit)
    records = []
    for row in rows:
        tools = json.loads(row["tools"]) if row["tools"] else None
        tokens = sft_tokens(tokenizer, row["messages"], tools, row["trained_from"])
        if len(tokens["input_ids"]) > config.max_length:
            raise TrainingSetupError(
                f"{config.task} seed {row['seed']} under harness {row['harness_id']}: the demonstration has "
                f"{len(tokens['input_ids'])} tokens, over max_length={config.max_length}; lower few_shot "
                "or raise the limit"
            )
        records.append(tokens)
    data_seconds = time.perf_counter() - started
    steps_per_epoch = -(-len(records) // config.batch_size)
    no_tqdm, bars = trainer_progress("sft-lm", progress)  # lines, not redraws, in a log
    args = SFTConfig(
        output_dir=str(out / "trainer"),
        per_device_train_batch_size=min(config.micro_batch_size, config.batch_size),
        gradient_accumulation_steps=config.batch_size // min(config.micro_batch_size, config.batch_size),
        num_train_epochs=config.epochs,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler,
        warmup_steps=config.warmup_steps,
        seed=config.seed,
        data_seed=config.seed,
        max_length=None,  # lengths are checked above; nothing is cut
        use_cpu=not torch.cuda.is_available(),
        bf16=precision == "bf16",
        gradient_checkpointing=config.gradient_checkpointing,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=no_tqdm,
        model_init_kwargs={"dtype": torch.float32},
        dataset_num_proc=None,
    )
    peft_config = None
    if config.lora_r > 0:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=config.lora_r, lora_alpha=config.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM"
        )
    history: list[dict[str, Any]] = []

    class _Log(TrainerCallback):
        def on_log(self, _args: Any, state: Any, _control: Any, logs: dict | None = None, **__: Any) -> None:
            if logs and "loss" in logs:
                history.append(
                    {
                        "step": state.global_step,
                        **{k: v for k, v in logs.items() if isinstance(v, int | float)},
                    }
                )
            if logs and log is not None:
                log.log(logs, step=state.global_step)

    curve = _curve_callback(config, out, tokenizer, history) if config.eval_every else None
    trainer_class = SFTTrainer
    if config.share_prefix:

        class SharedPrefixSFTTrainer(SFTTrainer):
            """TRL's SFTTrainer with :func:`shared_prefix_loss` in place of its loss."""

            def compute_loss(
                self, model: Any, inputs: dict, return_outputs: bool = False, num_items_in_batch: Any = None
            ) -> Any:
                loss, count, correct = shared_prefix_loss(model, inputs, num_items_in_batch)
                mode = "train" if self.model.training else "eval"
                self._metrics[mode]["mean_token_accuracy"].append(correct / count if count else 0.0)
                return (loss, None) if return_outputs else loss

        trainer_class = SharedPrefixSFTTrainer
    trainer = trainer_class(
        model=str(path),
        args=args,
        train_dataset=Dataset.from_list(records),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[_Log(), *([curve] if curve else []), *bars, *callbacks],
    )
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    if curve is not None:
        if not curve.stopped and trainer.state.global_step % config.eval_every:
            curve.point(trainer.model, trainer.state.global_step, curve.started)
        seconds -= curve.seconds  # training time only; the curve's evaluations are timed apart
    model = trainer.model
    if peft_config is not None:
        model = model.merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(str(out))
    shutil.rmtree(out / "trainer", ignore_errors=True)
    del trainer, model
    gc.collect()
    timings = {
        "train_seconds": seconds,
        "curve_seconds": curve.seconds if curve is not None else 0.0,
        "data_seconds": data_seconds,
        "rows": len(records),
        "tokens": sum(len(r["input_ids"]) for r in records),
        "trained_tokens": sum(sum(r["assistant_masks"]) for r in records),
        "steps": len([h for h in history if "loss" in h]) or steps_per_epoch,
        "precision": precision,
    }
    save_record(out, config, history, timings, kind="sft-lm")
    return TrainedSFT(out, config, history, timings)


def learning_curve(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``held_out`` points of a run's history: step, successes, episodes, seconds of training."""
    return [h for h in history if "held_out" in h]


def _curve_callback(config: SFTLMConfig, out: Path, tokenizer: Any, history: list[dict[str, Any]]) -> Any:
    """A trainer callback that measures greedy held-out success every ``config.eval_every`` steps.

    The model is saved to ``out/curve-model`` and evaluated from there exactly as ``harness-gym
    eval --agent hf:FOLDER`` would (:func:`~harness_gym.train.lm_eval.evaluate_folder`), so a
    curve point and a final evaluation are the same measurement.
    """
    from transformers import TrainerCallback

    from harness_gym.train import lm_eval

    folder = out / "curve-model"

    class HeldOutCurve(TrainerCallback):
        seconds = 0.0  # spent measuring the curve (left out of the training time)
        stopped = False

        def point(self, model: Any, step: int, started: float) -> float:
            began = time.perf_counter()
            was_training = model.training
            model.save_pretrained(str(folder))
            tokenizer.save_pretrained(str(folder))
            lm_eval._BACKENDS.clear()  # the folder's weights changed: load them afresh
            rate = lm_eval.evaluate_folder(
                folder,
                config.task,
                config.harnesses[0],
                config.eval_seeds,
                threads=config.threads,
                max_tokens=config.max_reply_tokens,
            )
            lm_eval._BACKENDS.clear()
            model.train(was_training)
            spent = time.perf_counter() - began
            self.seconds += spent
            history.append(
                {
                    "step": step,
                    "held_out": rate.successes,
                    "episodes": rate.episodes,
                    "train_seconds": began - started - (self.seconds - spent),
                }
            )
            print(f"step {step}: held-out greedy success {rate} ({spent:.0f} s to measure)", flush=True)
            return rate.mean

        def on_train_begin(
            self, _args: Any, _state: Any, _control: Any, model: Any = None, **__: Any
        ) -> None:
            self.started = time.perf_counter()
            self.point(model, 0, self.started)

        def on_step_end(self, _args: Any, state: Any, control: Any, model: Any = None, **__: Any) -> None:
            if state.global_step % config.eval_every:
                return
            if self.point(model, state.global_step, self.started) >= config.stop_at > 0:
                self.stopped = True
                control.should_training_stop = True

    return HeldOutCurve()
