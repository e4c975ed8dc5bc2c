"""Step overhead of a stack of four perturbation wrappers over the bare HarnessEnv.

    .venv/bin/python benchmarks/wrapper_overhead.py [--task LoginUser] [--steps 5000] [--rounds 7]

Both envs present the task through the *same* effective harness (the bare env gets the
composed spec directly), so the difference is the wrappers' own cost. Measured side by side,
interleaved round by round; the ratio is what counts. Target: under 15% overhead.
"""

from __future__ import annotations

import argparse
import statistics

import gymnasium as gym
from step_throughput import per_step  # the same timing loop, side by side

from harness_gym import make_env
from harness_gym.wrappers import Reformat, RenameTools, ReorderFields, RestyleTools


def stacked(task: str) -> gym.Env:
    env = make_env(task)
    env = ReorderFields(env)
    env = RenameTools(env, {"click": "tap"})
    env = RestyleTools(env, "python")
    return Reformat(env, "markdown")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="LoginUser")
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    wrapped = stacked(args.task)
    bare = make_env(args.task, wrapped.unwrapped.harness)
    times: dict[str, list[float]] = {"bare": [], "wrapped": []}
    for r in range(args.rounds):
        times["bare"].append(per_step(bare, args.steps, r))
        times["wrapped"].append(per_step(wrapped, args.steps, r))
    bare_t, wrapped_t = (statistics.median(times[k]) for k in ("bare", "wrapped"))
    print(f"task={args.task} harness: {bare.harness.describe()}")
    print(f"bare HarnessEnv      {bare_t * 1e6:8.1f} us/step")
    print(f"4 wrappers stacked   {wrapped_t * 1e6:8.1f} us/step")
    overhead = wrapped_t / bare_t - 1
    print(f"overhead = {overhead:+.1%} ({'meets' if overhead < 0.15 else 'misses'} the <15% target)")


if __name__ == "__main__":
    main()
