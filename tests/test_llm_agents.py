"""Language-model agents against real models: the embedded model in process, and a vLLM server.

* In process (transformers, the embedded SmolLM2-135M-Instruct, one torch thread): batched greedy
  generation equals one-at-a-time; seeded sampling reproduces across processes; a prompt longer
  than ``max_model_len`` is refused as ``context_length`` without generating.
* The vLLM server (fixture ``vllm_server``): an :class:`LLMAgent` plays ClickButton / EnterText
  with two worked examples on every tool style x channel x constrain, all episodes in flight at
  once; every request reaches the server; constrained replies always parse; unconstrained replies
  are recorded raw. A rerun with the completion cache sends nothing. Greedy output of the server
  equals the in-process backend's.

The fault cases (server down, 429, malformed bodies, ...) are in ``tests/test_llm_faults.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from llm_fixtures import VLLMServer, _tail

import harness_gym  # noqa: F401  (registers the envs)
from harness_gym import Harness
from harness_gym.llm.agent import LLMAgent
from harness_gym.llm.cache import CompletionCache
from harness_gym.llm.chat import chat_messages
from harness_gym.llm.openai_backend import OpenAIBackend
from harness_gym.llm.types import ChatRequest, Sampling
from harness_gym.rollout import Episode, RolloutStats, run_batched

# xdist_group: under `pytest -n N --dist loadgroup` all model tests share one worker (one server).
pytestmark = [pytest.mark.llm, pytest.mark.xdist_group("llm"), pytest.mark.usefixtures("one_torch_thread")]

ROOT = Path(__file__).resolve().parents[1]
STYLES = ("json", "xml", "python", "command")
CHANNELS = ("text", "native")


def _env(task: str, **levels: Any) -> gym.Env:
    return gym.make(f"harness_gym/{task}-v0", harness=Harness(**levels))


def _first_requests(n: int, max_tokens: int, temperature: float = 0.0) -> list[ChatRequest]:
    """``n`` first-step requests from real envs (prompts of different lengths)."""
    out = []
    combos = [
        ("ClickButton", "json"),
        ("EnterText", "python"),
        ("ClickButton", "command"),
        ("EnterText", "xml"),
    ]
    for i in range(n):
        task, style = combos[i % len(combos)]
        env = _env(task, tool_style=style, few_shot=i % 2).unwrapped
        obs, _ = env.reset(seed=100 + i)
        messages = chat_messages(env.harness, env.system_prompt, obs, examples=env.examples)
        sampling = Sampling(temperature=temperature, max_tokens=max_tokens, seed=0)
        out.append(ChatRequest(messages=messages, sampling=sampling, seed=1000 + i))
    return out


def _one_harness_requests(seeds: range, max_tokens: int) -> list[ChatRequest]:
    """First-step requests of one harness with worked examples: a long shared prefix."""
    out = []
    for seed in seeds:
        env = _env("ClickButton", few_shot=2).unwrapped
        obs, _ = env.reset(seed=seed)
        messages = chat_messages(env.harness, env.system_prompt, obs, examples=env.examples)
        out.append(ChatRequest(messages=messages, sampling=Sampling(max_tokens=max_tokens), seed=seed))
    return out


# -- in process --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_backend() -> Any:
    from harness_gym.llm.spec import build_backend, parse_llm_spec

    return build_backend(parse_llm_spec("llm?threads=1"))


def test_batched_greedy_equals_unbatched(local_backend: Any) -> None:
    requests = _first_requests(4, max_tokens=12)
    lengths = {len(local_backend.tokenizer(local_backend.prompt_text(r))["input_ids"]) for r in requests}
    assert len(lengths) > 1  # prompts of different lengths: the batch is padded
    batched = local_backend.complete(requests)
    alone = [local_backend.complete([r])[0] for r in requests]
    assert [c.text for c in batched] == [c.text for c in alone]
    assert [c.completion_tokens for c in batched] == [c.completion_tokens for c in alone]
    assert [c.prompt_tokens for c in batched] == [c.prompt_tokens for c in alone]
    assert all(c.error_kind is None and c.text for c in batched)


def test_shared_prefix_runs_once_and_changes_no_text(local_backend: Any) -> None:
    """A batch of one harness's prompts shares its system prompt and worked examples: that
    prefix is run once, and every row's greedy text equals the row run alone and the batch
    run in full."""
    requests = _one_harness_requests(range(5), max_tokens=16)
    batched = local_backend.complete(requests)
    shared = local_backend.last_shared_tokens
    prompt_tokens = [c.prompt_tokens for c in batched]
    assert 0.5 * min(prompt_tokens) < shared < min(prompt_tokens)
    local_backend.share_prefix = False
    try:
        full = local_backend.complete(requests)
        assert local_backend.last_shared_tokens == 0
    finally:
        local_backend.share_prefix = True
    alone = [local_backend.complete([r])[0] for r in requests]
    assert [c.text for c in batched] == [c.text for c in full] == [c.text for c in alone]
    assert [c.finish_reason for c in batched] == [c.finish_reason for c in alone]
    assert len({local_backend.prompt_text(r) for r in requests}) == len(requests)  # rows differ after it


SAMPLE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    torch.set_num_threads(1)
    sys.path.insert(0, {tests!r})
    from test_llm_agents import _first_requests
    from harness_gym.llm.spec import build_backend, parse_llm_spec
    backend = build_backend(parse_llm_spec("llm?threads=1"))
    requests = _first_requests(2, max_tokens=10, temperature=0.8)
    first = [c.text for c in backend.complete(requests)]
    for r in requests:
        r.seed += 7  # other request seeds: other samples
    other = [c.text for c in backend.complete(requests)]
    print(json.dumps({{"first": first, "other": other}}))
    """
)


def test_seeded_sampling_reproduces_across_processes() -> None:
    script = SAMPLE_SCRIPT.format(tests=str(ROOT / "tests"))
    runs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=ROOT
        )
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert runs[0] == runs[1]
    assert runs[0]["first"] != runs[0]["other"]  # the seeds matter (it is sampling, not greedy)


def test_sampling_leaves_the_callers_random_state_alone(local_backend: Any) -> None:
    import torch

    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    [first] = local_backend.complete(_first_requests(1, max_tokens=4, temperature=0.8))
    assert torch.equal(torch.random.get_rng_state(), before)
    [again] = local_backend.complete(_first_requests(1, max_tokens=4, temperature=0.8))
    assert first.text == again.text  # the batch's own seed decides the sample


def test_prompt_over_context_is_refused_without_generating(
    local_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    generate = local_backend.model.generate

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(int(kwargs["input_ids"].shape[0]))
        return generate(*args, **kwargs)

    monkeypatch.setattr(local_backend.model, "generate", counting)
    long = ChatRequest(
        messages=[{"role": "user", "content": "word " * 3000}], sampling=Sampling(max_tokens=4)
    )
    short = ChatRequest(messages=[{"role": "user", "content": "Say hi."}], sampling=Sampling(max_tokens=4))
    [refused] = local_backend.complete([long])
    assert calls == []
    assert refused.error_kind == "context_length" and refused.prompt_tokens > local_backend.max_model_len
    assert str(local_backend.max_model_len) in refused.error
    out = local_backend.complete([long, short])
    assert calls == [1]  # only the prompt that fits was generated
    assert out[0].error_kind == "context_length" and out[1].error_kind is None and out[1].text


def test_agent_with_in_process_backend_records_its_episode(local_backend: Any) -> None:
    env = _env("ClickButton", few_shot=2, tool_style="python")
    agent = LLMAgent(env, local_backend, sampling=Sampling(max_tokens=16))
    out = run_batched([Episode(lambda: env, lambda e: agent, seed=3)], in_flight=1)
    [(_, result, error)] = out
    assert error is None and result is not None
    record = result.extra
    assert record["backend"] == "transformers" and record["llm_requests"] == result.steps
    assert record["prompt_tokens"] > 0 and record["completion_tokens"] > 0
    assert len(record["completions"]) == result.steps and record["transport_failures"] == 0


# -- the vLLM server ---------------------------------------------------------------------------

COMBOS = [
    (style, channel, constrain) for style in STYLES for channel in CHANNELS for constrain in (False, True)
]


def _combo_id(combo: tuple[str, str, bool]) -> str:
    style, channel, constrain = combo
    return f"{style}-{channel}-{'constrained' if constrain else 'free'}"


@pytest.fixture(scope="module")
def server_backend(vllm_server: VLLMServer) -> Iterator[OpenAIBackend]:
    # Generous timeout and one retry: these tests check what the agent does with replies, not the
    # transport (tests/test_llm_faults.py does), and a CPU server on a loaded machine can hold
    # a first wave of 16 prompts for minutes. A retried attempt is counted, never hidden.
    backend = OpenAIBackend(vllm_server.model, vllm_server.base_url, timeout=900, retries=1, concurrency=16)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def played(vllm_server: VLLMServer, server_backend: OpenAIBackend) -> dict[str, Any]:
    """One episode per style x channel x constrain, all in flight together against the server."""
    episodes = []
    for i, combo in enumerate(COMBOS):
        style, channel, constrain = combo
        task = "ClickButton" if i % 2 == 0 else "EnterText"
        harness = Harness(tool_style=style, tool_channel=channel, few_shot=2)

        def make_env(task: str = task, harness: Harness = harness) -> gym.Env:
            return gym.make(f"harness_gym/{task}-v0", harness=harness)

        def make_agent(env: gym.Env, constrain: bool = constrain) -> LLMAgent:
            return LLMAgent(env, server_backend, sampling=Sampling(max_tokens=64), constrain=constrain)

        episodes.append(Episode(make_env, make_agent, seed=20 + i, key=combo))
    before = vllm_server.requests_served()
    [attempts_before] = server_backend.endpoints.counts().values()
    stats = RolloutStats()
    out = run_batched(episodes, in_flight=len(episodes), stats=stats)
    [attempts] = server_backend.endpoints.counts().values()
    return {
        "results": {episode.key: (result, error) for episode, result, error in out},
        "served": vllm_server.requests_served() - before,
        # attempts the server answered, and attempts that failed in transport (retried)
        "answered": attempts["answered"] - attempts_before["answered"],
        "failed": attempts["failed"] - attempts_before["failed"],
        "stats": stats,
        "log": vllm_server.log_path,
    }


def test_every_request_reaches_the_server(played: dict[str, Any]) -> None:
    results = played["results"]
    assert len(results) == len(COMBOS)
    assert all(error is None for _, error in results.values()), [e for _, e in results.values() if e]
    requests = sum(result.extra["llm_requests"] for result, _ in results.values())
    assert requests == sum(result.steps for result, _ in results.values()) == played["answered"]
    # Every answered attempt reached the engine; an attempt that timed out may have too.
    assert played["answered"] <= played["served"] <= played["answered"] + played["failed"]
    assert played["stats"].peak_in_flight > 1  # episodes were in flight together


@pytest.mark.parametrize("combo", COMBOS, ids=_combo_id)
def test_agent_plays_through_the_server(played: dict[str, Any], combo: tuple[str, str, bool]) -> None:
    style, channel, constrain = combo
    result, error = played["results"][combo]
    assert error is None and result is not None
    record = result.extra
    assert record["backend"] == "openai"
    assert record["transport_failures"] == 0, (
        f"{record['llm_errors']} {record['first_error']}\nvLLM log:\n{_tail(played['log'])}"
    )
    assert set(record["llm_errors"]) <= {"max_tokens", "truncated"}, record["llm_errors"]
    assert record["llm_requests"] == result.steps and record["cache_hits"] == 0
    assert record["prompt_tokens"] > 0 and record["completion_tokens"] > 0
    assert result.harness["tool_style"] == style and result.harness["tool_channel"] == channel
    assert len(record["completions"]) == result.steps
    if constrain:
        # the grammar makes a format error impossible, on every style and channel
        assert result.invalid_actions == 0, record["completions"]
        assert record["constrained"] in ("json_schema:exact", "regex:exact")
        assert record["constrained"].startswith("json_schema") == (style == "json" or channel == "native")
        assert "max_tokens" not in record["llm_errors"]
    else:
        assert record["constrained"] == "none"
        # recorded raw: text as the model wrote it, or the native call as the server returned it
        for raw in record["completions"]:
            assert isinstance(raw, str) or set(raw) == {"name", "arguments"}


def test_cache_rerun_sends_nothing_to_the_server(
    vllm_server: VLLMServer, server_backend: OpenAIBackend, tmp_path: Path
) -> None:
    def run() -> dict[int, Any]:
        cache = CompletionCache(tmp_path)
        episodes = [
            Episode(
                lambda: _env("ClickButton", few_shot=2, tool_style="command"),
                lambda env: LLMAgent(env, server_backend, sampling=Sampling(max_tokens=24), cache=cache),
                seed=s,
            )
            for s in (50, 51)
        ]
        return {r.seed: r for _, r, _ in run_batched(episodes, in_flight=2)}

    before = vllm_server.requests_served()
    first = run()
    sent = vllm_server.requests_served() - before
    assert sent == sum(r.steps for r in first.values()) > 0
    again = run()
    assert vllm_server.requests_served() - before == sent  # the rerun asked the server nothing
    for seed, r in again.items():
        assert r.extra["cache_hits"] == r.steps
        assert r.extra["completions"] == first[seed].extra["completions"]
        assert r.success == first[seed].success


def test_greedy_server_equals_in_process(server_backend: OpenAIBackend, local_backend: Any) -> None:
    requests = _first_requests(2, max_tokens=24)
    served = server_backend.complete(requests)
    local = local_backend.complete(requests)
    assert all(c.error_kind is None for c in served + local)
    assert [c.text for c in served] == [c.text for c in local]
    assert [c.prompt_tokens for c in served] == [c.prompt_tokens for c in local]


@pytest.mark.parametrize("arguments", ["{ref: 2", ""], ids=["not-json", "empty"])
def test_transcript_keeps_working_after_a_bad_native_call(
    server_backend: OpenAIBackend, local_backend: Any, arguments: str
) -> None:
    """A native call whose arguments are not JSON stays in the transcript (as the model wrote it);
    the requests that follow are still served, by the server and in process alike."""
    from harness_gym.llm.types import Completion, ToolCall

    for backend in (server_backend, local_backend):
        env = _env("ClickButton", tool_channel="native", context="transcript", history_window="all")
        agent = LLMAgent(env, backend, sampling=Sampling(max_tokens=24))
        obs, info = env.reset(seed=9)
        agent.reset(9)
        agent.request(obs, info)
        text = agent.receive(Completion(tool_calls=[ToolCall("click", arguments)]))  # the model's bad call
        obs, _, _, _, info = env.step(text)
        assert info["invalid_actions"] == 1  # malformed ("{ref: 2") or missing_argument ("" reads as {})
        agent.act(obs, info)
        request = agent.completions[-1]
        assert request.error_kind is None, (backend.kind, request.error)
        assert request.completion_tokens and request.completion_tokens > 0
