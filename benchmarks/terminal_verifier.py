"""Cost of checking in a fresh verifier sandbox against checking through the agent's runner.

(a) one command, ``true`` and ``git rev-parse HEAD`` in a small repository: through the
    agent's long-lived runner (``Sandbox.run``, the old verifier path) and through a fresh
    one-shot ``bwrap`` after the agent is stopped (``Sandbox.run_verifier``), side by side,
    interleaved, medians and their ratio;
(b) ``submit`` (stopping the agent and every check of the verifier) per task after the oracle,
    medians over seeds.

    python benchmarks/terminal_verifier.py [--repeats 20] [--seeds 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.terminal.episode_dirs import make_episode_dir, remove_episode_dir
from harness_gym.envs.terminal.sandbox import Sandbox
from harness_gym.envs.terminal.tasks import TERMINAL_TASKS


def per_command(repeats: int) -> None:
    root = make_episode_dir()
    box = Sandbox(root)
    box.run("cd /app && git init -q && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x")
    print(f"{'command':<22}{'runner ms':>11}{'verifier ms':>13}{'ratio':>8}")
    for command in ("true", "cd /app && git rev-parse HEAD"):
        runner, verifier = [], []
        for _ in range(repeats):
            box.run("true")  # the runner is up, as during an episode
            t = time.perf_counter()
            box.run(command)
            runner.append(time.perf_counter() - t)
            t = time.perf_counter()
            res = box.run_verifier(command)
            verifier.append(time.perf_counter() - t)
            assert res.exit_code == 0, res
        a, b = statistics.median(runner) * 1e3, statistics.median(verifier) * 1e3
        print(f"{command:<22}{a:>11.1f}{b:>13.1f}{b / a:>8.2f}")
    box.close()
    remove_episode_dir(root)


def per_task(seeds: int) -> None:
    print(f"\n{'task':<24}{'submit ms':>10}")
    for cls in TERMINAL_TASKS:
        times = []
        for seed in range(seeds):
            task = cls()
            task.reset(np.random.default_rng(seed))
            task.step(Action.of("run", command=task.solution()))
            t = time.perf_counter()
            step = task.step(Action.of("submit"))
            times.append(time.perf_counter() - t)
            assert step.success, (cls.task_id, task.verdict)
            task.close()
        print(f"{cls.task_id:<24}{statistics.median(times) * 1e3:>10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    per_command(args.repeats)
    per_task(args.seeds)


if __name__ == "__main__":
    main()
