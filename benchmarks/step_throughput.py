"""Step throughput: the bare task, HarnessEnv under every preset, and CartPole-v1, side by side.

    .venv/bin/python benchmarks/step_throughput.py [--tasks all | --task EnterText] [--steps 2000]
        [--rounds 3] [--presets Json BundleXml ...] [--quick] [--clock cpu]
        [--against /path/to/other/checkout]

All envs run in the same process, interleaved round by round, so machine noise hits them
alike; the figure that matters is the ratio of step times, not the absolute rate. The agent
picks a random legal action (pre-drawn indices), and resets count toward the time as they
would in training. Targets: HarnessEnv under the Json preset within 5x CartPole-v1's step
time, and under every preset within 10x; with ``--tasks all`` (the default: every web task,
each with episodes of the length a random policy plays, resets included) they are judged on
the mean over tasks and on the worst task.

``--quick`` times 500 steps in 2 rounds. ``--against DIR`` compares two versions of the
package on a loaded machine: each round runs once in a child process importing
``harness_gym`` from ``DIR`` and once from this checkout, alternating, and both columns of
ratios are printed side by side.

``--draws`` prints, per task, what no faster code can remove while every instance stays the
same: the task's random draws (each reset's ``default_rng`` and the calls on it that decide
the instance, recorded, then replayed alone) against CartPole-v1's step, per reset and per
step of a random policy's episode.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def measure(args: argparse.Namespace) -> dict[str, list[float]]:
    """Per-step times of every runner, one sample per round (rounds from ``--first-round``)."""
    runners: dict[str, Callable[[int], float]] = {
        "CartPole-v1": lambda s: time_cartpole(args.steps, s),
        f"bare task {args.task}": lambda s: time_bare_task(args.task, args.steps, s),
    }
    for preset in dict.fromkeys(["Json", *args.presets]):
        env_id = f"harness_gym/{args.task}-{preset}-v0"
        runners[f"HarnessEnv {preset}"] = lambda s, e=env_id: time_harness_env(e, args.steps, s)
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for r in range(args.first_round, args.first_round + args.rounds):
        for name, run in runners.items():
            samples[name].append(run(r))
    return samples


def measure_against(args: argparse.Namespace, other: Path) -> dict[str, dict[str, list[float]]]:
    """Samples of ``other``'s package and this checkout's, one child process per round each."""
    here = Path(__file__).resolve().parents[1]
    trees = {"against": other.resolve(), "this": here}
    samples: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
    passed = [
        f"--task={args.task}",
        f"--steps={args.steps}",
        f"--clock={args.clock}",
        "--presets",
        *args.presets,
    ]
    for r in range(args.rounds):
        for label, root in trees.items():
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
            command = [sys.executable, __file__, *passed, "--rounds=1", f"--first-round={r}", "--emit-json"]
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
            for name, values in json.loads(out.splitlines()[-1]).items():
                samples[label].setdefault(name, []).extend(values)
    return samples


def verdicts(ratio: dict[str, float]) -> list[str]:
    """The two target lines: Json within 5x, the slowest preset within 10x."""
    json_ratio = ratio["HarnessEnv Json"]
    worst = max((n for n in ratio if n.startswith("HarnessEnv ")), key=ratio.__getitem__)
    return [
        f"HarnessEnv Json / CartPole-v1 step time = {json_ratio:.2f}x "
        f"({'meets' if json_ratio <= 5 else 'misses'} the 5x target)",
        f"slowest preset: {worst} = {ratio[worst]:.2f}x "
        f"({'meets' if ratio[worst] <= 10 else 'misses'} the 10x target for every preset)",
    ]


class _Recorder:
    """A generator that records the calls made on it (name and arguments) and answers them."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng, self.calls = rng, []

    def __getattr__(self, name: str) -> Callable[..., object]:
        method = getattr(self.rng, name)

        def call(*a: object, **k: object) -> object:
            self.calls.append((name, a, k))
            return method(*a, **k)

        return call


def draws(args: argparse.Namespace) -> None:
    """Per task: a reset, and the random draws that decide its instance, as CartPole-v1 steps."""
    cart = min(time_cartpole(args.steps, r) for r in range(args.rounds))
    seeds = range(300)

    def best(run: Callable[[], None]) -> float:
        times = []
        for _ in range(args.rounds):
            start = clock()
            run()
            times.append(clock() - start)
        return min(times) / len(seeds) / cart

    header = f"{'task':<18}{'episode':>9}{'reset':>9}{'its draws':>11}{'draws per step':>16}"
    print(header, "  (x CartPole-v1 step; episode: steps of the random policy)")
    for task_id in args.tasks:
        task = harness_gym.get_task(task_id)()
        calls = []
        for seed in seeds:
            recorder = _Recorder(np.random.default_rng(seed))
            task.reset(recorder)  # type: ignore[arg-type]
            calls.append(recorder.calls)
        reset = best(functools.partial(_resets, task, seeds))
        drawn = best(functools.partial(_replay, seeds, calls))
        length = _episode_length(task_id, args.steps)
        print(f"{task_id:<18}{length:>9.2f}{reset:>8.2f}x{drawn:>10.2f}x{drawn / length:>15.2f}x")


def _resets(task: Any, seeds: range) -> None:
    for seed in seeds:
        task.reset(np.random.default_rng(seed))


def _replay(seeds: range, calls: list[list[tuple[str, tuple, dict]]]) -> None:
    for seed, made in zip(seeds, calls, strict=True):
        rng = np.random.default_rng(seed)
        for name, a, k in made:
            getattr(rng, name)(*a, **k)


def _episode_length(task_id: str, steps: int) -> float:
    """Mean steps per episode of the random legal-action policy the timings use."""
    env = gym.make(f"harness_gym/{task_id}-Json-v0")
    picks = np.random.default_rng(0).random(steps)
    _, info = env.reset(seed=0)
    episodes = 0
    for i in range(steps):
        legal = info["legal_actions"]
        _, _, terminated, truncated, info = env.step(legal[int(picks[i] * len(legal))])
        if terminated or truncated:
            episodes += 1
            _, info = env.reset()
    return steps / max(episodes, 1)


def web_tasks() -> list[str]:
    from harness_gym.core.registry import family_of

    return sorted(t for t in harness_gym.TASKS if family_of(t) == "web")


def every_task(args: argparse.Namespace) -> None:
    """One table row per task (bare task, Json, slowest preset, as multiples of CartPole-v1's
    step time, medians over rounds), then the mean and the worst task against the targets."""
    rows = {}
    for task in args.tasks:
        args.task = task
        median = {name: statistics.median(v) for name, v in measure(args).items()}
        ref = median.pop("CartPole-v1")
        envs = {n: t / ref for n, t in median.items() if n.startswith("HarnessEnv ")}
        worst = max(envs, key=envs.__getitem__)
        rows[task] = (median[f"bare task {task}"] / ref, envs["HarnessEnv Json"], worst[11:], envs[worst])
        print(
            f"  {task:<18} bare {rows[task][0]:6.2f}x  Json {rows[task][1]:6.2f}x  "
            f"slowest {rows[task][2]} {rows[task][3]:.2f}x",
            flush=True,
        )
    print(f"\n{'task':<18}{'bare task':>11}{'Json':>9}{'slowest preset':>28}   (x CartPole-v1 step time)")
    for task, (bare, js, name, slow) in rows.items():
        print(f"{task:<18}{bare:>10.2f}x{js:>8.2f}x{name:>20} {slow:>6.2f}x")
    cols = list(zip(*rows.values(), strict=True))
    mean_json, mean_slow = statistics.mean(cols[1]), statistics.mean(cols[3])
    worst_json = max(rows, key=lambda t: rows[t][1])
    worst_slow = max(rows, key=lambda t: rows[t][3])
    print(f"{'mean':<18}{statistics.mean(cols[0]):>10.2f}x{mean_json:>8.2f}x{'':>20} {mean_slow:>6.2f}x")

    def verdict(x: float, bound: float) -> str:
        return f"{'meets' if x <= bound else 'misses'} the {bound:g}x target"

    print(
        f"\nJson: mean {mean_json:.2f}x ({verdict(mean_json, 5)}), worst {worst_json} "
        f"{rows[worst_json][1]:.2f}x ({verdict(rows[worst_json][1], 5)}); within 5x on "
        f"{sum(r[1] <= 5 for r in rows.values())} of {len(rows)} tasks",
        f"every preset: mean of the slowest {mean_slow:.2f}x ({verdict(mean_slow, 10)}), worst "
        f"{worst_slow} {rows[worst_slow][2]} {rows[worst_slow][3]:.2f}x ({verdict(rows[worst_slow][3], 10)})",
        "the bare task alone (no harness): "
        + ", ".join(f"{t} {r[0]:.1f}x" for t, r in rows.items() if r[0] > 5)
        + " already exceed 5x",
        sep="\n",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", help="one task, with every runner's figures (and --against)")
    parser.add_argument("--tasks", nargs="+", default=["all"], help="tasks for the all-task table")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="500 steps in 2 rounds")
    parser.add_argument("--clock", choices=list(CLOCKS), default="wall", help="wall or process CPU time")
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), help="presets to time (default: all)")
    parser.add_argument("--against", type=Path, help="another checkout's root, timed alternately")
    parser.add_argument("--draws", action="store_true", help="the random draws' floor per task")
    parser.add_argument("--first-round", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--emit-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.rounds = 500, 2
    global clock
    clock = CLOCKS[args.clock]
    unknown = [p for p in args.presets if p not in PRESETS]
    if unknown:
        parser.error(f"unknown preset(s) {unknown}; choose from {list(PRESETS)}")
    if args.emit_json:
        print(json.dumps(measure(args)))
        return
    if args.task is None and args.against is None:
        args.tasks = web_tasks() if args.tasks == ["all"] else args.tasks
        unknown_tasks = [t for t in args.tasks if t not in harness_gym.TASKS]
        if unknown_tasks:
            parser.error(f"unknown task(s) {unknown_tasks}; choose from {web_tasks()}")
        runs = f"steps/round={args.steps} rounds={args.rounds} clock={args.clock}"
        if args.draws:
            draws(args)
            return
        print(f"every task: {runs} presets={len(args.presets)}")
        every_task(args)
        return
    args.task = args.task or "EnterText"
    header = (
        f"task={args.task} steps/round={args.steps} rounds={args.rounds} clock={args.clock} "
        "(median per-step time)"
    )
    if args.against is not None:
        both = measure_against(args, args.against)
        ratios = {}
        for label, samples in both.items():
            median = {name: statistics.median(v) for name, v in samples.items()}
            ratios[label] = {name: t / median["CartPole-v1"] for name, t in median.items()}
        print(header)
        print(f"against = {args.against}, this = {Path(__file__).resolve().parents[1]}")
        print(f"{'env':<34}{'against x CartPole':>20}{'this x CartPole':>18}{'this / against':>16}")
        for name in ratios["this"]:
            a, b = ratios["against"].get(name, float("nan")), ratios["this"][name]
            print(f"{name:<34}{a:>20.2f}{b:>18.2f}{b / a:>16.2f}")
        for label in ratios:
            print(f"\n{label}:", *verdicts(ratios[label]), sep="\n  ")
        return
    median = {name: statistics.median(v) for name, v in measure(args).items()}
    ref = median["CartPole-v1"]
    print(header)
    print(f"{'env':<34}{'steps/s':>12}{'us/step':>10}{'x CartPole time':>18}")
    for name, t in median.items():
        print(f"{name:<34}{1 / t:>12,.0f}{t * 1e6:>10.1f}{t / ref:>18.2f}")
    print("", *verdicts({name: t / ref for name, t in median.items()}), sep="\n")


if __name__ == "__main__":
    main()
