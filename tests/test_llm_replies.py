# ruff: noqa: F811  (the stand-in fixtures are imported by name)
"""Models people serve: pass-through request fields, reasoning replies, truncation, call ids.

Malformed and truncated replies come from the fault stand-in of ``tests/test_llm_faults.py``
(a scripted OpenAI-compatible server on 127.0.0.1); what the real vLLM server does with the
same requests is in ``tests/test_llm_server.py`` (marker ``llm``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import gymnasium as gym
import pytest
from test_llm_faults import (  # noqa: F401  (fixtures)
    StandIn,
    _send,
    completion_body,
    make_backend,
    ok,
    stand_in,
)

import harness_gym  # noqa: F401  (registers the envs)
from harness_gym import Harness
from harness_gym.core.harness import HarnessSpecError
from harness_gym.llm.agent import LLMAgent
from harness_gym.llm.chat import Turn, call_id, chat_messages
from harness_gym.llm.spec import BODY_OWNED, LLMSpecError, agent_factory, parse_llm_spec
from harness_gym.llm.types import ChatRequest, Completion, Sampling, ToolCall, is_truncated, split_thinking

URL = "http://127.0.0.1:9/v1"


def reply(
    text: str | None = "",
    finish_reason: str = "stop",
    reasoning: str | None = None,
    field: str = "reasoning",
    reasoning_tokens: int | None = None,
    tool_calls: list[dict] | None = None,
) -> Any:
    body = completion_body(text, tool_calls, finish_reason)
    if reasoning is not None:
        body["choices"][0]["message"][field] = reasoning
    if reasoning_tokens is not None:
        body["usage"]["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    raw = json.dumps(body).encode()
    return lambda h, _req: _send(h, 200, raw, {"Content-Type": "application/json"})


def _env(channel: str = "text", **harness: Any) -> gym.Env:
    return gym.make("harness_gym/ClickButton-v0", harness=Harness(tool_channel=channel, **harness))


# -- pass-through request fields -------------------------------------------------------------


def test_body_fields_parse_as_json_or_text_and_name_the_agent() -> None:
    spec = parse_llm_spec(
        f"openai:m@{URL}?body.top_k=20&body.stop=[%22%5Cn%5Cn%22]&body.chat_template_kwargs="
        '{"enable_thinking":false}&body.tag=plain&concurrency=4'
    )
    assert spec.options["body"] == {
        "top_k": 20,
        "stop": ["\n\n"],
        "chat_template_kwargs": {"enable_thinking": False},
        "tag": "plain",
    }
    assert "body.top_k=20" in spec.name and "concurrency" not in spec.name
    other = parse_llm_spec(f"openai:m@{URL}?body.top_k=40")
    assert other.name != parse_llm_spec(f"openai:m@{URL}").name != spec.name


def test_body_fields_change_the_cache_key_and_leave_plain_keys_alone() -> None:
    messages = [{"role": "user", "content": "hi"}]
    plain = ChatRequest(messages, Sampling()).key("openai", "m")
    assert Sampling().to_dict() == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 64, "seed": 0}
    specs = [f"openai:m@{URL}?body.top_k={k}" for k in (20, 40)]
    keys = {ChatRequest(messages, _sampling(s)).key("openai", "m") for s in specs}
    assert len(keys) == 2 and plain not in keys
    assert ChatRequest(messages, _sampling(f"openai:m@{URL}")).key("openai", "m") == plain


def _sampling(text: str) -> Sampling:
    from harness_gym.llm.spec import _sampling as build

    return build(parse_llm_spec(text).options)


def test_body_fields_reach_the_server(stand_in: StandIn) -> None:
    spec = parse_llm_spec(
        f"openai:stand-in@{stand_in.base_url}?cache=off&retries=0&body.top_k=7&body.min_p=0.05"
        '&body.chat_template_kwargs={"enable_thinking":false}'
    )
    env = _env()
    obs, info = env.reset(seed=0)
    stand_in.script = [ok(env.unwrapped.oracle_action())]
    agent = agent_factory(spec)(env)
    agent.reset(0)
    env.step(agent.act(obs, info))
    sent = stand_in.received[0]
    assert (sent["top_k"], sent["min_p"]) == (7, 0.05)
    assert sent["chat_template_kwargs"] == {"enable_thinking": False}
    assert sent["max_tokens"] == 64 and "body" not in sent
    assert agent.episode_record()["sampling"]["extra"]["top_k"] == 7


def test_body_fields_sit_beside_the_action_grammar(stand_in: StandIn) -> None:
    env = _env()
    env.reset(seed=1)
    grammar = env.unwrapped.action_grammar()
    spec = parse_llm_spec(f"openai:stand-in@{stand_in.base_url}?cache=off&retries=0&constrain=1&body.top_k=3")
    agent = agent_factory(spec)(env)
    backend = agent.backend
    backend.complete([ChatRequest([{"role": "user", "content": "x"}], agent.sampling, grammar=grammar)])
    sent = stand_in.received[0]
    assert sent["top_k"] == 3 and "json" in sent["structured_outputs"]


@pytest.mark.parametrize("field", sorted(BODY_OWNED))
def test_body_fields_the_agent_owns_are_refused(field: str) -> None:
    with pytest.raises(LLMSpecError, match=f"body.{field}' cannot be passed through"):
        parse_llm_spec(f"openai:m@{URL}?body.{field}=1")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("body.=1", "names no request field"),
        ("body.top-k=1", "names no request field"),
        ("body.top_k=1&body.top_k=2", "given twice"),
    ],
)
def test_bad_body_fields_are_named(query: str, message: str) -> None:
    with pytest.raises(LLMSpecError, match=message):
        parse_llm_spec(f"openai:m@{URL}?{query}")


def test_body_fields_need_a_server() -> None:
    with pytest.raises(LLMSpecError, match="request field for a server"):
        parse_llm_spec("llm?body.top_k=20")


# -- reasoning -------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_reasoning_is_read_and_counted(stand_in: StandIn, make_backend, field: str) -> None:
    stand_in.script = [reply("click it", reasoning="The button says OK.", field=field, reasoning_tokens=5)]
    [c] = make_backend(stand_in.base_url).complete([ChatRequest([{"role": "user", "content": "x"}])])
    assert (c.text, c.reasoning, c.reasoning_tokens) == ("click it", "The button says OK.", 5)


def test_a_think_block_in_the_content_is_split_off(stand_in: StandIn, make_backend) -> None:
    stand_in.script = [reply("<think>\nwhich one?\n</think>\n\nclick(ref=2)")]
    [c] = make_backend(stand_in.base_url).complete([ChatRequest([{"role": "user", "content": "x"}])])
    assert (c.text, c.reasoning, c.reasoning_tokens) == ("click(ref=2)", "which one?", None)
    assert split_thinking("<think>still thinking") == ("still thinking", "")
    assert split_thinking("no block <think>") == (None, "no block <think>")


def test_reasoning_goes_back_only_where_the_harness_shows_it() -> None:
    turns = [Turn("obs 1", "reply 1", None, "thought 1"), Turn("obs 2", "reply 2", None, None)]
    for level, expected in (("hidden", []), ("shown", ["thought 1"])):
        harness = Harness(context="transcript", history_window="all", reasoning=level)
        messages = chat_messages(harness, "sys", "obs 3", turns)
        assert [m["reasoning_content"] for m in messages if "reasoning_content" in m] == expected
        assert "reasoning" not in Harness().to_dict(full=False)
    assert Harness(reasoning="shown").id != Harness().id
    with pytest.raises(HarnessSpecError, match="valid levels: \\['hidden', 'shown'\\]"):
        Harness(reasoning="always")


def test_the_agent_keeps_reasoning_out_of_the_action_and_counts_its_tokens(
    stand_in: StandIn,
    make_backend,
) -> None:
    env = _env(context="transcript", history_window="all", reasoning="shown")
    obs, info = env.reset(seed=3)
    action = env.unwrapped.oracle_action()
    stand_in.script = [reply(action, reasoning="I see the button.", reasoning_tokens=4)]
    agent = LLMAgent(env, make_backend(stand_in.base_url))
    agent.reset(3)
    _, _, terminated, _, info = env.step(agent.act(obs, info))
    assert info["success"] and terminated
    record = agent.episode_record()
    assert record["reasoning_tokens"] == 4 and record["truncated_replies"] == 0
    assert agent.turns[0].reasoning == "I see the button."


# -- truncation ------------------------------------------------------------------------------


CUT_CASES = [
    # (name, reply kwargs, channel, truncated?)
    ("inside thinking (server parser)", {"text": None, "reasoning": "Let me think about"}, "text", True),
    ("inside thinking (no parser)", {"text": "<think>Let me think about"}, "text", True),
    ("before </tool_call>", {"text": '<tool_call>\n{"name": "click", "arguments": {"ref'}, "text", True),
    ("mistral call", {"text": '[TOOL_CALLS][{"name": "click", "argu'}, "text", True),
    ("native, no call yet", {"text": '{"name": "click", "argu'}, "native", True),
    ("plain text cut", {"text": "I think the answer is"}, "text", False),
]


@pytest.mark.parametrize("case", CUT_CASES, ids=[c[0] for c in CUT_CASES])
@pytest.mark.parametrize("policy", ["feedback", "end"])
def test_a_reply_cut_inside_a_block_is_truncated_not_a_bad_action(
    stand_in: StandIn,
    make_backend,
    case: tuple,
    policy: str,
) -> None:
    name, kwargs, channel, cut = case
    env = _env(channel, invalid_action=policy)
    obs, info = env.reset(seed=4)
    stand_in.script = [reply(finish_reason="length", **kwargs)]
    agent = LLMAgent(env, make_backend(stand_in.base_url))
    agent.reset(4)
    text = agent.act(obs, info)
    _, _, terminated, _, info = env.step(text)
    record = agent.episode_record()
    assert record["truncated_replies"] == int(cut)
    assert record["llm_errors"] == {"max_tokens": 1, **({"truncated": 1} if cut else {})}
    assert (text == "") == cut and info["error_kind"] == ("empty" if cut else "malformed")
    assert record["transport_failures"] == 0 and record["first_error"] is None  # not an outage
    assert terminated == (policy == "end")


def test_only_a_reply_stopped_by_the_limit_is_truncated() -> None:
    open_call = Completion(text="<tool_call>{", finish_reason="stop")
    assert not is_truncated(open_call)  # the model stopped: a malformed action, its doing
    assert is_truncated(Completion(text="<tool_call>{", finish_reason="length"))
    closed = Completion(text='<tool_call>{"name": "click"}</tool_call> and', finish_reason="length")
    assert not is_truncated(closed)
    assert not is_truncated(Completion(error_kind="timeout", finish_reason="length"))
    native = Completion(tool_calls=[ToolCall("click", "{}")], finish_reason="length")
    assert not is_truncated(native, expects_call=True)


# -- tool calls ------------------------------------------------------------------------------


def test_call_ids_are_nine_letters_and_digits() -> None:
    env = gym.make(
        "harness_gym/LoginUser-v0",
        harness={"few_shot": 3, "tool_channel": "native", "context": "transcript", "history_window": "all"},
    )
    obs, info = env.reset(seed=0)
    base = env.unwrapped
    turns = [Turn(f"obs {i}", "", ToolCall("click", '{"ref": 1}')) for i in range(12)]
    messages = chat_messages(base.harness, info["system_prompt"], obs, turns, info["examples"])
    ids = [c["id"] for m in messages for c in m.get("tool_calls", [])]
    ids += [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert len(ids) == 2 * (3 + 12) and all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids)
    assert len(set(ids)) == 3 + 12
    assert call_id("call", 12345) == "call12345"


def test_parallel_tool_calls_follow_the_multiple_actions_rule(
    stand_in: StandIn,
    make_backend,
) -> None:
    for parser in ("strict", "lenient"):
        env = _env("native", parser=parser)
        obs, info = env.reset(seed=5)
        name, arguments = env.unwrapped.bound.toolbox.call(env.unwrapped.task.oracle())
        call = {"name": name, "arguments": json.dumps(arguments)}
        stand_in.script = [ok(None, [call, call], "tool_calls")]
        agent = LLMAgent(env, make_backend(stand_in.base_url))
        agent.reset(5)
        _, _, _, _, info = env.step(agent.act(obs, info))
        assert info["error_kind"] == "multiple_actions" and not info["success"], parser
        assert "parallel_tool_calls" not in stand_in.received[-1]  # vLLM would keep the first silently


def test_server_version_is_unknown_without_the_route(stand_in: StandIn, make_backend) -> None:
    backend = make_backend(stand_in.base_url)
    assert backend.server_version == "unknown"  # the stand-in has no /version route


def test_a_constrained_reply_cut_at_the_limit_is_truncated(stand_in: StandIn, make_backend) -> None:
    """A reply held to the step's grammar is incomplete when cut: truncated, on either channel."""
    for channel in ("text", "native"):
        env = _env(channel)
        obs, info = env.reset(seed=6)
        stand_in.script = [reply('{"name": "click", "argu', finish_reason="length")]
        agent = LLMAgent(env, make_backend(stand_in.base_url), constrain=True)
        agent.reset(6)
        assert agent.act(obs, info) == "" and agent.episode_record()["truncated_replies"] == 1, channel
        assert "structured_outputs" in stand_in.received[-1]
