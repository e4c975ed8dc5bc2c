"""OpenEnv server throughput: oracle steps per second over the WebSocket against in process.

    .venv-openenv/bin/python benchmarks/openenv_server.py [--episodes 50] [--rounds 3] [--sessions 32]

Starts ``harness-gym serve`` on 127.0.0.1 (a real process) and plays the same oracle episodes
(``EnterText`` under ``Json``, seeds 0..N-1) in process and through ``HarnessGymClient``,
interleaved round by round so machine noise hits both alike; prints steps per second and the
ratio. Then ``--sessions`` async clients play at once (one session each), and the aggregate
steps per second is printed beside one session's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from harness_gym.core.registry import make_env
from harness_gym.integrations.openenv_server import HarnessAction, HarnessGymClient

TASK = "EnterText"
ROOT = Path(__file__).resolve().parents[1]


def oracle_actions(seed: int) -> list[str]:
    env = make_env(TASK, "Json")
    env.reset(seed=seed)
    actions, done = [], False
    while not done:
        actions.append(env.oracle_action())
        *_, terminated, truncated, _ = env.step(actions[-1])
        done = terminated or truncated
    return actions


def in_process(plans: dict[int, list[str]]) -> int:
    env, steps = make_env(TASK, "Json"), 0
    for seed, actions in plans.items():
        env.reset(seed=seed)
        for action in actions:
            env.step(action)
            steps += 1
    return steps


def over_the_wire(url: str, plans: dict[int, list[str]]) -> int:
    steps = 0
    with HarnessGymClient(base_url=url).sync() as client:
        for seed, actions in plans.items():
            client.reset(seed=seed, task=TASK, harness="Json")
            for action in actions:
                client.step(HarnessAction(text=action))
                steps += 1
    return steps


async def sessions_at_once(url: str, plans: dict[int, list[str]], n: int) -> int:
    async def one() -> int:
        steps = 0
        async with HarnessGymClient(base_url=url, message_timeout_s=300) as client:
            for seed, actions in plans.items():
                await client.reset(seed=seed, task=TASK, harness="Json")
                for action in actions:
                    await client.step(HarnessAction(text=action))
                    steps += 1
        return steps

    return sum(await asyncio.gather(*[one() for _ in range(n)]))


def rate(run) -> float:  # noqa: ANN001
    start = time.perf_counter()
    steps = run()
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=32)
    args = parser.parse_args()
    plans = {seed: oracle_actions(seed) for seed in range(args.episodes)}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "harness_gym.cli", "serve", "--task", TASK, "--port", str(port)]
    server = subprocess.Popen(
        [*cmd, "--max-sessions", str(args.sessions)], env=env, stdout=subprocess.DEVNULL
    )
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        local, wire = [], []
        for _ in range(args.rounds):
            local.append(rate(lambda: in_process(plans)))
            wire.append(rate(lambda: over_the_wire(url, plans)))
        lo, wi = statistics.median(local), statistics.median(wire)
        print(f"steps/s  in process {lo:9.0f}   over the WebSocket {wi:7.0f}   ratio {lo / wi:5.1f}x")
        start = time.perf_counter()
        steps = asyncio.run(sessions_at_once(url, plans, args.sessions))
        many = steps / (time.perf_counter() - start)
        print(
            f"{args.sessions} sessions at once: {many:7.0f} steps/s in all "
            f"({many / wi:4.2f}x one session's {wi:.0f})"
        )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
