"""``harness-gym train --algo sft-lm | grpo-lm``: a language model trained through harnesses (TRL).

    harness-gym train --algo sft-lm --model llm --env harness_gym/ClickButton-v0 --harness H.yaml \\
        --train-seeds 256 --epochs 2 --out runs/cb-sft
    harness-gym train --algo grpo-lm --model runs/cb-sft --env harness_gym/ClickButton-v0 --steps 5 \\
        --out runs/cb-rl
    harness-gym train --algo grpo-lm --model llm --env harness_gym/ClickButton-JsonFewShot-v0 \\
        --steps 20 --group-size 4 --out runs/cb-grpo
    harness-gym train --algo grpo-lm --model llm --env harness_gym/ClickButton-JsonFewShot-v0 \\
        --space examples/llm-space.yaml --subset balanced:1 --grouping cross --steps 20 --out runs/cb-cross
    harness-gym eval --agent hf:runs/cb-grpo --env harness_gym/ClickButton-JsonFewShot-v0 --episodes 50

The task is the ``--env``'s; the training harnesses are the env's harness (or ``--harness``),
or, with ``--space``, the harnesses of ``--subset`` of that space. Training seeds are
``--train-seed-start`` onward (evaluation uses seeds 0.. by default, which training never
draws). Every argument is checked before torch, transformers and TRL are imported.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from harness_gym.cli.common import (
    CommandError,
    make_env,
    non_negative_float,
    non_negative_int,
    output_dir,
    positive_float,
    positive_int,
    require_env_id,
    seed_int,
)
from harness_gym.logging_backends import cli_log
from harness_gym.train.sft_lm import LR_SCHEDULERS, VALIDATION_SEED_START

TRAIN_SEED_START = 10_000


LM_ALGOS = ("sft-lm", "grpo-lm")
PRECISIONS = ("auto", "fp32", "bf16")
VLLM_MODES = ("server", "colocate")
SFT_LEARNING_RATE = 1e-4  # learns ClickButton in either element order; 5e-4 stalled (lm_field_order.md)
SFT_TRAIN_SEEDS = 800  # 100 steps of 8: what the slower element order (ref before text) needed
GRPO_TRAIN_SEEDS = 64
GRPO_LEARNING_RATE = 5e-6
#: The options (argparse ``dest``) of this group: both LM algos read them, except these.
LM_OPTIONS = (
    "lm_model", "space", "subset", "micro_batch", "train_seeds", "train_seed_start", "learning_rate",
    "precision", "gradient_checkpointing", "max_context_tokens", "lora_r",
)  # fmt: skip
SFT_ONLY = (
    "epochs", "batch_size", "unit", "lr_scheduler", "warmup_steps", "eval_every", "curve_seeds", "stop_at",
)  # fmt: skip
GRPO_ONLY = ("group_size", "groups_per_step", "beta", "max_tokens", "temperature", "vllm_mode")
#: Config fields the command line sets itself (not through --hyperparams).
SET_BY_COMMAND = ("task", "harnesses", "train_seeds", "model", "rollout")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options only ``--algo sft-lm`` and ``--algo grpo-lm`` read."""
    group = parser.add_argument_group("language models (--algo sft-lm, grpo-lm)")
    group.add_argument(
        "--model", dest="lm_model", default="llm", help="'llm' (embedded) or a HF model folder"
    )
    group.add_argument("--space", help="train under the harnesses of this space (YAML)")
    group.add_argument("--subset", default=None, help="which harnesses of --space (default: balanced)")
    group.add_argument("--group-size", type=positive_int, default=4, help="completions per GRPO group")
    group.add_argument("--groups-per-step", type=positive_int, default=1, help="groups per optimizer step")
    group.add_argument(
        "--micro-batch",
        type=positive_int,
        default=4,
        help="episodes per forward/backward pass (gradients accumulate over a step; lower it if memory "
        "runs out)",
    )
    group.add_argument(
        "--train-seeds",
        type=positive_int,
        default=None,
        help=f"distinct training seeds (default {SFT_TRAIN_SEEDS} sft-lm, {GRPO_TRAIN_SEEDS} grpo-lm)",
    )
    group.add_argument(
        "--train-seed-start", type=seed_int, default=TRAIN_SEED_START, help="first training seed"
    )
    group.add_argument(
        "--learning-rate",
        type=positive_float,
        default=None,
        help=f"AdamW learning rate (default {SFT_LEARNING_RATE} sft-lm, {GRPO_LEARNING_RATE} grpo-lm)",
    )
    group.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp32",
        help="bf16: mixed precision (fp32 master weights); auto: bf16 where the CPU or GPU has it",
    )
    group.add_argument(
        "--gradient-checkpointing", action="store_true", help="recompute activations (less memory, slower)"
    )
    group.add_argument(
        "--max-context-tokens",
        type=positive_int,
        default=2048,
        help="grpo-lm: most tokens of an episode; sft-lm: longest demonstration",
    )
    group.add_argument(
        "--epochs", type=positive_float, default=1.0, help="sft-lm: passes over the demonstrations"
    )
    group.add_argument(
        "--lr-scheduler",
        choices=LR_SCHEDULERS,
        default="linear",
        help="sft-lm: the learning rate's schedule after warm-up (linear: decay to 0 at the last step)",
    )
    group.add_argument(
        "--warmup-steps", type=non_negative_int, default=5, help="sft-lm: optimizer steps of linear warm-up"
    )
    group.add_argument(
        "--eval-every",
        type=non_negative_int,
        default=0,
        help="sft-lm: measure greedy success on --curve-seeds validation seeds every N steps (the learning "
        "curve, in the training record); 0: never",
    )
    group.add_argument(
        "--curve-seeds", type=positive_int, default=30, help="sft-lm: validation seeds of the learning curve"
    )
    group.add_argument(
        "--stop-at",
        type=non_negative_float,
        default=0.0,
        help="sft-lm: stop at the first curve point with this success or more (e.g. 0.9; needs --eval-every)",
    )
    group.add_argument("--batch-size", type=positive_int, default=8, help="sft-lm: rows per optimizer step")
    group.add_argument(
        "--unit",
        choices=("step", "episode"),
        default="step",
        help="sft-lm: a row is one step (what eval sends) or one whole episode (what grpo-lm sees)",
    )
    group.add_argument(
        "--beta", type=non_negative_float, default=0.0, help="KL coefficient (0: no reference model)"
    )
    group.add_argument(
        "--lora-r", type=non_negative_int, default=0, help="LoRA rank through peft (0: full fine-tuning)"
    )
    group.add_argument("--max-tokens", type=positive_int, default=48, help="most tokens per reply")
    group.add_argument(
        "--temperature", type=positive_float, default=1.0, help="sampling temperature in training"
    )
    group.add_argument(
        "--vllm-mode",
        choices=VLLM_MODES,
        default=None,
        help="grpo-lm: generate through TRL's vLLM (server: a `trl vllm-serve` process; colocate: in "
        "process). Needs CUDA; untested in this package (no GPU in its CI)",
    )


def training_harnesses(args: argparse.Namespace) -> tuple[str, str, list]:
    """The env id, the task and the training harnesses the arguments name (checked, nothing written)."""
    from harness_gym.core.presets import resolve_harness

    if len(args.env) != 1:
        raise CommandError(f"--algo {args.algo} trains on one task: give one --env, got {len(args.env)}")
    env_id = require_env_id(args.env[0])
    if args.harness is not None:
        resolve_harness(args.harness)
    probe = make_env(env_id, args.harness)
    task = probe.unwrapped.task.task_id
    harnesses = [probe.unwrapped.harness]
    probe.close()
    if args.space is not None:
        from harness_gym.analysis.sweep.spec import select_harnesses

        points, _, _, _ = select_harnesses(args.space, args.subset)
        harnesses = [p.harness for p in points]
    elif args.subset is not None:
        raise CommandError("--subset needs --space")
    return env_id, task, harnesses


def check_precision(precision: str) -> None:
    """Refuse bf16 on a machine without it (known before torch trains anything)."""
    if precision != "bf16":
        return
    from harness_gym.train.precision import bf16_supported

    if not bf16_supported():
        raise CommandError(
            "--precision bf16: this machine has no native bf16 (no CUDA bf16, no AVX-512 BF16 / AMX); "
            "use fp32 or auto"
        )


def check_vllm_mode(mode: str | None) -> None:
    """Refuse vLLM generation without CUDA (TRL's vLLM modes need a GPU; known before training)."""
    if mode is None:
        return
    import torch

    if not torch.cuda.is_available():
        raise CommandError(
            f"--vllm-mode {mode} needs CUDA (TRL's vLLM generation runs on a GPU) and this machine has "
            "none; leave it out: generation then uses the trainer's model"
        )


def hyperparams(args: argparse.Namespace) -> dict[str, object]:
    """``--hyperparams`` as fields of the algo's config, checked before anything loads: an
    unknown key is refused, and so is a key that an option of its own sets (give the option)."""
    from dataclasses import fields

    from harness_gym.cli.common import json_object
    from harness_gym.train.grpo_lm import GRPOLMConfig
    from harness_gym.train.sft_lm import SFTLMConfig

    given = json_object(args.hyperparams, "--hyperparams")
    tuned = getattr(args, "tuned", None)  # the task's entry in harness_gym/baselines/hyperparams/
    given = {**(tuned.hyperparams if tuned is not None else {}), **given}
    config = SFTLMConfig if args.algo == "sft-lm" else GRPOLMConfig
    known = [f.name for f in fields(config) if f.name not in SET_BY_COMMAND]
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise CommandError(
            f"--hyperparams: --algo {args.algo} has no {', '.join(map(repr, unknown))}; "
            f"its keys: {', '.join(known)}"
        )
    return given


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Train with ``--algo`` (sft-lm or grpo-lm), save to ``--out``, evaluate greedily on seeds 0.."""
    args.lm_hyperparams = hyperparams(args)
    if args.algo == "sft-lm":
        return run_sft(args, out)
    return run_grpo(args, out)


def _config(config: type, args: argparse.Namespace, **kwargs: object) -> object:
    """The algo's config from its options, then ``--hyperparams`` (which override them)."""
    kwargs.update(args.lm_hyperparams)
    return config(**kwargs)


def run_sft(args: argparse.Namespace, out: TextIO) -> int:
    """Check the arguments, fine-tune on oracle demonstrations, save, evaluate."""
    env_id, task, harnesses = training_harnesses(args)
    if args.steps is not None:
        raise CommandError(
            "--steps is for grpo-lm: sft-lm trains for --epochs passes over the demonstrations"
        )
    if args.grouping != "within":
        raise CommandError("--grouping is for grpo-lm (GRPO groups); sft-lm has no groups")
    if args.vllm_mode is not None:
        raise CommandError("--vllm-mode is for grpo-lm (its rollouts' generation); sft-lm generates nothing")
    args.train_seeds = SFT_TRAIN_SEEDS if args.train_seeds is None else args.train_seeds
    if args.stop_at > 1 or (args.stop_at and not args.eval_every):
        raise CommandError(
            f"--stop-at {args.stop_at}: a success rate from 0 to 1, and it needs --eval-every N (the curve)"
        )
    if args.train_seeds < len(harnesses):
        raise CommandError(
            f"--train-seeds {args.train_seeds} cannot demonstrate {len(harnesses)} harnesses "
            "(seed i is played under harness i mod H): give at least one seed per harness"
        )
    if args.batch_size % min(args.micro_batch, args.batch_size):
        raise CommandError(f"--micro-batch {args.micro_batch} must divide --batch-size {args.batch_size}")
    check_precision(args.precision)
    output_dir(args.out)

    from harness_gym.llm.embedded import EmbeddedModelError
    from harness_gym.train.chat_tokens import ChatTemplateError
    from harness_gym.train.grpo_lm import TrainingSetupError
    from harness_gym.train.sft_lm import SFTLMConfig, train_sft_lm

    try:
        config = _config(
            SFTLMConfig,
            args,
            task=task,
            harnesses=harnesses,
            train_seeds=list(range(args.train_seed_start, args.train_seed_start + args.train_seeds)),
            model=args.lm_model,
            unit=args.unit,
            epochs=args.epochs,
            batch_size=args.batch_size,
            micro_batch_size=args.micro_batch,
            learning_rate=args.learning_rate or SFT_LEARNING_RATE,
            lr_scheduler=args.lr_scheduler,
            warmup_steps=args.warmup_steps,
            eval_every=args.eval_every,
            eval_seeds=list(range(VALIDATION_SEED_START, VALIDATION_SEED_START + args.curve_seeds)),
            stop_at=args.stop_at,
            lora_r=args.lora_r,
            precision=args.precision,
            gradient_checkpointing=args.gradient_checkpointing,
            max_length=args.max_context_tokens,
            seed=args.seed,
            threads=args.threads,
        )
        with cli_log(args, "sft_lm", f"sft-lm-{task}", config.to_dict()) as run_log:
            trained = train_sft_lm(config, args.out, log=run_log)
    except (TrainingSetupError, ChatTemplateError, EmbeddedModelError, ValueError) as err:
        raise CommandError(str(err)) from None
    t = trained.timings
    out.write(
        f"saved {task} model fine-tuned on {t['rows']} oracle demonstrations ({len(harnesses)} harness(es), "
        f"{t['steps']} steps, {t['precision']}) to {trained.path}; {t['train_seconds']:.0f} s\n"
    )
    _evaluate(args, out, trained.path, env_id, task, harnesses[0])
    return 0


def _evaluate(args: argparse.Namespace, out: TextIO, path, env_id: str, task: str, harness) -> None:  # noqa: ANN001
    if args.eval_episodes > 0:
        from harness_gym.train.lm_eval import evaluate_folder

        rate = evaluate_folder(path, task, harness, range(args.eval_episodes), threads=args.threads)
        out.write(f"greedy success on {env_id} (seeds 0..{args.eval_episodes - 1}): {100 * rate.mean:.1f}%\n")
    out.write(f"evaluate under any harness: harness-gym eval --agent hf:{path} --env ...\n")


def run_grpo(args: argparse.Namespace, out: TextIO) -> int:
    """Check the arguments, train with GRPO, save to ``--out``, evaluate greedily on seeds 0.."""
    env_id, task, harnesses = training_harnesses(args)
    args.steps = (args.tuned.steps or 10) if args.steps is None else args.steps
    args.train_seeds = GRPO_TRAIN_SEEDS if args.train_seeds is None else args.train_seeds
    if args.temperature <= 0:
        raise CommandError("--temperature must be > 0 in training: GRPO needs different completions")
    step_episodes = args.group_size * args.groups_per_step
    if step_episodes % min(args.micro_batch, step_episodes):
        raise CommandError(
            f"--micro-batch {args.micro_batch} must divide the {step_episodes} episodes of a step "
            "(--group-size x --groups-per-step)"
        )
    if args.grouping == "cross" and len(harnesses) < 2:
        raise CommandError("--grouping cross compares harnesses: give --space with at least two")
    check_precision(args.precision)
    check_vllm_mode(args.vllm_mode)
    output_dir(args.out)

    from harness_gym.llm.embedded import EmbeddedModelError
    from harness_gym.train.chat_tokens import ChatTemplateError
    from harness_gym.train.grpo_lm import GRPOLMConfig, TrainingSetupError, train_grpo_lm
    from harness_gym.train.lm_rollout import RolloutConfig

    try:
        config = _config(
            GRPOLMConfig,
            args,
            task=task,
            harnesses=harnesses,
            train_seeds=list(range(args.train_seed_start, args.train_seed_start + args.train_seeds)),
            model=args.lm_model,
            grouping=args.grouping,
            group_size=args.group_size,
            groups_per_step=args.groups_per_step,
            micro_batch_size=args.micro_batch,
            steps=args.steps,
            learning_rate=args.learning_rate or GRPO_LEARNING_RATE,
            beta=args.beta,
            lora_r=args.lora_r,
            precision=args.precision,
            gradient_checkpointing=args.gradient_checkpointing,
            rollout=RolloutConfig(
                max_reply_tokens=args.max_tokens,
                max_context_tokens=args.max_context_tokens,
                temperature=args.temperature,
            ),
            seed=args.seed,
            threads=args.threads,
            vllm_mode=args.vllm_mode,
        )
        with cli_log(args, "grpo_lm", f"grpo-lm-{task}", config.to_dict()) as run_log:
            trained = train_grpo_lm(config, args.out, log=run_log)
    except (TrainingSetupError, ChatTemplateError, EmbeddedModelError, ValueError) as err:
        raise CommandError(str(err)) from None
    t = trained.timings
    share = t["env_seconds"] / t["train_seconds"] if t["train_seconds"] else 0.0
    out.write(
        f"saved {task} model trained with GRPO ({args.grouping}, {len(harnesses)} harness(es), "
        f"{args.steps} steps) to {trained.path}; {t['train_seconds']:.0f} s, env share {100 * share:.1f}%\n"
    )
    _evaluate(args, out, trained.path, env_id, task, harnesses[0])
    return 0
