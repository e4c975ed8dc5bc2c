"""What goes to a language-model backend and what comes back.

A :class:`ChatRequest` is one conversation to complete (OpenAI chat messages, optional
function tools, an optional grammar, sampling parameters and a seed); a :class:`Completion`
is the model's reply with its token counts and latency, or a transport error named by
:attr:`Completion.error_kind`. Backends never raise for a failed request: they return a
completion whose ``error_kind`` says what went wrong, so one bad request never stops a
rollout.

A reasoning model's thinking is :attr:`Completion.reasoning` (the server's
``reasoning_content`` / ``reasoning`` field, or a leading ``<think>`` block of the text), never
part of the reply the harness parses. A reply cut at ``max_tokens`` inside a thinking block or
a tool-call block (:data:`OPEN_CLOSE`), or a native request that got no call before the limit,
is *truncated* (:func:`is_truncated`): the token limit's doing, not an invalid action.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from harness_gym.core.grammar import ActionGrammar

#: Error kinds of a request that failed in transport or protocol (the model gave no reply).
TRANSPORT_ERRORS = (
    "connection",  # server down or unreachable
    "timeout",  # no answer within the per-request timeout (after retries)
    "http_429",  # rate limited (after retries)
    "http_5xx",  # server error (after retries)
    "http_4xx",  # another client error the server named
    "malformed_response",  # a body that is not a chat completion
    "empty_choices",  # a completion with no choices
)
#: Error kinds where the model (or the harness's prompt) is at fault, not the transport.
MODEL_ERRORS = ("context_length",)  # the prompt does not fit the model's context window


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters. ``seed`` is the agent's base seed: each request gets a seed
    derived from it, the episode seed and the step, so a rollout replays exactly."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 64
    seed: int | None = 0
    #: Further request fields sent as they are (``top_k``, ``stop``, ``chat_template_kwargs``,
    #: ...): sorted ``(name, JSON text)`` pairs (:func:`extra_fields` builds them).
    extra: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not (isinstance(self.temperature, (int, float)) and self.temperature >= 0):
            raise ValueError(f"temperature must be a number >= 0, got {self.temperature!r}")
        if not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {self.max_tokens!r}")

    def request_seed(self, episode_seed: int | None, step: int) -> int | None:
        """The seed of one request: a hash of (base seed, episode seed, step)."""
        if self.seed is None:
            return None
        blob = f"{self.seed}:{episode_seed}:{step}".encode()
        return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") & 0x7FFFFFFF

    def extra_body(self) -> dict[str, Any]:
        """The extra request fields as a JSON object."""
        return {k: json.loads(v) for k, v in self.extra}

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("extra")
        if self.extra:  # absent when empty: older cache keys and rows stay as they were
            out["extra"] = self.extra_body()
        return out


def extra_fields(fields: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """:attr:`Sampling.extra` from a mapping of field name -> JSON value."""
    return tuple(sorted((k, json.dumps(v, sort_keys=True, separators=(",", ":"))) for k, v in fields.items()))


@dataclass
class ChatRequest:
    """One conversation to complete."""

    messages: list[dict[str, Any]]
    sampling: Sampling = field(default_factory=Sampling)
    seed: int | None = None
    tools: list[dict[str, Any]] | None = None
    #: ``"auto"``, ``"required"`` or ``"none"`` when ``tools`` are sent.
    tool_choice: str | None = None
    grammar: ActionGrammar | None = None

    def key(self, backend: str, model: str) -> str:
        """A content hash of everything that decides the completion (the cache key)."""
        blob = json.dumps(
            {
                "backend": backend,
                "model": model,
                "messages": self.messages,
                "tools": self.tools,
                "tool_choice": self.tool_choice,
                "sampling": {k: v for k, v in self.sampling.to_dict().items() if k != "seed"},
                "seed": self.seed,
                "grammar": None if self.grammar is None else [self.grammar.kind, self.grammar.value],
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class ToolCall:
    """A native tool call as the model returned it (``arguments`` is the raw JSON text)."""

    name: str
    arguments: str


@dataclass
class Completion:
    """A model's reply to one :class:`ChatRequest`, or the error that prevented one."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: A reasoning model's thinking (None: the reply had none).
    reasoning: str | None = None
    #: Tokens of :attr:`reasoning`, where the server counts them (vLLM with a reasoning parser:
    #: ``usage.completion_tokens_details.reasoning_tokens``); included in ``completion_tokens``.
    reasoning_tokens: int | None = None
    latency: float = 0.0
    error_kind: str | None = None
    error: str | None = None
    cached: bool = False
    attempts: int = 1

    @property
    def failed(self) -> bool:
        """The request got no reply from the model (a transport or context error)."""
        return self.error_kind is not None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["tool_calls"] = [asdict(c) for c in self.tool_calls]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Completion:
        data = dict(data)
        data["tool_calls"] = [ToolCall(**c) for c in data.get("tool_calls") or []]
        return cls(**data)


#: Blocks a reply opens and must close: thinking, and the tool-call wrappers of the chat
#: templates vLLM's parsers read (hermes / Qwen, DeepSeek).
OPEN_CLOSE = (
    ("<think>", "</think>"),
    ("<tool_call>", "</tool_call>"),
    ("<|tool▁calls▁begin|>", "<|tool▁calls▁end|>"),
)
#: Tool-call openers with no closing tag (Mistral, Llama 3.x): cut at the limit, they are open.
OPEN_ONLY = ("[TOOL_CALLS]", "<|python_tag|>")


def split_thinking(text: str) -> tuple[str | None, str]:
    """``(reasoning, reply)`` of a text that opens with a ``<think>`` block (a server without a
    reasoning parser leaves it in the content); an unclosed block is all reasoning."""
    head = text.lstrip()
    if not head.startswith("<think>"):
        return None, text
    inner, closed, rest = head[len("<think>") :].partition("</think>")
    return inner.strip(), rest.lstrip() if closed else ""


def is_truncated(completion: Completion, expects_call: bool = False) -> bool:
    """Whether a reply was cut at ``max_tokens`` before it closed what it opened: a thinking
    block (reasoning and no reply), a tool-call block, or, for a request whose whole reply is
    one call (``expects_call``: a required native call, or a reply held to the step's action
    grammar, which a cut reply never completes), before a call came back."""
    if completion.failed or completion.finish_reason != "length":
        return False
    text = completion.text
    if completion.reasoning is not None and not text.strip() and not completion.tool_calls:
        return True
    for opener, closer in OPEN_CLOSE:
        if text.count(opener) > text.count(closer):
            return True
    if any(opener in text for opener in OPEN_ONLY):
        return True
    return expects_call and not completion.tool_calls


class Backend(Protocol):
    """Completes a batch of conversations. Never raises for a failed request."""

    #: ``"openai"`` or ``"transformers"``: what rows record as the backend.
    kind: str
    #: The model's name as rows record it (the served name, or the folder's name).
    model_id: str
    #: What the model is (:mod:`harness_gym.llm.identity`): the cache key and a row column.
    identity: str
    #: Whether the backend enforces :attr:`ChatRequest.grammar`.
    supports_grammar: bool

    def complete(self, requests: list[ChatRequest]) -> list[Completion]: ...
