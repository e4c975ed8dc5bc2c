"""Language-model rollouts: episodes in flight, the env's share, streams against rounds, endpoints.

    .venv/bin/python benchmarks/llm_rollouts.py [--base-url URL --model NAME] [--servers 1|2]
        [--episodes 8] [--in-flight 8] [--repeats 2] [--max-tokens 24] [--few-shot 2]
        [--straggler-every 8] [--straggler-seconds 2] [--straggler-only] [--enforce-eager] [--threads 2]
        [--skip-server] [--skip-in-process]

The server figures are measured *interleaved*: each repeat runs every configuration once, in
turn, so load from other work on the machine falls on all of them alike; the table gives each
configuration's median over the repeats and the ratios of medians.

(a) Episodes per second with ``in_flight=8`` episode streams against ``in_flight=1``: the same
    vLLM server and model, the same episodes (ClickButton, two worked examples, greedy, cache
    off). Target >= 2.5x on 2 cores.
(b) The environment's share of rollout wall time (``RolloutStats.env_share``). Target <= 5%.
(s) The straggler case: the same episodes through a fault stand-in (a local proxy in front of
    the server that holds one request in ``--straggler-every`` for ``--straggler-seconds``),
    ``schedule="rounds"`` (every round waits for its slowest request) against streams; and the
    wall time the stragglers add to each schedule (against the same schedule without them). The
    proxy counts from zero in every run, so every run holds the same requests. A straggler only
    shows when it is held longer than a round of the other requests takes: the table's
    ``s/request`` column is the mean time a request took as the client saw it.
(e) One endpoint against two (``--servers 2``: two servers of the model, each bound to its own
    core share; the one-endpoint runs use the first): one agent, ``openai:MODEL@URL1,URL2``.
(c) The in-process transformers backend (the embedded model): one ``generate`` of 8 requests
    against the same 8 requests one at a time, completion tokens per second; and the batch of 8
    with its shared prefix (system prompt and worked examples) run once against every row in
    full (``share_prefix=False``), with the texts compared.

Without ``--base-url`` the benchmark starts ``scripts/vllm-server.sh`` (the embedded model) on
free ports, the way the test fixture does, and stops them before (c), so the models never share
the cores with it. Before the timed repeats every configuration runs once untimed, so all meet
the servers' prefix caches in the same state. Times vary with whatever else runs on the
machine; the ratios measured side by side in one run are the figures that matter. Nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


def start_server(
    log: Path, timeout: float = 900.0, cpus: str | None = None, extra: list[str] | None = None
) -> tuple[subprocess.Popen, str, str, float]:
    """Start scripts/vllm-server.sh on a free port (its engine bound to ``cpus``, e.g. ``"0"``,
    on a CPU build); return (process, base_url, model, seconds)."""
    port = _free_port()
    env = dict(os.environ)
    env.setdefault("HARNESS_GYM_PYTHON", sys.executable)
    if cpus is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = cpus
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(
            ["bash", str(SCRIPT), "--port", str(port), *(extra or [])],
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


# -- the straggler stand-in ---------------------------------------------------------------------


class StragglerProxy:
    """A fault stand-in: forwards every request to ``target`` and holds one in ``every`` for
    ``seconds`` first (by arrival order), so one request in ``every`` is a straggler."""

    def __init__(self, target: str, every: int, seconds: float) -> None:
        self.target = target.rstrip("/")
        self.every, self.seconds = every, seconds
        self.count = self.held = 0
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self, body: bytes | None) -> None:
                path = self.path.removeprefix("/v1")
                request = urllib.request.Request(
                    proxy.target + path, data=body, headers={"Content-Type": "application/json"}
                )
                try:
                    with urllib.request.urlopen(request, timeout=900) as response:
                        status, data = response.status, response.read()
                except urllib.error.HTTPError as err:
                    status, data = err.code, err.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self._forward(None)

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    proxy.count += 1
                    slow = proxy.count % proxy.every == 1 % proxy.every
                    proxy.held += slow
                if slow:
                    time.sleep(proxy.seconds)
                self._forward(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def restart(self) -> None:
        """Count from zero again: every run holds the same requests (the 1st, the every+1-th, ...)."""
        self.count = self.held = 0

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- (a), (b), (s), (e): rollouts against the server ------------------------------------------------


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


def rollout(
    backend: OpenAIBackend, args: argparse.Namespace, in_flight: int, schedule: str = "streams"
) -> dict[str, Any]:
    stats = RolloutStats()
    out = run_batched(
        episodes(backend, args.episodes, args.few_shot, args.max_tokens),
        in_flight,
        stats=stats,
        schedule=schedule,
    )
    errors = [err for *_, err in out if err is not None]
    results = [r for _, r, _ in out if r is not None]
    failures = sum(r.extra["transport_failures"] for r in results)
    if errors or failures:
        raise SystemExit(f"in_flight={in_flight}: {len(errors)} episodes raised, {failures} requests failed")
    return {
        "episodes": stats.episodes,
        "steps": stats.steps,
        "wall": stats.wall_seconds,
        "eps_per_s": stats.episodes / stats.wall_seconds,
        "env_share": stats.env_share,
        "success": sum(r.success for r in results) / len(results),
        # mean seconds per request as the client saw it (a held straggler's wait included)
        "req_s": sum(r.extra["llm_latency"] for r in results) / sum(r.extra["llm_requests"] for r in results),
        "replies": {r.seed: r.extra["completions"] for r in results},
    }


def bench_server(urls: list[str], model: str, args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Every configuration once untimed, then ``args.repeats`` interleaved timed rounds."""
    n = args.in_flight
    proxy = StragglerProxy(urls[0], args.straggler_every, args.straggler_seconds)

    def backend(where: list[str]) -> OpenAIBackend:
        return OpenAIBackend(model, where, timeout=900, retries=0, concurrency=n)

    one, slow = backend(urls[:1]), backend([proxy.base_url])

    def straggled(schedule: str) -> dict[str, Any]:
        proxy.restart()
        row = rollout(slow, args, n, schedule)
        return {**row, "held": proxy.held}

    configs: dict[str, Any] = {
        "1 in flight": lambda: rollout(one, args, 1),
        f"{n} streams": lambda: rollout(one, args, n),
        f"{n} rounds": lambda: rollout(one, args, n, "rounds"),
        f"{n} rounds, straggler": lambda: straggled("rounds"),
        f"{n} streams, straggler": lambda: straggled("streams"),
    }
    backends = [one, slow]
    if len(urls) > 1:
        both = backend(urls)
        backends.append(both)
        configs[f"{n} streams, {len(urls)} endpoints"] = lambda: rollout(both, args, n)
    if args.straggler_only:
        keep = (f"{n} streams", f"{n} rounds")  # what the stragglers add is measured against these
        configs = {k: v for k, v in configs.items() if "straggler" in k or k in keep}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    try:
        for run in configs.values():  # untimed: every prompt in the prefix caches
            run()
        for repeat in range(args.repeats):
            for name, run in configs.items():
                runs[name].append(run())
                print(f"  repeat {repeat + 1}: {name}: {runs[name][-1]['wall']:.1f} s", flush=True)
    finally:
        for b in backends:
            b.close()
        proxy.close()
    return runs


def median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def report_server(
    runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace, model: str, load: tuple[float, float]
) -> None:
    n = args.in_flight
    print(
        f"\n{args.episodes} ClickButton episodes, few_shot={args.few_shot}, max_tokens={args.max_tokens}, "
        f"greedy, cache off, {model}; medians of {args.repeats} interleaved repeats; "
        f"1-minute load average {load[0]:.1f} before, {load[1]:.1f} after, on {os.cpu_count()} CPUs"
    )
    print(
        f"{'configuration':>28} {'steps':>6} {'wall s':>8} {'episodes/s':>11} {'s/request':>10} "
        f"{'env share':>10} {'success':>8}"
    )
    for name, rows in runs.items():
        print(
            f"{name:>28} {rows[0]['steps']:>6} {median(rows, 'wall'):>8.1f} "
            f"{median(rows, 'eps_per_s'):>11.3f} {median(rows, 'req_s'):>10.2f} "
            f"{median(rows, 'env_share'):>10.2%} {median(rows, 'success'):>8.0%}"
        )
    eps = {name: median(rows, "eps_per_s") for name, rows in runs.items()}
    wall = {name: median(rows, "wall") for name, rows in runs.items()}
    if "1 in flight" in runs:
        print(f"(a) episodes/s, {n} streams / 1 in flight: {eps[f'{n} streams'] / eps['1 in flight']:.2f}x")
        print(
            f"(b) env share of rollout wall time: {median(runs['1 in flight'], 'env_share'):.2%} "
            f"(1 in flight), {median(runs[f'{n} streams'], 'env_share'):.2%} ({n} streams)"
        )
    held = runs[f"{n} streams, straggler"][0]["held"]
    added = {k: wall[f"{n} {k}, straggler"] - wall[f"{n} {k}"] for k in ("rounds", "streams")}
    print(
        f"(s) one request in {args.straggler_every} held {args.straggler_seconds:g} s ({held} held per run): "
        f"streams / rounds {eps[f'{n} streams, straggler'] / eps[f'{n} rounds, straggler']:.2f}x episodes/s; "
        f"wall time the stragglers added: rounds {added['rounds']:+.1f} s, streams {added['streams']:+.1f} s "
        f"(held in all {held * args.straggler_seconds:g} s)"
    )
    two = [name for name in runs if name.endswith("endpoints")]
    if two:
        print(f"(e) episodes/s, {two[0]} / 1 endpoint: {eps[two[0]] / eps[f'{n} streams']:.2f}x")
    first = {name: rows[0]["replies"] for name, rows in runs.items()}
    same = all(replies == next(iter(first.values())) for replies in first.values())
    print(f"replies per seed identical in every configuration: {same}")


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
    parser.add_argument("--second-url", help="a second server of the same model (with --base-url)")
    parser.add_argument("--model", help="the served model name (with --base-url)")
    parser.add_argument("--servers", type=int, choices=(1, 2), default=2, help="servers to start")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--few-shot", type=int, default=2)
    parser.add_argument("--straggler-every", type=int, default=8)
    parser.add_argument("--straggler-seconds", type=float, default=2.0)
    parser.add_argument(
        "--straggler-only", action="store_true", help="only the straggler case (s): rounds and streams"
    )
    parser.add_argument("--enforce-eager", action="store_true", help="start the servers without compiling")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for (c)")
    parser.add_argument("--skip-server", action="store_true", help="skip (a), (b), (s), (e)")
    parser.add_argument("--skip-in-process", action="store_true", help="skip (c)")
    args = parser.parse_args(argv)
    if args.base_url and not args.model:
        parser.error("--base-url needs --model")

    if not args.skip_server:
        processes: list[subprocess.Popen] = []
        try:
            if args.base_url:
                urls, model = [args.base_url] + ([args.second_url] if args.second_url else []), args.model
            else:
                ncpu = os.cpu_count() or 1
                binds = (
                    [None]
                    if args.servers == 1 or ncpu < 2
                    else [f"0-{ncpu // 2 - 1}", f"{ncpu // 2}-{ncpu - 1}"]
                )
                from concurrent.futures import ThreadPoolExecutor

                def start(i: int, cpus: str | None) -> tuple[subprocess.Popen, str, str, float]:
                    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"llm_rollouts-vllm-{os.getpid()}-{i}.log"
                    print(
                        f"starting scripts/vllm-server.sh (cpus {cpus or 'all'}, log {log}) ...", flush=True
                    )
                    extra = ["--enforce-eager"] if args.enforce_eager else None
                    return start_server(log, cpus=cpus, extra=extra)

                urls, failed = [], None
                with ThreadPoolExecutor(len(binds)) as pool:  # the servers start side by side
                    for future in [pool.submit(start, i, cpus) for i, cpus in enumerate(binds)]:
                        try:
                            process, base_url, model, seconds = future.result()
                        except SystemExit as err:
                            failed = err
                            continue
                        processes.append(process)
                        urls.append(base_url)
                        print(f"server ready in {seconds:.0f} s at {base_url} ({model})", flush=True)
                if failed is not None:
                    raise failed
            load = os.getloadavg()[0]
            runs = bench_server(urls, model, args)
        finally:
            for process in processes:
                stop_server(process)
        report_server(runs, args, model, (load, os.getloadavg()[0]))

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
