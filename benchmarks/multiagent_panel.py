"""Harness panel throughput: 8 harnesses as one PettingZoo Parallel env against 8 separate
single-agent HarnessEnvs stepped in a loop, agent-steps per second, side by side.

    .venv/bin/python benchmarks/multiagent_panel.py [--task EnterText] [--steps 4000] [--rounds 5]

Both sides do the same work: every agent takes a random legal action (pre-drawn picks) from
its own info, and when every agent's episode is over all are reset with the next seed. The
two run interleaved round by round in one process so machine load hits them alike; the
figure that matters is the ratio. Target: the panel at least as fast as the loop (ratio >= 1).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np

import harness_gym  # noqa: F401 - registers the tasks
from harness_gym import make_env
from harness_gym.multiagent.panel import HarnessPanelEnv

HARNESSES = [
    "Json",
    "JsonReversed",
    {"obs_format": "markdown", "tool_style": "python"},
    {"obs_format": "xml", "tool_style": "xml", "tool_naming": "opaque"},
    {"obs_format": "yaml", "tool_style": "command", "parser": "lenient"},
    {"obs_format": "key_value", "tool_naming": "synonyms", "history_window": 2},
    {"obs_format": "html", "tool_order": "reversed", "extra_fields": ["step", "last_error"]},
    {"obs_format": "json", "tool_descriptions": "terse", "invalid_action": "ignore"},
]


def time_panel(task: str, steps: int, seed: int) -> float:
    """Seconds per agent-step of the Parallel panel."""
    env = HarnessPanelEnv(task, HARNESSES)
    picks = np.random.default_rng(seed).random(steps + 64)
    _, infos = env.reset(seed=seed)
    done, k, next_seed = 0, 0, seed + 1
    start = time.perf_counter()
    while done < steps:
        actions = {}
        for agent in env.agents:
            legal = infos[agent]["legal_actions"]
            actions[agent] = legal[int(picks[k % len(picks)] * len(legal))]
            k += 1
        _, _, _, _, step_infos = env.step(actions)
        infos.update(step_infos)
        done += len(actions)
        if not env.agents:
            _, infos = env.reset(seed=next_seed)
            next_seed += 1
    return (time.perf_counter() - start) / done


def time_loop(task: str, steps: int, seed: int) -> float:
    """Seconds per agent-step of 8 single-agent envs stepped one after another."""
    envs = [make_env(task, h) for h in HARNESSES]
    picks = np.random.default_rng(seed).random(steps + 64)
    infos = [env.reset(seed=seed)[1] for env in envs]
    active = [True] * len(envs)
    done, k, next_seed = 0, 0, seed + 1
    start = time.perf_counter()
    while done < steps:
        for i, env in enumerate(envs):
            if not active[i]:
                continue
            legal = infos[i]["legal_actions"]
            _, _, term, trunc, infos[i] = env.step(legal[int(picks[k % len(picks)] * len(legal))])
            k += 1
            done += 1
            active[i] = not (term or trunc)
        if not any(active):
            infos = [env.reset(seed=next_seed)[1] for env in envs]
            active = [True] * len(envs)
            next_seed += 1
    return (time.perf_counter() - start) / done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="EnterText")
    parser.add_argument("--steps", type=int, default=4000, help="agent-steps per side per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    panel, loop = [], []
    for r in range(args.rounds):  # alternate which side runs first
        if r % 2:
            loop.append(time_loop(args.task, args.steps, seed=r))
            panel.append(time_panel(args.task, args.steps, seed=r))
        else:
            panel.append(time_panel(args.task, args.steps, seed=r))
            loop.append(time_loop(args.task, args.steps, seed=r))
    p, lo = statistics.median(panel), statistics.median(loop)
    print(f"task {args.task}, {len(HARNESSES)} harnesses, {args.steps} agent-steps x {args.rounds} rounds")
    print(f"{'panel (Parallel env)':28s} {1 / p:10.0f} agent-steps/s")
    print(f"{'8 envs in a loop':28s} {1 / lo:10.0f} agent-steps/s")
    verdict = "meets" if p <= lo else "misses"
    print(f"panel / loop speed ratio: {lo / p:.3f} ({verdict} the target >= 1)")


if __name__ == "__main__":
    main()
