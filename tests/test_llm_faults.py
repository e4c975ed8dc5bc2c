"""Bad input for language-model agents, from a small fault-injecting OpenAI-compatible stand-in.

The stand-in (stdlib ``http.server`` in a thread on 127.0.0.1) answers each request as the test
scripts it: a valid chat completion, a sleep past the timeout, HTTP 429 / 500 / 400, a body that
is not JSON, no choices, a tool call naming an unknown tool or with arguments that are not JSON,
a completion cut at ``max_tokens``. It counts the requests it received. Each case is checked at
both layers: :class:`OpenAIBackend` returns a :class:`Completion` naming the error (never raises)
and :class:`LLMAgent` in a real env never raises, the env records the invalid action, and the
episode record counts the error. No real model runs here (the success paths are in
``tests/test_llm_agents.py``).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import harness_gym  # noqa: F401  (registers the envs)
from harness_gym import Harness
from harness_gym.llm.agent import LLMAgent
from harness_gym.llm.cache import CompletionCache
from harness_gym.llm.openai_backend import OpenAIBackend
from harness_gym.llm.spec import LLMSpecError, agent_factory, parse_llm_spec
from harness_gym.llm.types import TRANSPORT_ERRORS, ChatRequest, Sampling
from harness_gym.rollout import Episode, RolloutStats, run_batched

# vLLM 0.32's answer to a prompt longer than --max-model-len (docs/llm-server.md).
CONTEXT_BODY = {
    "error": {
        "message": "This model's maximum context length is 2048 tokens. However, your prompt contains "
        "at least 2049 input tokens, which exceeds the limit.",
        "type": "BadRequestError",
        "param": "input_tokens",
        "code": 400,
    }
}

Behaviour = Callable[[BaseHTTPRequestHandler, dict], None]


# -- the stand-in server -------------------------------------------------------------------------


def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str]) -> None:
    try:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up (a timeout case)


def completion_body(
    text: str | None = "", tool_calls: list[dict] | None = None, finish_reason: str = "stop"
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": call} for i, call in enumerate(tool_calls)
        ]
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": 0,
        "model": "stand-in",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def ok(text: str | None = "", tool_calls: list[dict] | None = None, finish_reason: str = "stop") -> Behaviour:
    body = json.dumps(completion_body(text, tool_calls, finish_reason)).encode()
    return lambda h, _req: _send(h, 200, body, {"Content-Type": "application/json"})


def status(code: int, body: Any, headers: dict[str, str] | None = None) -> Behaviour:
    raw = json.dumps(body).encode()
    return lambda h, _req: _send(h, code, raw, {"Content-Type": "application/json", **(headers or {})})


def raw(body: bytes, content_type: str = "application/json") -> Behaviour:
    return lambda h, _req: _send(h, 200, body, {"Content-Type": content_type})


def slow(seconds: float, then: Behaviour | None = None) -> Behaviour:
    def behave(handler: BaseHTTPRequestHandler, request: dict) -> None:
        time.sleep(seconds)
        (then or ok("late"))(handler, request)

    return behave


class StandIn:
    """An OpenAI-compatible server whose answers are scripted; it counts what it received."""

    def __init__(self) -> None:
        self.script: list[Behaviour] = []  # one behaviour per request, in order
        self.default: Behaviour = ok("hello")  # once the script is used up
        self.received: list[dict] = []
        self._lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with stand_in._lock:
                    stand_in.received.append(body)
                    behaviour = stand_in.script.pop(0) if stand_in.script else stand_in.default
                behaviour(self, body)

            def do_GET(self) -> None:  # noqa: N802 - /v1/models as vLLM lists it; no /version
                if self.path.rstrip("/").endswith("/models"):
                    listed = {"object": "list", "data": [{"id": "stand-in", "object": "model"}]}
                    return _send(self, 200, json.dumps(listed).encode(), {"Content-Type": "application/json"})
                _send(self, 404, b'{"detail": "Not Found"}', {"Content-Type": "application/json"})

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.received)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    server = StandIn()
    yield server
    server.close()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def make_backend() -> Iterator[Callable[..., OpenAIBackend]]:
    made: list[OpenAIBackend] = []

    def make(base_url: str, **kwargs: Any) -> OpenAIBackend:
        kwargs.setdefault("timeout", 5.0)
        kwargs.setdefault("retries", 0)
        kwargs.setdefault("backoff", 0.01)
        backend = OpenAIBackend("stand-in", base_url, **kwargs)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def record_waits(backend: OpenAIBackend) -> list[float]:
    """Record the backend's retry waits (and still wait them)."""
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    backend._sleep = sleep
    return waits


REQUEST = ChatRequest(messages=[{"role": "user", "content": "Say hello."}], sampling=Sampling(max_tokens=8))


# -- layer 1: the backend ------------------------------------------------------------------------


def test_valid_completion_is_read(stand_in: StandIn, make_backend) -> None:
    stand_in.script = [ok("hi there", finish_reason="stop")]
    [c] = make_backend(stand_in.base_url).complete([REQUEST])
    assert (c.text, c.error_kind, c.finish_reason, c.attempts) == ("hi there", None, "stop", 1)
    assert (c.prompt_tokens, c.completion_tokens) == (11, 7)
    sent = stand_in.received[0]
    assert sent["model"] == "stand-in" and sent["messages"] == REQUEST.messages and sent["max_tokens"] == 8


def test_server_down_is_a_connection_error_after_retries(make_backend) -> None:
    backend = make_backend(closed_port_url(), retries=2)
    waits = record_waits(backend)
    [c] = backend.complete([REQUEST])
    assert c.error_kind == "connection" and c.attempts == 3 and len(waits) == 2
    assert "cannot reach" in c.error and c.failed and c.text == ""


def test_slow_server_times_out_then_retries(stand_in: StandIn, make_backend) -> None:
    stand_in.default = slow(4.0)
    backend = make_backend(stand_in.base_url, timeout=0.5, retries=1)
    started = time.perf_counter()
    [c] = backend.complete([REQUEST])
    assert c.error_kind == "timeout" and c.attempts == 2 and stand_in.count == 2
    assert "0.5 s" in c.error
    assert time.perf_counter() - started < 3.5  # gave up on its own timeout, not the server's sleep


def test_slow_answer_within_retries_succeeds(stand_in: StandIn, make_backend) -> None:
    stand_in.script = [slow(4.0), ok("second try")]
    [c] = make_backend(stand_in.base_url, timeout=0.5, retries=1).complete([REQUEST])
    assert (c.text, c.error_kind, c.attempts, stand_in.count) == ("second try", None, 2, 2)


def test_429_waits_retry_after_then_succeeds(stand_in: StandIn, make_backend) -> None:
    stand_in.script = [status(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"}), ok("done")]
    backend = make_backend(stand_in.base_url, retries=2, backoff=0.01)
    waits = record_waits(backend)
    [c] = backend.complete([REQUEST])
    assert (c.text, c.error_kind, c.attempts, stand_in.count) == ("done", None, 2, 2)
    assert waits == [1.0]  # Retry-After, not the 0.01 s backoff
    assert c.latency >= 0.95


def test_429_with_retries_exhausted(stand_in: StandIn, make_backend) -> None:
    stand_in.default = status(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"})
    backend = make_backend(stand_in.base_url, retries=1)
    waits = record_waits(backend)
    [c] = backend.complete([REQUEST])
    assert c.error_kind == "http_429" and c.attempts == 2 and stand_in.count == 2 and waits == [1.0]
    assert "slow down" in c.error


def test_500_is_retried_with_backoff_then_named(stand_in: StandIn, make_backend) -> None:
    stand_in.default = status(500, {"error": {"message": "engine died"}})
    backend = make_backend(stand_in.base_url, retries=2, backoff=0.01)
    waits = record_waits(backend)
    [c] = backend.complete([REQUEST])
    assert c.error_kind == "http_5xx" and c.attempts == 3 and stand_in.count == 3
    assert "HTTP 500" in c.error and "engine died" in c.error
    # exponential backoff with jitter: ~0.01, ~0.02
    assert len(waits) == 2 and 0.007 <= waits[0] <= 0.013 and 0.015 <= waits[1] <= 0.025


def test_500_then_success(stand_in: StandIn, make_backend) -> None:
    stand_in.script = [status(503, {"error": {"message": "busy"}}), ok("recovered")]
    [c] = make_backend(stand_in.base_url, retries=3).complete([REQUEST])
    assert (c.text, c.error_kind, c.attempts, stand_in.count) == ("recovered", None, 2, 2)


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_malformed_json_body(stand_in: StandIn, make_backend, content_type: str) -> None:
    stand_in.default = raw(b'{"choices": [{"message": ', content_type)
    [c] = make_backend(stand_in.base_url, retries=2).complete([REQUEST])
    assert c.error_kind == "malformed_response" and c.attempts == 1 and stand_in.count == 1
    assert c.error


@pytest.mark.parametrize(
    "body",
    [{"choices": [{"index": 0}]}, {"choices": "nope"}, [1, 2], {"no": "choices"}],
    ids=["choice-without-message", "choices-not-a-list", "a-list", "no-choices-key"],
)
def test_json_that_is_not_a_completion(stand_in: StandIn, make_backend, body: Any) -> None:
    stand_in.default = raw(json.dumps(body).encode())
    [c] = make_backend(stand_in.base_url).complete([REQUEST])
    assert c.error_kind in ("malformed_response", "empty_choices") and c.failed and c.error


def test_empty_choices(stand_in: StandIn, make_backend) -> None:
    stand_in.default = raw(json.dumps({**completion_body("x"), "choices": []}).encode())
    [c] = make_backend(stand_in.base_url, retries=2).complete([REQUEST])
    assert c.error_kind == "empty_choices" and c.attempts == 1 and stand_in.count == 1


def test_unknown_tool_and_bad_arguments_are_returned_raw(stand_in: StandIn, make_backend) -> None:
    stand_in.script = [
        ok("", [{"name": "frobnicate", "arguments": '{"x": 1}'}], "tool_calls"),
        ok("", [{"name": "click", "arguments": "{ref: 2"}], "tool_calls"),
    ]
    backend = make_backend(stand_in.base_url)
    [a] = backend.complete([REQUEST])
    [b] = backend.complete([REQUEST])
    assert a.error_kind is None and (a.tool_calls[0].name, a.tool_calls[0].arguments) == (
        "frobnicate",
        '{"x": 1}',
    )
    assert b.error_kind is None and (b.tool_calls[0].name, b.tool_calls[0].arguments) == ("click", "{ref: 2")


def test_context_length_400_is_not_retried(stand_in: StandIn, make_backend) -> None:
    stand_in.default = status(400, CONTEXT_BODY)
    [c] = make_backend(stand_in.base_url, retries=3).complete([REQUEST])
    assert c.error_kind == "context_length" and c.attempts == 1 and stand_in.count == 1
    assert "maximum context length is 2048" in c.error


def test_other_400_is_http_4xx(stand_in: StandIn, make_backend) -> None:
    stand_in.default = status(400, {"error": {"message": "unknown field 'frob'"}})
    [c] = make_backend(stand_in.base_url, retries=3).complete([REQUEST])
    assert c.error_kind == "http_4xx" and c.attempts == 1 and "unknown field" in c.error


def test_finish_reason_length_keeps_the_cut_text(stand_in: StandIn, make_backend) -> None:
    stand_in.default = ok('{"name": "click", "argu', finish_reason="length")
    [c] = make_backend(stand_in.base_url).complete([REQUEST])
    assert (c.text, c.finish_reason, c.error_kind) == ('{"name": "click", "argu', "length", None)


def test_batch_keeps_order_and_isolates_failures(stand_in: StandIn, make_backend) -> None:
    """A batch goes out concurrently; each reply lands at its request, a failure stays its own."""

    def echo(handler: BaseHTTPRequestHandler, request: dict) -> None:
        word = request["messages"][0]["content"]
        if word == "fail":
            status(500, {"error": {"message": "no"}})(handler, request)
        else:
            ok(word.upper())(handler, request)

    stand_in.default = echo
    words = ["a", "fail", "b", "c", "fail", "d"]
    requests = [ChatRequest(messages=[{"role": "user", "content": w}]) for w in words]
    out = make_backend(stand_in.base_url, concurrency=4).complete(requests)
    assert [c.error_kind or c.text for c in out] == ["A", "http_5xx", "B", "C", "http_5xx", "D"]


def test_grammar_goes_to_structured_outputs(stand_in: StandIn, make_backend) -> None:
    env = gym.make("harness_gym/ClickButton-v0", harness=Harness(tool_style="python")).unwrapped
    env.reset(seed=1)
    grammar = env.action_grammar()
    request = ChatRequest(messages=REQUEST.messages, grammar=grammar)
    make_backend(stand_in.base_url).complete([request])
    assert stand_in.received[0]["structured_outputs"] == {"regex": grammar.value}
    assert "guided_regex" not in stand_in.received[0]  # vLLM 0.32 ignores the old field silently


# -- layer 2: the agent in a real env ------------------------------------------------------------

# (name, behaviour, the backend's error kind, the env's error kind after the step)
FAULTS: list[tuple[str, Callable[[], Behaviour], str | None, str]] = [
    ("timeout", lambda: slow(3.0), "timeout", "empty"),
    (
        "http_429",
        lambda: status(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}),
        "http_429",
        "empty",
    ),
    ("http_5xx", lambda: status(500, {"error": {"message": "boom"}}), "http_5xx", "empty"),
    ("malformed_json", lambda: raw(b"{not json"), "malformed_response", "empty"),
    (
        "empty_choices",
        lambda: raw(json.dumps({**completion_body(), "choices": []}).encode()),
        "empty_choices",
        "empty",
    ),
    ("context_length", lambda: status(400, CONTEXT_BODY), "context_length", "empty"),
    (
        "unknown_tool",
        lambda: ok("", [{"name": "frobnicate", "arguments": "{}"}], "tool_calls"),
        None,
        "unknown_tool",
    ),
    (
        "bad_arguments",
        lambda: ok("", [{"name": "click", "arguments": "{ref: 2"}], "tool_calls"),
        None,
        "malformed",
    ),
    ("max_tokens", lambda: ok('{"name": "click", "argu', finish_reason="length"), "max_tokens", "malformed"),
]


def _env(channel: str, policy: str, style: str = "json", task: str = "ClickButton") -> gym.Env:
    harness = Harness(tool_style=style, tool_channel=channel, invalid_action=policy)
    return gym.make(f"harness_gym/{task}-v0", harness=harness)


@pytest.mark.parametrize("policy", ["feedback", "end", "ignore"])
@pytest.mark.parametrize("channel", ["text", "native"])
@pytest.mark.parametrize("fault", FAULTS, ids=[f[0] for f in FAULTS])
def test_agent_step_after_fault(stand_in: StandIn, make_backend, fault, channel: str, policy: str) -> None:
    name, behaviour, llm_kind, env_kind = fault
    # A native call cut at max_tokens never closed: truncated, sent as an empty reply.
    cut = name == "max_tokens" and channel == "native"
    env_kind = "empty" if cut else env_kind
    stand_in.script = [behaviour()]
    env = _env(channel, policy)
    timeout = 0.4 if name == "timeout" else 5.0
    agent = LLMAgent(env, make_backend(stand_in.base_url, timeout=timeout), sampling=Sampling(max_tokens=16))
    obs, info = env.reset(seed=5)
    agent.reset(5)
    text = agent.act(obs, info)
    assert isinstance(text, str)
    obs, reward, terminated, truncated, info = env.step(text)
    assert info["invalid_actions"] == 1 and info["error_kind"] == env_kind and reward == 0
    assert terminated == (policy == "end")
    shown = json.loads(obs).get("error")  # the default harness writes JSON observations
    assert shown == (info["last_error"] if policy != "ignore" else None), (policy, obs)
    record = agent.episode_record()
    assert record["llm_requests"] == 1 and stand_in.count == 1
    assert record["llm_errors"] == ({llm_kind: 1} if llm_kind else {}) | ({"truncated": 1} if cut else {})
    assert record["truncated_replies"] == int(cut)
    assert record["transport_failures"] == (1 if llm_kind in TRANSPORT_ERRORS else 0)
    if llm_kind in TRANSPORT_ERRORS or llm_kind == "context_length":
        assert text == "" and record["first_error"] and record["completions"] == [""]
    if name in ("unknown_tool", "bad_arguments"):  # the raw call is kept, as the model sent it
        assert record["completions"][0]["name"] in ("frobnicate", "click")
        assert record["completions"][0]["arguments"] in ("{}", "{ref: 2")


@pytest.mark.parametrize("policy", ["feedback", "end"])
@pytest.mark.parametrize("channel", ["text", "native"])
def test_agent_with_server_down(make_backend, channel: str, policy: str) -> None:
    env = _env(channel, policy)
    agent = LLMAgent(env, make_backend(closed_port_url(), retries=1))
    obs, info = env.reset(seed=2)
    agent.reset(2)
    steps, done = 0, False
    while not done:
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        steps, done = steps + 1, terminated or truncated
    assert info["invalid_actions"] == steps and not info["success"]
    assert steps == (1 if policy == "end" else env.unwrapped.budget)
    record = agent.episode_record()
    assert record["llm_errors"] == {"connection": steps} and record["transport_failures"] == steps
    assert "cannot reach" in record["first_error"]


@pytest.mark.parametrize("style", ["json", "xml", "python", "command"])
@pytest.mark.parametrize("channel", ["text", "native"])
def test_agent_valid_reply_succeeds(stand_in: StandIn, make_backend, style: str, channel: str) -> None:
    """The stand-in answers with the oracle's action (text, or a native tool call): success."""
    env = _env(channel, "feedback", style)
    base = env.unwrapped
    obs, info = env.reset(seed=7)
    name, arguments = base.bound.toolbox.call(base.task.oracle())
    if channel == "native":
        stand_in.script = [ok(None, [{"name": name, "arguments": json.dumps(arguments)}], "tool_calls")]
    else:
        stand_in.script = [ok(base.oracle_action())]
    agent = LLMAgent(env, make_backend(stand_in.base_url))
    agent.reset(7)
    obs, reward, terminated, _, info = env.step(agent.act(obs, info))
    assert info["success"] and terminated and info["invalid_actions"] == 0 and reward > 0
    sent = stand_in.received[0]
    if channel == "native":
        assert [t["function"]["name"] for t in sent["tools"]] == list(base.bound.tool_names)
        assert sent["tool_choice"] == "required"
    else:
        assert "tools" not in sent
    assert agent.episode_record()["llm_errors"] == {}


def _cycle(behaviours: list[Behaviour]) -> tuple[Behaviour, list[int]]:
    """A behaviour that takes turns through ``behaviours``; ``used[i]`` counts each."""
    used = [0] * len(behaviours)
    lock = threading.Lock()

    def behave(handler: BaseHTTPRequestHandler, request: dict) -> None:
        with lock:
            i = sum(used) % len(behaviours)
            used[i] += 1
        behaviours[i](handler, request)

    return behave, used


@pytest.mark.parametrize("channel", ["text", "native"])
@pytest.mark.parametrize("policy", ["feedback", "end", "ignore"])
def test_batched_rollout_with_faults_finishes_every_episode(
    stand_in: StandIn, make_backend, channel: str, policy: str
) -> None:
    kinds = [f[2] for f in FAULTS if f[0] != "timeout"]
    behave, used = _cycle([f[1]() for f in FAULTS if f[0] != "timeout"] + [ok("")])
    stand_in.default = behave
    backend = make_backend(stand_in.base_url, concurrency=4)
    episodes = [
        Episode(lambda: _env(channel, policy), lambda env: LLMAgent(env, backend), seed=s) for s in range(8)
    ]
    stats = RolloutStats()
    out = run_batched(episodes, in_flight=5, stats=stats)
    assert len(out) == 8 and stats.episodes == 8
    assert all(err is None and result is not None for _, result, err in out), [e for *_, e in out]
    results = [r for _, r, _ in out]
    assert sorted(r.seed for r in results) == list(range(8))
    # every request reached the stand-in, one per step, and every error is counted once
    assert sum(r.extra["llm_requests"] for r in results) == sum(r.steps for r in results) == stand_in.count
    errors: dict[str, int] = {}
    for r in results:
        for kind, n in r.extra["llm_errors"].items():
            errors[kind] = errors.get(kind, 0) + n
    expected = {k: n for k, n in zip(kinds, used) if k is not None and n}
    if channel == "native" and expected.get("max_tokens"):  # a native call cut short: truncated
        expected["truncated"] = expected["max_tokens"]
    assert errors == expected
    assert sum(r.extra["transport_failures"] for r in results) == sum(
        n for k, n in zip(kinds, used) if k in TRANSPORT_ERRORS
    )
    assert all(r.invalid_actions == r.steps for r in results)  # nothing the stand-in says is valid
    if policy == "end":
        assert all(r.steps == 1 for r in results)


# -- the completion cache ------------------------------------------------------------------------


def _run(stand_in: StandIn, backend: OpenAIBackend, cache: CompletionCache, seeds: range, channel="text"):
    episodes = [
        Episode(lambda: _env(channel, "feedback"), lambda env: LLMAgent(env, backend, cache=cache), seed=s)
        for s in seeds
    ]
    out = run_batched(episodes, in_flight=3)
    assert all(err is None for *_, err in out)
    return {r.seed: r for _, r, _ in out}


@pytest.mark.parametrize("channel", ["text", "native"])
def test_cache_rerun_sends_no_request(stand_in: StandIn, make_backend, tmp_path: Path, channel: str) -> None:
    # ref 1 is the page's container: a legal-looking but illegal click, so episodes run all steps
    stand_in.default = (
        ok('{"name": "click", "arguments": {"ref": 1}}')
        if channel == "text"
        else ok("", [{"name": "click", "arguments": '{"ref": 1}'}], "tool_calls")
    )
    backend = make_backend(stand_in.base_url)
    first = _run(stand_in, backend, CompletionCache(tmp_path), range(4), channel)
    sent = stand_in.count
    assert sent == sum(r.steps for r in first.values()) > 4
    assert all(r.extra["cache_hits"] == 0 for r in first.values())
    cache = CompletionCache(tmp_path)
    again = _run(stand_in, backend, cache, range(4), channel)
    assert stand_in.count == sent  # not one request
    assert cache.misses == 0 and cache.hits == sent
    for seed, r in again.items():
        assert r.extra["cache_hits"] == r.extra["llm_requests"] == r.steps
        assert r.extra["completions"] == first[seed].extra["completions"]
        assert (r.invalid_actions, r.success, r.episode_return) == (
            first[seed].invalid_actions,
            first[seed].success,
            first[seed].episode_return,
        )
        assert r.extra["llm_latency"] == 0  # cached replies cost no model time


def test_cache_resumes_an_interrupted_run(stand_in: StandIn, make_backend, tmp_path: Path) -> None:
    stand_in.default = ok('{"name": "click", "arguments": {"ref": 1}}')
    backend = make_backend(stand_in.base_url)
    partial = _run(stand_in, backend, CompletionCache(tmp_path), range(2))
    before = stand_in.count
    full = _run(stand_in, backend, CompletionCache(tmp_path), range(4))
    new = stand_in.count - before
    assert new == sum(full[s].steps for s in (2, 3))  # only the episodes that had not run
    assert all(full[s].extra["cache_hits"] == partial[s].steps for s in (0, 1))


def test_failed_requests_are_not_cached(stand_in: StandIn, make_backend, tmp_path: Path) -> None:
    stand_in.default = status(500, {"error": {"message": "boom"}})
    backend = make_backend(stand_in.base_url)
    first = _run(stand_in, backend, CompletionCache(tmp_path), range(3))
    sent = stand_in.count
    assert sent == sum(r.steps for r in first.values())
    assert not list(tmp_path.rglob("*.json"))
    _run(stand_in, backend, CompletionCache(tmp_path), range(3))
    assert stand_in.count == 2 * sent  # asked again: a failure is never replayed from the cache
    # once the server answers, the answers are cached and the next rerun is free
    stand_in.default = ok('{"name": "click", "arguments": {"ref": 1}}')
    _run(stand_in, backend, CompletionCache(tmp_path), range(3))
    healthy = stand_in.count
    assert list(tmp_path.rglob("*.json"))
    _run(stand_in, backend, CompletionCache(tmp_path), range(3))
    assert stand_in.count == healthy


def test_cache_key_separates_models_and_sampling(stand_in: StandIn, make_backend, tmp_path: Path) -> None:
    stand_in.default = ok("x")
    cache = CompletionCache(tmp_path)
    backend = make_backend(stand_in.base_url)
    [c] = backend.complete([REQUEST])
    cache.put(REQUEST, "openai", "stand-in", c)
    assert cache.get(REQUEST, "openai", "stand-in").text == "x"
    assert cache.get(REQUEST, "openai", "other-model") is None
    hotter = ChatRequest(messages=REQUEST.messages, sampling=Sampling(max_tokens=8, temperature=0.7))
    assert cache.get(hotter, "openai", "stand-in") is None
    reseeded = ChatRequest(messages=REQUEST.messages, sampling=REQUEST.sampling, seed=123)
    assert cache.get(reseeded, "openai", "stand-in") is None


def test_corrupt_cache_entry_is_a_miss(stand_in: StandIn, make_backend, tmp_path: Path) -> None:
    stand_in.default = ok("fresh")
    cache = CompletionCache(tmp_path)
    key = REQUEST.key("openai", "stand-in")
    path = tmp_path / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True)
    path.write_text("{half a file")
    assert cache.get(REQUEST, "openai", "stand-in") is None
    env = _env("text", "feedback")
    agent = LLMAgent(env, make_backend(stand_in.base_url), sampling=REQUEST.sampling, cache=cache)
    obs, info = env.reset(seed=0)
    agent.reset(0)
    agent.act(obs, info)
    assert stand_in.count == 1


# -- agent specs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("llm?temprature=0.5", r"unknown option 'temprature'.*options: \["),
        ("llm?temperature=hot", r"bad value for 'temperature'"),
        ("llm?max_tokens=many", r"bad value for 'max_tokens'"),
        ("llm?constrain=maybe", r"bad value for 'constrain'.*0/1"),
        ("llm?tool_choice=none", r"tool_choice must be 'required' or 'auto'"),
        ("llm?max_tokens=0", r"max_tokens must be a positive integer"),
        ("llm?temperature=-1", r"temperature must be a number >= 0"),
        ("llm?top_p=0", r"top_p must be in \(0, 1\]"),
        ("openai:my-model?constrain=1&concurrency=0", r"concurrency must be >= 1"),
        ("openai:my-model?timeout=0", r"timeout must be > 0"),
        ("openai:my-model?retries=-1", r"retries must be >= 0"),
        ("llm?threads=0", r"threads must be >= 1"),
        ("llm?batch_size=0", r"batch_size must be >= 1"),
        ("openai:my-model", r"write openai:MODEL@BASE_URL"),
        ("openai:my-model@", r"write openai:MODEL@BASE_URL"),
        ("openai:@http://127.0.0.1:8000/v1", r"write openai:MODEL@BASE_URL"),
        ("openai:my-model@ftp://127.0.0.1/v1", r"write openai:MODEL@BASE_URL"),
        ("hf:", r"names no model folder; write hf:PATH"),
        ("hf:/no/such/folder", r"no model folder at '/no/such/folder'"),
        ("llm?constrain=1", r"constrain=1 needs a server with structured outputs"),
        ("llama", r"not an LLM agent spec.*forms: llm, hf:PATH, openai:MODEL@BASE_URL"),
    ],
)
def test_bad_specs_are_named(spec: str, message: str) -> None:
    if spec.startswith("openai:my-model?") and "@" not in spec:
        spec = spec.replace("openai:my-model", "openai:my-model@http://127.0.0.1:1/v1")
    with pytest.raises(LLMSpecError, match=message):
        parse_llm_spec(spec)


def test_constrain_with_a_local_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LLMSpecError, match="in-process backend does not enforce grammars"):
        parse_llm_spec(f"hf:{tmp_path}?constrain=1")


def test_with_defaults_names_an_unknown_option() -> None:
    with pytest.raises(LLMSpecError, match="unknown LLM option 'temprature'"):
        parse_llm_spec("llm").with_defaults({"temprature": 0.1})


def test_good_spec_builds_an_agent_that_reaches_the_server(stand_in: StandIn, tmp_path: Path) -> None:
    spec = parse_llm_spec(
        f"openai:stand-in@{stand_in.base_url}?temperature=0.5&max_tokens=9&seed=4&retries=0&timeout=2"
        f"&cache={tmp_path}"
    )
    assert (spec.kind, spec.model, spec.base_url) == ("openai", "stand-in", stand_in.base_url)
    env = _env("text", "feedback")
    agent = agent_factory(spec)(env)
    obs, info = env.reset(seed=0)
    agent.reset(0)
    agent.act(obs, info)
    sent = stand_in.received[0]
    assert (sent["temperature"], sent["max_tokens"], sent["model"]) == (0.5, 9, "stand-in")
    assert sent["seed"] == Sampling(seed=4).request_seed(0, 0)
    assert agent.name == spec.name and agent.cache.root == tmp_path
    assert stand_in.base_url not in agent.name and "retries" not in agent.name  # how, not what


def test_408_is_a_retried_timeout(stand_in: StandIn, make_backend) -> None:
    stand_in.script = [status(408, {"error": {"message": "request timed out"}}), ok("second try")]
    [c] = make_backend(stand_in.base_url, retries=2).complete([REQUEST])
    assert (c.text, c.error_kind, c.attempts, stand_in.count) == ("second try", None, 2, 2)
    stand_in.script = [status(408, {"error": {"message": "request timed out"}})] * 3
    [c] = make_backend(stand_in.base_url, retries=1).complete([REQUEST])
    assert c.error_kind == "timeout" and c.attempts == 2 and "408" in (c.error or "")


class _ShortBackend:
    """A broken backend that drops a completion: replies must not slide to other episodes."""

    kind, model_id, supports_grammar = "broken", "m", False

    def complete(self, requests: list) -> list:
        from harness_gym.llm.types import Completion

        return [Completion(text='{"name": "click", "arguments": {"ref": 2}}')] * (len(requests) - 1)


def test_a_backend_that_loses_a_completion_fails_every_reply_of_the_batch() -> None:
    backend = _ShortBackend()
    envs = [_env("text", "feedback") for _ in range(3)]
    agents = [LLMAgent(env, backend) for env in envs]
    observations, infos = zip(*(env.reset(seed=i) for i, env in enumerate(envs)))
    texts = LLMAgent.act_batch(agents, list(observations), list(infos))
    assert texts == ["", "", ""]
    for agent in agents:
        assert agent.episode_record()["llm_errors"] == {"malformed_response": 1}
