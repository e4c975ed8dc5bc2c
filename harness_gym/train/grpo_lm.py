"""GRPO for language models through harnesses: configure, train with TRL, save, reload.

:func:`train_grpo_lm` builds the rows (:mod:`~harness_gym.train.lm_dataset`), checks what can
be known before training (the chat template, that every row's first prompt fits the context),
then runs ``trl.GRPOTrainer`` with :class:`~harness_gym.train.lm_rollout.HarnessRollout` as its
``rollout_func``. The saved folder is a Hugging Face model folder (``hf:FOLDER`` evaluates it,
``harness-gym eval --agent hf:FOLDER``) holding also ``harness.yaml`` (the first training
harness) and ``harness_gym_training.json`` (the configuration, the training harnesses, the
per-step log and timings), so a run can be replayed from what it recorded.

On CPU the model trains in fp32 with ``torch.set_num_threads(threads)``; with a GPU, TRL's
own device placement applies. LoRA (``lora_r > 0``) goes through ``peft``; the saved folder
holds the merged weights.
"""

from __future__ import annotations

import gc
import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness_gym.core.harness import Harness
from harness_gym.progress import trainer_progress
from harness_gym.train.lm_dataset import GROUPINGS, EpisodeRow, build_dataset, build_rows
from harness_gym.train.lm_rewards import DEFAULT_REWARDS, reward_functions
from harness_gym.train.lm_rollout import RolloutConfig
from harness_gym.train.precision import PRECISIONS

RECORD_NAME = "harness_gym_training.json"
HARNESS_NAME = "harness.yaml"


class TrainingSetupError(ValueError):
    """Training cannot start as configured (the message says what to change)."""


@dataclass
class GRPOLMConfig:
    """Everything a GRPO run through harnesses depends on (saved with the model).

    Attributes:
        task: the task id (``ClickButton``) every episode plays.
        harnesses: the training harnesses (YAML-able dicts are stored).
        train_seeds: task seeds of the training episodes (keep evaluation seeds apart).
        model: ``"llm"`` (the embedded SmolLM2-135M-Instruct) or a Hugging Face model folder.
        grouping: ``within`` (a group is one seed under one harness) or ``cross`` (one seed
            under several harnesses).
        group_size: completions per group (TRL's ``num_generations``).
        groups_per_step: groups in one optimizer step.
        steps: optimizer steps.
        micro_batch_size: episodes per forward/backward pass. A step's episodes are split into
            micro-batches whose gradients accumulate (TRL's loss is normalised over the whole
            step's tokens, so the step is the same); activations of long multi-turn episodes
            are what fills memory (a group of 8 in one pass needs over 24 GB on CPU).
        learning_rate: AdamW learning rate.
        beta: KL coefficient against the initial model (0 skips the reference model).
        lora_r: LoRA rank (0: train every weight).
        precision: ``fp32``, ``bf16`` (mixed precision: fp32 master weights, bf16 autocast) or
            ``auto`` (bf16 where the CPU or GPU has it natively).
        gradient_checkpointing: recompute activations in the backward pass (less memory, slower).
        vllm_mode: ``None`` (generate with the trainer's own model through transformers),
            ``"server"`` (TRL's vLLM server, ``trl vllm-serve``) or ``"colocate"`` (vLLM in the
            trainer's process). Both need CUDA; untested in this package's CI (no GPU).
        rewards: ``((reward name, weight), ...)`` from :data:`~harness_gym.train.lm_rewards.REWARDS`.
        rollout: reply and context limits and sampling temperature.
        seed: seeds TRL (data order, initialisation of LoRA) and sampling.
        threads: torch threads on CPU.
    """

    task: str
    harnesses: list[Harness]
    train_seeds: list[int]
    model: str = "llm"
    grouping: str = "within"
    group_size: int = 4
    groups_per_step: int = 1
    steps: int = 10
    micro_batch_size: int = 4
    learning_rate: float = 5e-6
    beta: float = 0.0
    lora_r: int = 0
    lora_alpha: int = 16
    precision: str = "fp32"
    gradient_checkpointing: bool = False
    vllm_mode: str | None = None
    rewards: tuple[tuple[str, float], ...] = DEFAULT_REWARDS
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    seed: int = 0
    threads: int = 2

    def __post_init__(self) -> None:
        if self.grouping not in GROUPINGS:
            raise TrainingSetupError(f"grouping must be one of {GROUPINGS}, got {self.grouping!r}")
        for name in ("group_size", "groups_per_step", "steps", "micro_batch_size", "threads"):
            if int(getattr(self, name)) < 1:
                raise TrainingSetupError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise TrainingSetupError("group_size must be at least 2: GRPO compares completions of a group")
        if self.step_episodes % self.micro_batch != 0:
            raise TrainingSetupError(
                f"micro_batch_size {self.micro_batch_size} must divide the {self.step_episodes} episodes "
                f"of a step (group_size x groups_per_step)"
            )
        if self.beta < 0 or self.learning_rate <= 0:
            raise TrainingSetupError("beta must be >= 0 and learning_rate > 0")
        if self.precision not in PRECISIONS:
            raise TrainingSetupError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if self.vllm_mode not in (None, "server", "colocate"):
            raise TrainingSetupError(
                f"vllm_mode must be None, 'server' or 'colocate', got {self.vllm_mode!r}"
            )
        reward_functions(tuple(self.rewards))

    @property
    def step_episodes(self) -> int:
        """Episodes played (and trained on) per optimizer step."""
        return int(self.group_size) * int(self.groups_per_step)

    @property
    def micro_batch(self) -> int:
        """Episodes per forward/backward pass (never more than a step holds)."""
        return min(int(self.micro_batch_size), self.step_episodes)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["harnesses"] = [h.to_dict(full=False) for h in self.harnesses]
        data["harness_ids"] = [h.id for h in self.harnesses]
        data["rewards"] = [list(r) for r in self.rewards]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GRPOLMConfig:
        data = {k: v for k, v in data.items() if k not in ("harness_ids", "kind")}
        data["harnesses"] = [Harness.from_dict(h) for h in data["harnesses"]]
        data["rewards"] = tuple(tuple(r) for r in data["rewards"])
        data["rollout"] = RolloutConfig(**data["rollout"])
        return cls(**data)


@dataclass
class TrainedLM:
    """A finished run: where it was saved, its per-step log and its timings."""

    path: Path
    config: GRPOLMConfig
    history: list[dict[str, Any]]
    timings: dict[str, float]


def model_path(model: str) -> Path:
    """The folder of ``"llm"`` (the embedded model, converted once) or of a given path."""
    if model == "llm":
        from harness_gym.llm.embedded import embedded_model_path

        return Path(embedded_model_path())
    path = Path(model).expanduser()
    if not (path / "config.json").is_file():
        raise TrainingSetupError(
            f"--model {model!r} is not a Hugging Face model folder (no config.json there); "
            "give 'llm' for the embedded model or a folder written by save_pretrained"
        )
    return path


def load_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def check_prompts_fit(rows: list[EpisodeRow], tokenizer: Any, rollout: RolloutConfig) -> None:
    """Raise if a row's first prompt plus one reply exceeds the context (known before training)."""
    from harness_gym.train.chat_tokens import ChatTokenizer
    from harness_gym.train.lm_rollout import EnvPool, _messages

    limit = rollout.max_context_tokens
    if limit is None:
        return
    chat = ChatTokenizer(tokenizer)
    pool = EnvPool()
    try:
        for row in rows:
            for harness in row.harnesses:
                env = pool.take(row.task, harness)
                observation, _ = env.reset(seed=row.seed)
                tools = env.bound.openai_tools if harness.tool_channel == "native" else None
                n = len(chat.prompt_ids(_messages(env, observation, []), tools))
                pool.give_back(row.task, env)
                if n + rollout.max_reply_tokens > limit:
                    raise TrainingSetupError(
                        f"{row.task} seed {row.seed} under harness {harness.id}: the first prompt has "
                        f"{n} tokens, and with a {rollout.max_reply_tokens}-token reply it exceeds "
                        f"max_context_tokens={limit}; lower few_shot or raise the limit"
                    )
    finally:
        pool.close()


def train_grpo_lm(config: GRPOLMConfig, out: str | Path, progress: bool = True, log: Any = None) -> TrainedLM:
    """Train ``config.model`` with GRPO through the configured harnesses and save it to ``out``;
    each step's logged scalars also go to ``log`` (a :class:`harness_gym.logging_backends.RunLog`)."""
    import os

    import torch

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(config.threads)
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from harness_gym.train.lm_rollout import HarnessRollout
    from harness_gym.train.precision import resolve_precision

    precision = resolve_precision(config.precision)
    if config.vllm_mode is not None and not torch.cuda.is_available():
        raise TrainingSetupError(
            f"vllm_mode={config.vllm_mode!r} needs CUDA (TRL's vLLM generation pushes weights over NCCL "
            "or runs vLLM in process); without a GPU leave it unset: generation uses the trainer's model"
        )
    vllm = {} if config.vllm_mode is None else {"use_vllm": True, "vllm_mode": config.vllm_mode}

    out = Path(out)
    path = model_path(config.model)
    tokenizer = load_tokenizer(path)
    rows = build_rows(config.task, config.harnesses, config.train_seeds, config.grouping, config.group_size)
    rollout = HarnessRollout(rows, tokenizer, config.rollout)  # checks the chat template
    check_prompts_fit(rows, tokenizer, config.rollout)
    funcs, weights = reward_functions(tuple(config.rewards))
    no_tqdm, bars = trainer_progress("grpo-lm", progress)  # lines, not redraws, in a log
    args = GRPOConfig(
        output_dir=str(out / "trainer"),
        # One generation batch (every episode of a step) per optimizer step, trained on in
        # micro-batches: TRL generates per_device_train_batch_size x steps_per_generation
        # completions, and steps_per_generation defaults to gradient_accumulation_steps.
        per_device_train_batch_size=config.micro_batch,
        gradient_accumulation_steps=config.step_episodes // config.micro_batch,
        num_generations=config.group_size,
        max_steps=config.steps,
        learning_rate=config.learning_rate,
        beta=config.beta,
        seed=config.seed,
        data_seed=config.seed,
        temperature=config.rollout.temperature if config.rollout.temperature > 0 else 1.0,
        top_p=config.rollout.top_p,
        max_completion_length=config.rollout.max_reply_tokens,
        reward_weights=weights,
        use_cpu=not torch.cuda.is_available(),
        bf16=precision == "bf16",
        gradient_checkpointing=config.gradient_checkpointing,
        **vllm,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=no_tqdm,
        model_init_kwargs={"dtype": torch.float32},
    )
    peft_config = None
    if config.lora_r > 0:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=config.lora_r, lora_alpha=config.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM"
        )
    history: list[dict[str, Any]] = []
    clock = {"start": 0.0}

    class _Log(TrainerCallback):
        def on_step_begin(self, *_: Any, **__: Any) -> None:
            clock["start"] = time.perf_counter()
            clock["env"] = rollout.timings["env"]
            clock["rollout"] = rollout.timings["rollout"]

        def on_step_end(self, _args: Any, state: Any, *_: Any, **__: Any) -> None:
            history.append(
                {
                    "step": state.global_step,
                    "seconds": time.perf_counter() - clock["start"],
                    "env_seconds": rollout.timings["env"] - clock["env"],
                    "rollout_seconds": rollout.timings["rollout"] - clock["rollout"],
                }
            )

        def on_log(self, _args: Any, state: Any, _control: Any, logs: dict | None = None, **__: Any) -> None:
            if logs and history and history[-1]["step"] == state.global_step:
                history[-1].update({k: v for k, v in logs.items() if isinstance(v, int | float)})
            if logs and log is not None:
                log.log(logs, step=state.global_step)

    trainer = GRPOTrainer(
        model=str(path),
        reward_funcs=funcs,
        args=args,
        train_dataset=build_dataset(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
        rollout_func=rollout,
        callbacks=[_Log(), *bars],
    )
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    rollout.pool.close()
    model = trainer.model
    if peft_config is not None:
        model = model.merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    shutil.rmtree(out / "trainer", ignore_errors=True)  # TRL's scratch folder (nothing is checkpointed)
    del trainer, model  # free the optimizer state and activations before the caller goes on
    gc.collect()
    timings = {
        "train_seconds": seconds,
        "rollout_seconds": rollout.timings["rollout"],
        "env_seconds": rollout.timings["env"],
        "episodes": rollout.timings["episodes"],
    }
    save_record(out, config, history, timings)
    return TrainedLM(out, config, history, timings)


def save_record(
    out: Path, config: Any, history: list[dict], timings: dict[str, Any], kind: str = "grpo-lm"
) -> None:
    """Write the training record (``kind``: the algorithm, grpo-lm or sft-lm) and the first
    training harness beside the model."""
    import harness_gym

    record = {
        "kind": kind,
        "harness_gym_version": getattr(harness_gym, "__version__", "unknown"),
        "config": config.to_dict(),
        "history": history,
        "timings": timings,
    }
    (out / RECORD_NAME).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", "utf-8")
    (out / HARNESS_NAME).write_text(config.harnesses[0].to_yaml(), "utf-8")


def load_record(folder: str | Path) -> tuple[GRPOLMConfig, dict[str, Any]]:
    """The configuration and the full record of a saved run."""
    path = Path(folder) / RECORD_NAME
    if not path.is_file():
        raise TrainingSetupError(f"{folder} holds no {RECORD_NAME}: not a folder written by grpo-lm training")
    record = json.loads(path.read_text("utf-8"))
    return GRPOLMConfig.from_dict(record["config"]), record
