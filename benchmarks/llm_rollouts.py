"""Language-model rollouts: episodes in flight against one at a time, the env's share, batching.

    .venv/bin/python benchmarks/llm_rollouts.py [--base-url http://127.0.0.1:8000/v1 --model NAME]
        [--episodes 16] [--in-flight 8] [--max-tokens 24] [--few-shot 2] [--threads 2]
        [--skip-server] [--skip-in-process]

(a) Episodes per second of ``run_batched(..., in_flight=8)`` against ``in_flight=1``: the same
    vLLM server and model, the same episodes (ClickButton, two worked examples, greedy, cache
    off). Target >= 2.5x on 2 cores.
(b) The environment's share of rollout wall time (``RolloutStats.env_share``). Target <= 5%.
(c) The in-process transformers backend (the embedded model): one ``generate`` of 8 requests
    against the same 8 requests one at a time, completion tokens per second; and the batch of 8
    with its shared prefix (system prompt and worked examples) run once against every row in
    full (``share_prefix=False``), with the texts compared.

Without ``--base-url`` the benchmark starts ``scripts/vllm-server.sh`` (the embedded model) on a
free port, the way the test fixture does, and stops it before (c), so the two models never share
the cores. Before (a) is timed the episodes run once untimed, so both timed runs meet the
server's prefix cache in the same state. Times vary with whatever else runs on the machine; the
ratios measured side by side in one run are the figures that matter. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import gymnasium as gym

import harness_gym  # noqa: F401  (registers the envs)
from harness_gym import Harness
from harness_gym.llm.agent import LLMAgent
from harness_gym.llm.openai_backend import OpenAIBackend
from harness_gym.llm.types import Sampling
from harness_gym.rollout import Episode, RolloutStats, run_batched

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "vllm-server.sh"


# -- the server ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(log: Path, timeout: float = 600.0) -> tuple[subprocess.Popen, str, str, float]:
    """Start scripts/vllm-server.sh on a free port; return (process, base_url, model, seconds)."""
    port = _free_port()
    env = dict(os.environ)
    env.setdefault("HARNESS_GYM_PYTHON", sys.executable)
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(
            ["bash", str(SCRIPT), "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    while time.monotonic() - started < timeout:
        if process.poll() is not None:
            raise SystemExit(f"the vLLM server exited with code {process.returncode}; log: {log}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
                model = json.loads(response.read())["data"][0]["id"]
            return process, base_url, model, time.monotonic() - started
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            time.sleep(1.0)
    stop_server(process)
    raise SystemExit(f"the vLLM server did not answer within {timeout:.0f} s; log: {log}")


def stop_server(process: subprocess.Popen) -> None:
    """SIGTERM the server's process group (it leads its own), SIGKILL if it lingers."""
    for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


# -- (a) and (b): episodes in flight ------------------------------------------------------------


def episodes(backend: OpenAIBackend, n: int, few_shot: int, max_tokens: int) -> list[Episode]:
    harness = Harness(few_shot=few_shot)
    sampling = Sampling(temperature=0.0, max_tokens=max_tokens)
    return [
        Episode(
            lambda: gym.make("harness_gym/ClickButton-v0", harness=harness),
            lambda env: LLMAgent(env, backend, sampling=sampling, cache=None),
            seed=seed,
        )
        for seed in range(n)
    ]


def rollout(backend: OpenAIBackend, args: argparse.Namespace, in_flight: int) -> dict[str, Any]:
    stats = RolloutStats()
    out = run_batched(
        episodes(backend, args.episodes, args.few_shot, args.max_tokens), in_flight, stats=stats
    )
    errors = [err for *_, err in out if err is not None]
    results = [r for _, r, _ in out if r is not None]
    failures = sum(r.extra["transport_failures"] for r in results)
    if errors or failures:
        raise SystemExit(f"in_flight={in_flight}: {len(errors)} episodes raised, {failures} requests failed")
    return {
        "in_flight": in_flight,
        "episodes": stats.episodes,
        "steps": stats.steps,
        "wall": stats.wall_seconds,
        "eps_per_s": stats.episodes / stats.wall_seconds,
        "env_share": stats.env_share,
        "success": sum(r.success for r in results) / len(results),
        "completion_tokens": sum(r.extra["completion_tokens"] for r in results),
    }


def bench_server(base_url: str, model: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    backend = OpenAIBackend(model, base_url, timeout=600, retries=0, concurrency=max(args.in_flight, 1))
    try:
        rollout(backend, args, args.in_flight)  # untimed: the prefix cache holds every prompt after
        serial = rollout(backend, args, 1)
        batched = rollout(backend, args, args.in_flight)
    finally:
        backend.close()
    return [serial, batched]


# -- (c): in-process batching -------------------------------------------------------------------


def bench_in_process(args: argparse.Namespace) -> list[dict[str, Any]]:
    from harness_gym.llm.chat import chat_messages
    from harness_gym.llm.embedded import embedded_model_path
    from harness_gym.llm.transformers_backend import TransformersBackend
    from harness_gym.llm.types import ChatRequest

    backend = TransformersBackend(embedded_model_path(), threads=args.threads, batch_size=8)
    requests = []
    for seed in range(8):
        env = gym.make("harness_gym/ClickButton-v0", harness=Harness(few_shot=args.few_shot)).unwrapped
        obs, _ = env.reset(seed=seed)
        messages = chat_messages(env.harness, env.system_prompt, obs, examples=env.examples)
        requests.append(ChatRequest(messages, Sampling(max_tokens=args.max_tokens), seed=seed))
    backend.complete(requests[:1])  # warm-up
    rows = []
    for label, batches, share in (
        ("1", [[r] for r in requests], True),
        ("8", [requests], True),
        ("8 full", [requests], False),
    ):
        backend.share_prefix = share
        start = time.perf_counter()
        done = [c for batch in batches for c in backend.complete(batch)]
        wall = time.perf_counter() - start
        tokens = sum(c.completion_tokens or 0 for c in done)
        rows.append(
            {
                "batch": label,
                "requests": len(done),
                "tokens": tokens,
                "wall": wall,
                "tok_per_s": tokens / wall,
                "texts": [c.text for c in done],
            }
        )
    return rows


# -- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="a running OpenAI-compatible server (else one is started)")
    parser.add_argument("--model", help="the served model name (with --base-url)")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--few-shot", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="torch threads for (c)")
    parser.add_argument("--skip-server", action="store_true", help="skip (a) and (b)")
    parser.add_argument("--skip-in-process", action="store_true", help="skip (c)")
    args = parser.parse_args(argv)
    if args.base_url and not args.model:
        parser.error("--base-url needs --model")

    if not args.skip_server:
        process = None
        if args.base_url:
            base_url, model = args.base_url, args.model
        else:
            log = Path(os.environ.get("TMPDIR", "/tmp")) / f"llm_rollouts-vllm-{os.getpid()}.log"
            print(f"starting scripts/vllm-server.sh (log {log}) ...", flush=True)
            process, base_url, model, seconds = start_server(log)
            print(f"server ready in {seconds:.0f} s at {base_url} ({model})", flush=True)
        try:
            serial, batched = bench_server(base_url, model, args)
        finally:
            if process is not None:
                stop_server(process)
        print(
            f"\n(a, b) {args.episodes} ClickButton episodes, few_shot={args.few_shot}, "
            f"max_tokens={args.max_tokens}, greedy, cache off, {model}"
        )
        print(
            f"{'in flight':>9} {'steps':>6} {'wall s':>8} {'episodes/s':>11} {'env share':>10} {'success':>8}"
        )
        for row in (serial, batched):
            print(
                f"{row['in_flight']:>9} {row['steps']:>6} {row['wall']:>8.1f} {row['eps_per_s']:>11.3f} "
                f"{row['env_share']:>10.2%} {row['success']:>8.0%}"
            )
        print(
            f"(a) episodes/s, {args.in_flight} in flight / 1 in flight: "
            f"{batched['eps_per_s'] / serial['eps_per_s']:.2f}x (target >= 2.5x)"
        )
        print(
            f"(b) env share of rollout wall time: {serial['env_share']:.2%} (1 in flight), "
            f"{batched['env_share']:.2%} ({args.in_flight} in flight) (target <= 5%)"
        )

    if not args.skip_in_process:
        rows = bench_in_process(args)
        print(
            f"\n(c) in-process transformers, embedded model, {args.threads} torch threads, "
            f"8 ClickButton prompts, max_tokens={args.max_tokens}, greedy"
        )
        print(f"{'batch':>5} {'requests':>9} {'tokens':>7} {'wall s':>8} {'tokens/s':>9}")
        for row in rows:
            print(
                f"{row['batch']:>5} {row['requests']:>9} {row['tokens']:>7} {row['wall']:>8.1f} "
                f"{row['tok_per_s']:>9.1f}"
            )
        print(f"(c) tokens/s, batch of 8 / batch of 1: {rows[1]['tok_per_s'] / rows[0]['tok_per_s']:.2f}x")
        same = rows[1]["texts"] == rows[2]["texts"] == rows[0]["texts"]
        print(
            f"(c) batch of 8, shared prefix once / every row in full: "
            f"{rows[2]['wall'] / rows[1]['wall']:.2f}x faster; texts identical in all three: {same}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
