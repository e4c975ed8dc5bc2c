"""Terminal sandbox throughput.

(a) per-command cost of the sandbox against the same command run as a bare subprocess
    (``true`` and a 50 ms command), (b) oracle episodes per second per core over the suite,
(c) reset cost (fresh episode directory and sandbox) against one oracle step.

    python benchmarks/terminal_throughput.py [--repeats 30] [--seeds 2]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from harness_gym.envs.terminal.env import TerminalEnv
from harness_gym.envs.terminal.sandbox import Sandbox, make_episode_dir, remove_episode_dir
from harness_gym.envs.terminal.tasks import TERMINAL_TASKS


def per_command(repeats: int) -> None:
    root = make_episode_dir()
    box = Sandbox(root)
    box.run("true")  # start the runner
    print(f"{'command':<16}{'bare ms':>10}{'sandbox ms':>12}{'ratio':>8}")
    for command in ("true", "sleep 0.05"):
        bare, boxed = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            subprocess.run(["/bin/bash", "-c", command], stdin=subprocess.DEVNULL, capture_output=True)
            bare.append(time.perf_counter() - t)
            t = time.perf_counter()
            box.run(command)
            boxed.append(time.perf_counter() - t)
        b, s = statistics.median(bare) * 1e3, statistics.median(boxed) * 1e3
        print(f"{command:<16}{b:>10.2f}{s:>12.2f}{s / b:>8.2f}x")
    box.close()
    remove_episode_dir(root)


def episodes(seeds: int) -> None:
    total, n, resets, steps = 0.0, 0, [], []
    for task in TERMINAL_TASKS:
        env = TerminalEnv(task)
        for seed in range(seeds):
            t0 = time.perf_counter()
            env.reset(seed=seed)
            resets.append(time.perf_counter() - t0)
            done = False
            while not done:
                t = time.perf_counter()
                _, _, term, trunc, _ = env.step(env.oracle_action())
                steps.append(time.perf_counter() - t)
                done = term or trunc
            total += time.perf_counter() - t0
            n += 1
        env.close()
    print(f"oracle episodes: {n} in {total:.1f} s = {n / total:.2f} episodes/s (one process)")
    print(
        f"reset median {statistics.median(resets) * 1e3:.0f} ms vs oracle step median "
        f"{statistics.median(steps) * 1e3:.0f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    per_command(args.repeats)
    episodes(args.seeds)
