"""Episode streams, several endpoints per agent, and language-model cells on Ray.

The server is the fault-injecting stand-in of ``tests/test_llm_faults.py`` (a scripted
OpenAI-compatible server on 127.0.0.1): a straggler it holds back, a port where nothing
listens, HTTP 500. Every check is on counts and order, never on wall-clock time. The same
paths against a real vLLM server are in ``test_streams_against_vllm`` (marked ``llm``).
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from test_llm_faults import StandIn, closed_port_url, ok, status

import harness_gym  # noqa: F401  (registers the envs)
from harness_gym import Harness
from harness_gym.llm.agent import LLMAgent
from harness_gym.llm.cache import CompletionCache
from harness_gym.llm.openai_backend import OpenAIBackend
from harness_gym.llm.spec import LLMSpecError, parse_llm_spec
from harness_gym.llm.types import ChatRequest, Sampling
from harness_gym.rollout import Episode, RolloutStats, run_batched

# A legal-looking click on the page's container, which is not a button: every episode runs
# its whole step budget (ClickButton under this harness: 3 steps) under the feedback policy.
MISS = '{"name": "click", "arguments": {"ref": 1}}'
STEPS = 3


@pytest.fixture
def servers() -> Iterator[list[StandIn]]:
    made = [StandIn(), StandIn()]
    yield made
    for server in made:
        server.close()


def _env() -> gym.Env:
    return gym.make(
        "harness_gym/ClickButton-v0", harness=Harness(tool_style="json", invalid_action="feedback")
    )


def _backend(url: str | list[str], **kwargs: Any) -> OpenAIBackend:
    kwargs.setdefault("timeout", 30.0)
    kwargs.setdefault("retries", 0)
    kwargs.setdefault("backoff", 0.01)
    return OpenAIBackend("stand-in", url, **kwargs)


def _episodes(backend: Any, seeds: range, cache: CompletionCache | None = None) -> list[Episode]:
    return [Episode(_env, lambda env: LLMAgent(env, backend, cache=cache), seed=s) for s in seeds]


def _echo_seed(handler: BaseHTTPRequestHandler, request: dict) -> None:
    """A reply that is a function of the request alone (its seed and length)."""
    text = f"reply {request.get('seed')} {len(request['messages'])}"
    ok(text)(handler, request)


class Straggler:
    """The first request is held until ``at_least`` later requests were answered, then up to
    ``grace`` seconds more for ``others`` of them (which a runner with a barrier never sends);
    it records how many were answered while it was in flight."""

    def __init__(self, at_least: int, others: int, grace: float) -> None:
        self.at_least, self.others, self.grace = at_least, others, grace
        self.answered = 0
        self.during: int | None = None
        self.slow_seed: int | None = None
        self._first = True
        self._cond = threading.Condition()

    def __call__(self, handler: BaseHTTPRequestHandler, request: dict) -> None:
        with self._cond:
            first, self._first = self._first, False
        if first:
            with self._cond:
                self._cond.wait_for(lambda: self.answered >= self.at_least, timeout=120.0)
                self._cond.wait_for(lambda: self.answered >= self.others, timeout=self.grace)
                self.during, self.slow_seed = self.answered, request.get("seed")
            ok(MISS)(handler, request)
            return
        ok(MISS)(handler, request)
        with self._cond:
            self.answered += 1
            self._cond.notify_all()


# -- streams against rounds ------------------------------------------------------------------


@pytest.mark.parametrize("schedule", ["streams", "rounds"])
def test_a_straggler_holds_back_only_its_own_episode_in_streams(
    servers: list[StandIn], schedule: str
) -> None:
    """One request in eight is slow: streams finish every other episode meanwhile, rounds one step each."""
    others = 7 * STEPS  # every request of the seven other episodes
    # streams: held until all the others were answered; rounds: until the 7 of its round were,
    # then 0.5 s for more (none come: the round waits for the straggler)
    straggler = Straggler(others if schedule == "streams" else 7, others, grace=0.5)
    servers[0].default = straggler
    backend = _backend(servers[0].base_url, concurrency=8)
    stats = RolloutStats()
    out = run_batched(_episodes(backend, range(8)), in_flight=8, stats=stats, schedule=schedule)
    backend.close()
    assert [e for *_, e in out] == [None] * 8
    results = [r for _, r, _ in out]
    assert all(r.steps == STEPS for r in results) and servers[0].count == 8 * STEPS
    assert stats.peak_in_flight == 8
    if schedule == "streams":
        assert straggler.during == others  # the seven others ran to their end meanwhile
        # ... and the straggler's episode finished last
        slow = [s for s in range(8) if Sampling().request_seed(s, 0) == straggler.slow_seed]
        assert [e.seed for e, *_ in out[-1:]] == slow
    else:
        assert straggler.during == 7  # one request each, then the barrier
        assert stats.rounds == STEPS


def test_replies_do_not_depend_on_the_schedule(servers: list[StandIn], tmp_path: Path) -> None:
    servers[0].default = _echo_seed
    backend = _backend(servers[0].base_url, concurrency=4)

    def run(**kwargs: Any) -> dict[int, Any]:
        out = run_batched(_episodes(backend, range(6), kwargs.pop("cache", None)), **kwargs)
        assert [e for *_, e in out] == [None] * 6
        return {r.seed: (r.extra["completions"], r.steps, r.episode_return) for _, r, _ in out}

    alone = run(in_flight=1)
    per_run = servers[0].count
    assert per_run == 6 * STEPS
    assert run(in_flight=6) == alone
    assert run(in_flight=4, schedule="rounds") == alone
    # every run sent the same requests (the same seeds), whatever the order
    seeds = [r["seed"] for r in servers[0].received]
    assert sorted(seeds[:per_run]) == sorted(seeds[per_run : 2 * per_run]) == sorted(seeds[2 * per_run :])
    # The cache keys what was asked, not when: a streams run fills it, a rounds run reads it.
    cache = CompletionCache(tmp_path / "cache")
    assert run(in_flight=5, cache=cache) == alone
    sent = servers[0].count
    assert run(in_flight=2, schedule="rounds", cache=cache) == alone
    assert servers[0].count == sent and cache.hits == per_run
    backend.close()


class _Pooled:
    """A streaming agent (a future per step) that always answers the same text."""

    pool = ThreadPoolExecutor(2)

    def __init__(self, fail_on_submit: bool = False) -> None:
        self.fail = fail_on_submit
        self.asked = 0

    def reset(self, seed: int | None = None) -> None:
        self.asked = 0

    def act(self, observation: str, info: dict) -> str:
        raise AssertionError("a streaming agent is never asked with act()")

    def submit(self, observation: str, info: dict) -> Future:
        self.asked += 1
        if self.fail and self.asked == 2:
            raise RuntimeError("the agent broke")
        return self.pool.submit(lambda: MISS)

    def receive(self, text: str) -> str:
        return text


def test_streams_mix_with_agents_that_act_and_an_agent_error_ends_only_its_episode() -> None:
    from harness_gym.baselines.agents import OracleAgent

    episodes = [
        Episode(_env, lambda env: _Pooled(), seed=0),
        Episode(_env, OracleAgent, seed=1),
        Episode(_env, lambda env: _Pooled(fail_on_submit=True), seed=2),
        Episode(_env, lambda env: _Pooled(), seed=3),
    ]
    out = {e.seed: (r, err) for e, r, err in run_batched(episodes, in_flight=3)}
    assert out[1][0].success and out[1][1] is None
    assert str(out[2][1]) == "the agent broke" and out[2][0] is None
    assert out[0][0].steps == out[3][0].steps == STEPS


def test_schedule_and_in_flight_are_checked() -> None:
    with pytest.raises(ValueError, match="schedule must be one of"):
        run_batched([], schedule="waves")
    with pytest.raises(ValueError, match="in_flight must be >= 1"):
        run_batched([], in_flight=0)


# -- several endpoints, one agent ----------------------------------------------------------------

REQUEST = ChatRequest(messages=[{"role": "user", "content": "Say hello."}], sampling=Sampling(max_tokens=8))


def test_requests_are_spread_over_the_endpoints(servers: list[StandIn]) -> None:
    backend = _backend([s.base_url for s in servers])
    for _ in range(6):  # one at a time: each goes to the endpoint that got work least recently
        assert backend.complete([REQUEST])[0].error is None
    assert [s.count for s in servers] == [3, 3]
    answers = backend.complete([REQUEST] * 10)  # at once: neither endpoint idles
    assert all(a.error is None for a in answers) and min(s.count for s in servers) >= 3 + 1
    backend.close()


def test_a_dead_endpoint_fails_over_and_is_set_aside(servers: list[StandIn]) -> None:
    dead = closed_port_url()
    backend = _backend([dead, servers[0].base_url])  # retries=0: only the failover attempt
    answers = [backend.complete([REQUEST])[0] for _ in range(8)]
    assert [a.error for a in answers] == [None] * 8 and servers[0].count == 8
    counts = backend.endpoints.counts()
    # tried once, then set aside for its cool-down: the other seven went straight to the live one
    assert counts[dead] == {"answered": 0, "failed": 1}
    assert answers[0].attempts in (1, 2) and sum(a.attempts for a in answers) == 9
    backend.close()


def test_http_500_on_one_endpoint_is_retried_on_the_other(servers: list[StandIn]) -> None:
    servers[0].default = status(500, {"error": {"message": "engine dead"}})
    servers[1].default = ok("fine")
    backend = _backend([s.base_url for s in servers])
    answers = backend.complete([REQUEST] * 4)
    assert [a.text for a in answers] == ["fine"] * 4 and servers[1].count == 4
    backend.close()


def test_every_endpoint_down_names_each_failure() -> None:
    urls = [closed_port_url(), closed_port_url()]
    backend = _backend(urls, retries=1)
    [answer] = backend.complete([REQUEST])
    assert answer.error_kind == "connection" and answer.attempts == 3  # retries + one per extra endpoint
    assert answer.error.startswith("cannot reach http://127.0.0.1:")
    backend.close()


def test_several_endpoints_are_one_agent() -> None:
    one = parse_llm_spec("openai:m@http://127.0.0.1:8000/v1?max_tokens=8")
    two = parse_llm_spec(
        "openai:m@http://127.0.0.1:8000/v1/,http://10.0.0.2:8000/v1?max_tokens=8&concurrency=4"
    )
    assert one.name == two.name == "openai:m?max_tokens=8"
    assert two.base_url == "http://127.0.0.1:8000/v1,http://10.0.0.2:8000/v1"


@pytest.mark.parametrize(
    "url, message",
    [
        ("http://a:1/v1,ftp://b/v1", "must start with http:// or https://"),
        ("http://a:1/v1,http://a:1/v1/", "listed twice"),
    ],
)
def test_bad_endpoint_lists_are_named(url: str, message: str) -> None:
    with pytest.raises(LLMSpecError, match=message):
        parse_llm_spec(f"openai:m@{url}")


def _serve_models(server: StandIn, entry: dict[str, Any]) -> None:
    def do_get(handler: BaseHTTPRequestHandler) -> None:
        body = json.dumps({"object": "list", "data": [entry]}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    server.server.RequestHandlerClass.do_GET = do_get  # type: ignore[attr-defined]


def test_identity_over_endpoints_agrees_or_says_it_is_a_mixture(servers: list[StandIn]) -> None:
    entry = {"id": "stand-in", "object": "model", "root": "/models/a", "owned_by": "x"}
    for server in servers:
        _serve_models(server, entry)
    backends = [_backend(servers[0].base_url), _backend([s.base_url for s in servers])]
    alone, both = (b.identity for b in backends)
    assert both == alone and alone.startswith("served:stand-in:")
    _serve_models(servers[1], {**entry, "root": "/models/b"})
    backends.append(_backend([s.base_url for s in servers]))
    mixed = backends[-1].identity
    assert mixed.count("served:stand-in:") == 2 and alone in mixed.split("+")
    for backend in backends:
        backend.close()


# -- language-model cells on Ray -------------------------------------------------------------------


def _lm_spec(url: str) -> Any:
    from harness_gym.analysis.sweep import SweepSpec

    agent = f"openai:stand-in@{url}?max_tokens=8&retries=0&cache=off"
    return SweepSpec.build([agent, "random"], tasks=["ClickButton"], subset="balanced:2", seeds=4)


@pytest.mark.slow  # Ray's start-up: ~25 s on two loaded cores
def test_lm_cells_on_ray_give_the_rows_of_a_local_run_and_resume(
    servers: list[StandIn], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    from harness_gym.analysis.sweep import load_rows, run_sweep

    for server in servers:
        server.default = _echo_seed
    urls = ",".join(s.base_url for s in servers)
    spec = _lm_spec(urls)
    local = run_sweep(spec, tmp_path / "local", workers=0, progress=False)
    sent = sum(s.count for s in servers)
    import harness_gym.analysis.sweep.run as sweep_module

    def not_here(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("language-model cells ran in the sweep's process, not on Ray")

    monkeypatch.setattr(sweep_module, "run_cells_batched", not_here)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = run_sweep(spec, tmp_path / "ray", workers=2, backend="ray", progress=False, in_flight=3)
        assert sum(s.count for s in servers) == 2 * sent  # no cache: every request again
        # resume: nothing left to run, nothing sent
        log = io.StringIO()
        again = run_sweep(spec, tmp_path / "ray", workers=2, backend="ray", progress=False, log=log)
        assert again.n_run == 0 and sum(s.count for s in servers) == 2 * sent
    finally:
        ray.shutdown()
    assert local.n_errors == remote.n_errors == 0 and remote.n_run == local.n_run
    drop = ["wall_time", "llm_latency"]
    a, b = (load_rows(tmp_path / d).drop(columns=drop).sort_values("index") for d in ("local", "ray"))
    assert a.reset_index(drop=True).equals(b.reset_index(drop=True))
    lm = b[b["agent"].str.startswith("openai:")]
    assert len(lm) == 2 * 4 and (lm["llm_requests"] == lm["steps"]).all()
    assert all(s.count > 0 for s in servers)


def test_lm_batches_keep_streams_full_and_cover_every_cell_once() -> None:
    from harness_gym.analysis.sweep.executors import lm_batches

    cells = list(range(100))
    for workers, in_flight in [(1, 8), (2, 3), (8, 8), (2, 50)]:
        batches = lm_batches(cells, workers, in_flight)  # type: ignore[arg-type]
        assert [c for b in batches for c in b] == cells
        assert all(min(in_flight, 100) <= len(b) <= 4 * in_flight for b in batches[:-1])
    assert len(lm_batches(cells, 2, 3)) >= 8  # every worker gets several tasks  # type: ignore[arg-type]


# -- against a real vLLM server --------------------------------------------------------------------


@pytest.mark.llm
@pytest.mark.xdist_group("llm")
def test_streams_against_vllm(vllm_server, servers: list[StandIn]) -> None:
    """With the real server and a slow second endpoint: same replies per seed in streams and
    rounds, through one endpoint or two (the stand-in holds each request 0.5 s, then 500s,
    so its share fails over to vLLM)."""
    from test_llm_faults import slow

    sampling = Sampling(max_tokens=16, temperature=1.0, seed=7)

    def run(urls: list[str], schedule: str) -> dict[int, Any]:
        backend = OpenAIBackend(vllm_server.model, urls, timeout=120, retries=1, concurrency=4)
        episodes = [
            Episode(_env, lambda env: LLMAgent(env, backend, sampling=sampling), seed=s) for s in range(4)
        ]
        out = run_batched(episodes, in_flight=4, schedule=schedule)
        backend.close()
        assert [e for *_, e in out] == [None] * 4
        return {r.seed: r.extra["completions"] for _, r, _ in out}

    servers[0].default = slow(0.5, status(500, {"error": {"message": "down"}}))
    streams = run([vllm_server.base_url], "streams")
    assert run([vllm_server.base_url], "rounds") == streams
    assert run([vllm_server.base_url, servers[0].base_url], "streams") == streams
    assert servers[0].count > 0


# -- training's rollout: a generator that streams --------------------------------------------------


class _ScriptedServer:
    """A streaming generator whose reply depends only on (episode, turn); episode 0's first
    turn is held until every other turn of the batch was answered (or ``give_up`` seconds)."""

    def __init__(self, tokenizer: Any, others: int, give_up: float = 60.0) -> None:
        self.tokenizer, self.others, self.give_up = tokenizer, others, give_up
        self.pool = ThreadPoolExecutor(4)
        self.answered = 0
        self.during: int | None = None
        self._cond = threading.Condition()

    def reply(self, episode: int, turn: int) -> tuple[list[int], list[float]]:
        ids = list(self.tokenizer(f"no {episode} {turn}", add_special_tokens=False)["input_ids"])
        ids.append(self.tokenizer.eos_token_id)
        return ids, [-0.25 * (episode + 1)] * len(ids)

    def submit(self, input_ids: list[int], episode: int, turn: int) -> Future:
        def answer() -> tuple[list[int], list[float]]:
            if (episode, turn) == (0, 0):
                with self._cond:
                    self._cond.wait_for(lambda: self.answered >= self.others, timeout=self.give_up)
                    self.during = self.answered
            else:
                with self._cond:
                    self.answered += 1
                    self._cond.notify_all()
            return self.reply(episode, turn)

        return self.pool.submit(answer)


@pytest.mark.llm  # the embedded model's tokenizer
def test_training_rollout_streams_and_gives_the_replies_of_batched_turns() -> None:
    from harness_gym.llm.embedded import embedded_model_path
    from harness_gym.train.chat_tokens import ChatTokenizer
    from harness_gym.train.grpo_lm import load_tokenizer
    from harness_gym.train.lm_rollout import RolloutConfig, play_episodes

    tokenizer = load_tokenizer(Path(embedded_model_path()))
    chat = ChatTokenizer(tokenizer)
    harness = Harness(invalid_action="feedback")
    jobs = [("ClickButton", harness, s) for s in range(4)]
    config = RolloutConfig(max_reply_tokens=16)
    server = _ScriptedServer(tokenizer, others=3 * STEPS)
    turn = {"n": 0}

    def batched(batch: list[list[int]]) -> list[tuple[list[int], list[float]]]:
        t, turn["n"] = turn["n"], turn["n"] + 1  # every episode is running at every turn here
        assert len(batch) == 4
        return [server.reply(i, t) for i in range(4)]

    streamed = play_episodes(jobs, chat, server, config)
    rounds = play_episodes(jobs, chat, batched, config)
    assert server.during == 3 * STEPS  # the other episodes ran to their end meanwhile
    assert [o.turns for o in streamed] == [STEPS] * 4
    for a, b in zip(streamed, rounds):
        assert (a.tokens.ids, a.tokens.logprobs, a.tokens.env_mask) == (
            b.tokens.ids,
            b.tokens.logprobs,
            b.tokens.env_mask,
        )
        assert (a.replies, a.episode_return, a.valid_actions) == (
            b.replies,
            b.episode_return,
            b.valid_actions,
        )


@pytest.mark.llm
@pytest.mark.xdist_group("llm")
def test_lm_sweep_on_ray_against_vllm_and_a_failing_endpoint(
    vllm_server, servers: list[StandIn], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two Ray worker processes, the real server and a fault stand-in that answers HTTP 500
    after a delay as the second endpoint: the rows are those of a local run through the real
    server alone (its requests fail over), and a resume sends nothing."""
    import ray
    from test_llm_faults import slow

    import harness_gym.analysis.sweep.run as sweep_module
    from harness_gym.analysis.sweep import SweepSpec, load_rows, run_sweep

    def spec(urls: str) -> SweepSpec:
        agent = f"openai:{vllm_server.model}@{urls}?max_tokens=16&retries=1&cache=off"
        return SweepSpec.build([agent], tasks=["ClickButton"], subset="balanced:2", seeds=3)

    local = run_sweep(spec(vllm_server.base_url), tmp_path / "local", workers=0, progress=False)
    servers[0].default = slow(0.2, status(500, {"error": {"message": "engine down"}}))
    both = spec(f"{vllm_server.base_url},{servers[0].base_url}")

    def not_here(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("language-model cells ran in the sweep's process, not on Ray")

    monkeypatch.setattr(sweep_module, "run_cells_batched", not_here)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = run_sweep(both, tmp_path / "ray", workers=2, backend="ray", progress=False, in_flight=3)
        served = vllm_server.requests_served()
        again = run_sweep(both, tmp_path / "ray", workers=2, backend="ray", progress=False)
        assert again.n_run == 0 and vllm_server.requests_served() == served
    finally:
        ray.shutdown()
    assert local.n_errors == remote.n_errors == 0 and servers[0].count > 0
    columns = ["index", "agent", "success", "steps", "invalid_actions", "completions", "model_identity"]
    a, b = (
        load_rows(tmp_path / d).sort_values("index")[columns].reset_index(drop=True) for d in ("local", "ray")
    )
    assert a.equals(b)
