"""Terminal sandbox throughput.

(a) per-command cost of the sandbox against the same command run as a bare subprocess
    (``true`` and a 50 ms command), and ``true`` in a sandbox whose ``/app`` holds 20,000
    files (the disk quota and file count are checked only when inotify saw a change), all
    side by side, interleaved, with the targets of issue 25 (3x, 1.3x, 5x);
(b) oracle episodes per second over the whole suite in one process, under each harness of
    ``--presets`` (the canonical ``Json``; ``coding`` adds the three coding presets). One
    process runs one command at a time (the env waits for it), so this is the rate per core;
    the CPU time of the sandboxed processes is not reported because they are killed, not
    reaped, at close (getrusage would not see it);
(c) reset cost (fresh episode directory and files, plus the sandbox start and set-up
    commands such as ``git init`` for tasks that have them; otherwise the sandbox starts at
    the first command, inside the first step) against one oracle step (the solution script,
    or submit with its verifier), medians and their ratio.

    python benchmarks/terminal_throughput.py [--repeats 30] [--seeds 2] [--presets coding] [--no-episodes]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

import harness_gym  # noqa: F401 - registers the ids and the terminal options
from harness_gym.envs.terminal.env import TerminalEnv
from harness_gym.envs.terminal.episode_dirs import make_episode_dir, remove_episode_dir
from harness_gym.envs.terminal.presets import CODING_PRESETS
from harness_gym.envs.terminal.sandbox import Sandbox
from harness_gym.envs.terminal.tasks import TERMINAL_TASKS

#: Target ratio (sandbox / bare subprocess) of each row of (a), from issue 25.
TARGETS = {"true": 3.0, "sleep 0.05": 1.3, "true, 20k files": 5.0}


def per_command(repeats: int, files: int = 20_000) -> None:
    plain_root, full_root = make_episode_dir(), make_episode_dir()
    for i in range(files):
        (full_root / "app" / f"f{i:05d}").touch()
    plain, full = Sandbox(plain_root), Sandbox(full_root)
    plain.run("true"), full.run("true")  # start the runners (the first command measures /app)
    rows = {"true": ("true", plain), "sleep 0.05": ("sleep 0.05", plain), "true, 20k files": ("true", full)}
    times: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label in rows}
    for _ in range(repeats):
        for label, (command, box) in rows.items():
            bare, boxed = times[label]
            t = time.perf_counter()
            subprocess.run(["/bin/bash", "-c", command], stdin=subprocess.DEVNULL, capture_output=True)
            bare.append(time.perf_counter() - t)
            t = time.perf_counter()
            box.run(command)
            boxed.append(time.perf_counter() - t)
    # Rows that run the same command share their bare samples (one estimate of the bare cost).
    pooled: dict[str, list[float]] = {}
    for label, (command, _) in rows.items():
        pooled.setdefault(command, []).extend(times[label][0])
    print(f"{'command':<18}{'bare ms':>10}{'sandbox ms':>12}{'ratio':>8}{'target':>8}")
    for label, (_, boxed) in times.items():
        bare = pooled[rows[label][0]]
        b, s = statistics.median(bare) * 1e3, statistics.median(boxed) * 1e3
        verdict = "ok" if s / b <= TARGETS[label] else "MISSED"
        print(f"{label:<18}{b:>10.2f}{s:>12.2f}{s / b:>7.2f}x{TARGETS[label]:>7.1f}x  {verdict}")
    for box, root in ((plain, plain_root), (full, full_root)):
        box.close()
        remove_episode_dir(root)


def episodes(seeds: int, presets: list[str]) -> None:
    print(
        f"\n{'harness':<20}{'episodes':>9}{'wall s':>8}{'ep/s/core':>10}"
        f"{'reset ms':>10}{'step ms':>9}{'reset/step':>11}"
    )
    for preset in presets:
        wall, n, resets, steps = 0.0, 0, [], []
        for task in TERMINAL_TASKS:
            env = TerminalEnv(task, harness=preset)
            for seed in range(seeds):
                t0 = time.perf_counter()
                env.reset(seed=seed)
                resets.append(time.perf_counter() - t0)
                done = False
                while not done:
                    t = time.perf_counter()
                    _, _, term, trunc, info = env.step(env.oracle_action())
                    steps.append(time.perf_counter() - t)
                    done = term or trunc
                assert info["success"], (task.task_id, preset, seed)
                wall += time.perf_counter() - t0
                n += 1
            env.close()
        r, s_ = statistics.median(resets) * 1e3, statistics.median(steps) * 1e3
        print(f"{preset:<20}{n:>9}{wall:>8.1f}{n / wall:>10.2f}{r:>10.0f}{s_:>9.0f}{r / s_:>10.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--episodes", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument(
        "--presets", default="Json", help="'Json', 'coding' (all four) or names, comma-separated"
    )
    args = parser.parse_args()
    names = list(CODING_PRESETS) if args.presets == "coding" else args.presets.split(",")
    per_command(args.repeats)
    if args.episodes:
        episodes(args.seeds, names)
