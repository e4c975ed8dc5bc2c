"""Step throughput: the bare task, HarnessEnv under every preset, and CartPole-v1, side by side.

    .venv/bin/python benchmarks/step_throughput.py [--task EnterText] [--steps 5000] [--rounds 5]
        [--presets Json BundleXml ...]

All envs run in the same process, interleaved round by round, so machine noise hits them
alike; the figure that matters is the ratio of step times, not the absolute rate. The agent
picks a random legal action (pre-drawn indices), and resets count toward the time as they
would in training. Targets: HarnessEnv under the Json preset within 5x CartPole-v1's step
time, and under every preset within 10x.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import harness_gym
from harness_gym import PRESETS

#: The clock the rounds are timed with (``--clock``): wall time, or this process's CPU time,
#: which a machine loaded by other processes disturbs less.
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.perf_counter


def time_harness_env(env_id: str, steps: int, seed: int) -> float:
    return per_step(gym.make(env_id), steps, seed)


def per_step(env: gym.Env, steps: int, seed: int) -> float:
    """Seconds per step of a random legal-action policy (pre-drawn picks), resets included."""
    picks = np.random.default_rng(seed).random(steps)
    _, info = env.reset(seed=seed)
    start = clock()
    for i in range(steps):
        legal = info["legal_actions"]
        _, _, terminated, truncated, info = env.step(legal[int(picks[i] * len(legal))])
        if terminated or truncated:
            _, info = env.reset()
    return (clock() - start) / steps


def time_bare_task(task_id: str, steps: int, seed: int) -> float:
    task = harness_gym.get_task(task_id)()
    rng = np.random.default_rng(seed)
    picks = rng.random(steps)
    task.reset(rng)
    start = clock()
    for i in range(steps):
        legal = task.legal_actions()
        result = task.step(legal[int(picks[i] * len(legal))])
        task.fields()
        if result.terminated:
            task.reset(rng)
    return (clock() - start) / steps


def time_cartpole(steps: int, seed: int) -> float:
    env = gym.make("CartPole-v1")
    actions = np.random.default_rng(seed).integers(0, 2, steps)
    env.reset(seed=seed)
    start = clock()
    for i in range(steps):
        _, _, terminated, truncated, _ = env.step(int(actions[i]))
        if terminated or truncated:
            env.reset()
    return (clock() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="EnterText")
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clock", choices=list(CLOCKS), default="wall", help="wall or process CPU time")
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), help="presets to time (default: all)")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    unknown = [p for p in args.presets if p not in PRESETS]
    if unknown:
        parser.error(f"unknown preset(s) {unknown}; choose from {list(PRESETS)}")

    runners: dict[str, Callable[[int], float]] = {
        "CartPole-v1": lambda s: time_cartpole(args.steps, s),
        f"bare task {args.task}": lambda s: time_bare_task(args.task, args.steps, s),
    }
    for preset in dict.fromkeys(["Json", *args.presets]):
        env_id = f"harness_gym/{args.task}-{preset}-v0"
        runners[f"HarnessEnv {preset}"] = lambda s, e=env_id: time_harness_env(e, args.steps, s)
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for r in range(args.rounds):
        for name, run in runners.items():
            samples[name].append(run(r))
    median = {name: statistics.median(v) for name, v in samples.items()}
    ref = median["CartPole-v1"]
    print(
        f"task={args.task} steps/round={args.steps} rounds={args.rounds} clock={args.clock} "
        "(median per-step time)"
    )
    print(f"{'env':<28}{'steps/s':>12}{'us/step':>10}{'x CartPole time':>18}")
    for name, t in median.items():
        print(f"{name:<28}{1 / t:>12,.0f}{t * 1e6:>10.1f}{t / ref:>18.2f}")
    json_ratio = median["HarnessEnv Json"] / ref
    verdict = "meets" if json_ratio <= 5 else "misses"
    print(f"\nHarnessEnv Json / CartPole-v1 step time = {json_ratio:.2f}x ({verdict} the 5x target)")
    worst = max((n for n in median if n.startswith("HarnessEnv ")), key=median.__getitem__)
    worst_ratio = median[worst] / ref
    verdict = "meets" if worst_ratio <= 10 else "misses"
    print(f"slowest preset: {worst} = {worst_ratio:.2f}x ({verdict} the 10x target for every preset)")


if __name__ == "__main__":
    main()
