"""Step cost in machine instructions (valgrind), CartPole-v1 and HarnessEnv presets side by side.

    .venv/bin/python benchmarks/step_instructions.py [--task EnterText] [--presets Json BundleXml ...]
        [--steps 1000] [--against /path/to/other/checkout]

On a machine loaded by other work, step times (``step_throughput.py``) move by tens of
percent from run to run. Instruction counts do not: each runner plays ``300`` and then
``300 + steps`` steps under ``valgrind --tool=cachegrind --cache-sim=no`` and the difference,
divided by ``steps``, is its instructions per step (start-up, import and warm-up cancel out).
The same random legal-action agent and resets as ``step_throughput.py``. Instructions leave
out what memory traffic costs, so the step-time ratio of an allocation-heavy env is larger
than its instruction ratio: use this to compare two versions, and the time benchmark for the
target. About a minute per runner and version under valgrind; needs ``valgrind`` on PATH.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

WARMUP = 300


def play(runner: str, task: str, steps: int) -> None:
    """The child: ``steps`` steps of ``runner`` (``CartPole`` or a preset name)."""
    import gymnasium as gym
    import numpy as np

    if runner == "CartPole":
        env = gym.make("CartPole-v1")
        env.reset(seed=0)
        actions = np.random.default_rng(0).integers(0, 2, steps)
        for i in range(steps):
            _, _, terminated, truncated, _ = env.step(int(actions[i]))
            if terminated or truncated:
                env.reset()
        return
    import harness_gym  # noqa: F401  (registers the ids)

    env = gym.make(f"harness_gym/{task}-{runner}-v0")
    picks = np.random.default_rng(0).random(steps)
    _, info = env.reset(seed=0)
    for i in range(steps):
        legal = info["legal_actions"]
        _, _, terminated, truncated, info = env.step(legal[int(picks[i] * len(legal))])
        if terminated or truncated:
            _, info = env.reset()


def instructions(root: Path, runner: str, task: str, steps: int) -> int:
    """Instructions valgrind counts for one child run."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    command += [sys.executable, __file__, "--play", runner, f"--task={task}", f"--steps={steps}"]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stderr
    match = re.search(r"I\s+refs:\s+([\d,]+)", out)
    if match is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{out[-2000:]}")
    return int(match.group(1).replace(",", ""))


def per_step(root: Path, runner: str, task: str, steps: int) -> float:
    return (
        instructions(root, runner, task, WARMUP + steps) - instructions(root, runner, task, WARMUP)
    ) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="EnterText")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--presets", nargs="+", default=["Json"])
    parser.add_argument("--against", type=Path, help="another checkout's root, counted too")
    parser.add_argument("--play", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.play:
        play(args.play, args.task, args.steps)
        return
    trees = {"this": Path(__file__).resolve().parents[1]}
    if args.against is not None:
        trees = {"against": args.against.resolve(), **trees}
    cartpole = per_step(trees["this"], "CartPole", args.task, args.steps)  # no harness_gym inside
    print(f"task={args.task} steps={args.steps} (instructions per step, after {WARMUP} warm-up steps)")
    print(f"CartPole-v1: {cartpole:,.0f}")
    print(f"{'env':<28}" + "".join(f"{label + ' x CartPole':>22}" for label in trees))
    for preset in args.presets:
        counts = [per_step(root, preset, args.task, args.steps) for root in trees.values()]
        print(f"{'HarnessEnv ' + preset:<28}" + "".join(f"{c / cartpole:>22.2f}" for c in counts))


if __name__ == "__main__":
    main()
