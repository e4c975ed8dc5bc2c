"""Chat rendering: the harness's system prompt, observations and tools as chat messages.

How much of the episode a model sees is the harness's ``context`` factor:

* ``observation``: the system prompt and the current observation (which already carries
  the harness's own history window);
* ``transcript``: the chat so far as alternating user / assistant messages, cut to the
  harness's ``history_window`` earlier turns (``"all"``: every turn).

On the ``native`` tool channel an earlier turn's reply is an assistant message with a tool
call, and the observation that followed it is that call's ``tool`` result, as the OpenAI chat
format writes tool use. Call ids are nine letters and digits (:func:`call_id`), the form
Mistral's templates require and every other template accepts. A reasoning model's thinking
goes back with its turn only where the harness's ``reasoning`` factor says ``shown``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness_gym.core.harness import Harness
from harness_gym.core.tools import dump_json, load_json
from harness_gym.llm.types import ToolCall


@dataclass
class Turn:
    """One earlier turn: the observation shown and what the model replied."""

    observation: str
    text: str
    tool_call: ToolCall | None = None
    reasoning: str | None = None


def call_id(kind: str, i: int) -> str:
    """A tool-call id of 9 letters and digits (Mistral's templates refuse any other)."""
    return f"{kind[:4]}{i:0{9 - len(kind[:4])}d}"


def chat_messages(
    harness: Harness,
    system_prompt: str,
    observation: str,
    turns: Sequence[Turn] = (),
    examples: Sequence[dict[str, str]] = (),
) -> list[dict[str, Any]]:
    """The messages a model is sent for the current ``observation`` under ``harness``.

    ``examples`` (the env's ``info["examples"]``) come first, as earlier turns: the example's
    observation from the user, its reply from the assistant (a tool call on the native
    channel, answered by a tool message that says it was an example).
    """
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
    for i, example in enumerate(examples):
        messages.append({"role": "user", "content": example["observation"]})
        call = call_from_json(example["reply"]) if harness.tool_channel == "native" else None
        if call is None:
            messages.append({"role": "assistant", "content": example["reply"]})
            continue
        cid = call_id("ex", i)
        messages.append(_tool_call_message(cid, call))
        messages.append({"role": "tool", "tool_call_id": cid, "content": EXAMPLE_RESULT})
    if harness.context == "transcript" and harness.history_window != 0 and turns:
        window = harness.history_window
        kept = list(turns) if window == "all" else list(turns)[-int(window) :]
        native = harness.tool_channel == "native"
        shown = harness.reasoning == "shown"
        messages.append({"role": "user", "content": kept[0].observation})
        observations = [t.observation for t in kept[1:]] + [observation]
        for i, (turn, following) in enumerate(zip(kept, observations)):
            if native and turn.tool_call is not None:
                cid = call_id("call", i)
                messages.append(_tool_call_message(cid, turn.tool_call))
                messages.append({"role": "tool", "tool_call_id": cid, "content": following})
            else:
                messages.append({"role": "assistant", "content": turn.text})
                messages.append({"role": "user", "content": following})
            if shown and turn.reasoning:
                messages[-2]["reasoning_content"] = turn.reasoning
        return messages
    messages.append({"role": "user", "content": observation})
    return messages


def _tool_call_message(call_id: str, call: ToolCall) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
        ],
    }


#: The tool result after a worked example's call (the example's episode is not continued).
EXAMPLE_RESULT = "(worked example: that call was the right action; a new episode follows)"


def call_from_json(text: str) -> ToolCall | None:
    """A ``{"name": ..., "arguments": {...}}`` object (a constrained native reply) as a call."""
    try:
        data = load_json(text)  # a key given twice is not a call
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    arguments = data.get("arguments", {})
    return ToolCall(data["name"], arguments if isinstance(arguments, str) else dump_json(arguments))
