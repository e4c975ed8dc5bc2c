"""GRPO through harnesses: seconds per training step and the environment's share of it.

    .venv/bin/python benchmarks/grpo_step.py [--group-sizes 4 8] [--steps 3] [--threads 2]
        [--task ClickButton] [--few-shot 2] [--max-tokens 32] [--micro-batch 4]

For each group size, trains the embedded model (SmolLM2-135M-Instruct) for ``--steps`` GRPO
steps (one group per step, full fine-tuning, fp32 on CPU, forward/backward passes of
``--micro-batch`` episodes: a group of 8 in one pass runs a 24 GB machine out of memory) with
:func:`harness_gym.train.grpo_lm.train_grpo_lm` and reports, per step: wall seconds, seconds
in the rollout (generation + envs), seconds in the envs (reset and step), and the env's share
of step time. The first step (warm-up: allocation, first forward) is shown but left out of
the means. Target: env share under 5%. Both group sizes run in one process, side by side, so
their ratio is comparable; absolute seconds depend on what else runs on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group-sizes", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--task", default="ClickButton")
    parser.add_argument("--few-shot", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--micro-batch", type=int, default=4, help="episodes per forward/backward pass")
    args = parser.parse_args()

    from harness_gym.core.harness import Harness
    from harness_gym.train.grpo_lm import GRPOLMConfig, train_grpo_lm
    from harness_gym.train.lm_rollout import RolloutConfig

    results = {}
    for size in args.group_sizes:
        config = GRPOLMConfig(
            task=args.task,
            harnesses=[Harness(few_shot=args.few_shot)],
            train_seeds=list(range(10_000, 10_000 + 4 * args.steps)),
            group_size=size,
            micro_batch_size=args.micro_batch,
            steps=args.steps,
            rollout=RolloutConfig(max_reply_tokens=args.max_tokens),
            threads=args.threads,
        )
        with tempfile.TemporaryDirectory() as tmp:
            run = train_grpo_lm(config, Path(tmp) / "model", progress=False)
        results[size] = run.history
        print(f"group size {size} (micro-batches of {config.micro_batch}):", flush=True)
        print("  step  seconds  rollout  env      env share")
        for h in run.history:
            share = h["env_seconds"] / h["seconds"] if h["seconds"] else 0.0
            print(
                f"  {h['step']:>4}  {h['seconds']:7.2f}  {h['rollout_seconds']:7.2f}  "
                f"{h['env_seconds']:7.4f}  {100 * share:6.2f}%"
            )
    print("\nsummary (steps after the first):")
    means = {}
    for size, history in results.items():
        steady = history[1:] or history
        seconds = statistics.mean(h["seconds"] for h in steady)
        env = statistics.mean(h["env_seconds"] for h in steady)
        means[size] = seconds
        print(
            f"  group size {size}: {seconds:.2f} s per step, {seconds / size:.2f} s per episode, "
            f"env share {100 * env / seconds:.3f}% (target < 5%)"
        )
    sizes = sorted(means)
    if len(sizes) >= 2:
        a, b = sizes[0], sizes[-1]
        print(
            f"  step time ratio group {b} / group {a}: {means[b] / means[a]:.2f}x "
            f"for {b / a:.0f}x the episodes"
        )


if __name__ == "__main__":
    main()
