"""A multi-turn chat episode as one token sequence, with the environment's tokens masked.

GRPO trains on (prompt, completion) pairs. An episode of several turns becomes one pair: the
prompt is the first turn's templated chat; the completion is every later token in order, the
model's replies (``env_mask`` 1: in the loss) interleaved with the tokens the chat template
adds around each new observation (``env_mask`` 0: the environment wrote them).

The model generates each turn from exactly the ids this sequence holds, so what it was
trained on is what it saw. The observation tokens of a turn are found by rendering the chat
with and without the new observation and taking the difference; that needs a chat template
that only appends (never drops or rewrites earlier turns) and that closes an assistant turn
with the end-of-sequence token. :func:`check_chat_template` tests both once, before any
training, so a template that breaks them fails at construction with a clear message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


class ChatTemplateError(ValueError):
    """The tokenizer's chat template cannot be used for multi-turn training (message says why)."""


_PROBE = [
    {"role": "system", "content": "You act in a task."},
    {"role": "user", "content": "observation one"},
]
_PROBE_REPLY = "reply one"
_PROBE_NEXT = "observation two"


def render(
    tokenizer: Any, messages: Sequence[dict], tools: list | None = None, generation: bool = True
) -> str:
    """The chat template's text for ``messages`` (with the assistant's opening when ``generation``)."""
    return tokenizer.apply_chat_template(
        list(messages), tools=tools or None, add_generation_prompt=generation, tokenize=False
    )


def check_chat_template(tokenizer: Any) -> None:
    """Raise :class:`ChatTemplateError` unless multi-turn episodes can be tokenized with this template."""
    if not getattr(tokenizer, "chat_template", None):
        raise ChatTemplateError(
            "the model's tokenizer has no chat template; harness episodes are chats. Use an "
            "instruct model, or set tokenizer.chat_template (e.g. a ChatML template) before training"
        )
    eos = tokenizer.eos_token
    if not eos:
        raise ChatTemplateError("the tokenizer has no end-of-sequence token to end a reply with")
    prompt = render(tokenizer, _PROBE)
    replied = render(tokenizer, [*_PROBE, {"role": "assistant", "content": _PROBE_REPLY}], generation=False)
    following = render(
        tokenizer,
        [*_PROBE, {"role": "assistant", "content": _PROBE_REPLY}, {"role": "user", "content": _PROBE_NEXT}],
    )
    if not replied.startswith(prompt) or _PROBE_REPLY not in replied[len(prompt) :]:
        raise ChatTemplateError(
            "the chat template renders an assistant reply differently from its own generation "
            "prompt (the prompt for a turn is not a prefix of the turn), so a reply cannot be "
            "appended to the tokens the model generated from"
        )
    if eos not in replied[len(prompt) :]:
        raise ChatTemplateError(
            f"the chat template does not end an assistant turn with the end-of-sequence token {eos!r}"
        )
    if not following.startswith(replied):
        raise ChatTemplateError(
            "the chat template drops or rewrites earlier turns when a turn is added (the chat "
            "with one more observation does not start with the chat before it), so one episode "
            "is not one token sequence; multi-turn training needs a template that only appends"
        )
    if _PROBE[0]["content"] not in following or _PROBE[1]["content"] not in following:
        raise ChatTemplateError("the chat template drops earlier turns")


@dataclass
class EpisodeTokens:
    """The token sequence of one episode: the prompt, then replies and observations.

    ``completion_ids``, ``env_mask`` and ``logprobs`` have one entry per completion token;
    ``env_mask`` is 1 for tokens the model generated and 0 for tokens the environment (the
    chat template around an observation) added; ``logprobs`` is 0.0 on the latter.
    """

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        """Everything the model has seen: the input of the next turn."""
        return self.prompt_ids + self.completion_ids

    def add_reply(self, ids: Sequence[int], logprobs: Sequence[float]) -> None:
        self.completion_ids.extend(int(t) for t in ids)
        self.env_mask.extend([1] * len(ids))
        self.logprobs.extend(float(x) for x in logprobs)

    def add_environment(self, ids: Sequence[int]) -> None:
        self.completion_ids.extend(int(t) for t in ids)
        self.env_mask.extend([0] * len(ids))
        self.logprobs.extend([0.0] * len(ids))


class ChatTokenizer:
    """Tokens for the first prompt of a chat and for each observation that follows a reply.

    Args:
        tokenizer: a Hugging Face tokenizer whose chat template passes :func:`check_chat_template`.
    """

    def __init__(self, tokenizer: Any) -> None:
        check_chat_template(tokenizer)
        self.tokenizer = tokenizer
        self.eos_id = int(tokenizer.eos_token_id)
        self.eos = tokenizer.eos_token

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: Sequence[dict], tools: list | None = None) -> list[int]:
        """The first turn: the templated chat ending in the assistant's opening."""
        return self.encode(render(self.tokenizer, messages, tools))

    def observation_ids(
        self,
        before: Sequence[dict],
        after: Sequence[dict],
        reply_ids: Sequence[int],
        tools: list | None = None,
    ) -> list[int]:
        """The tokens between the model's reply and its next turn.

        ``before`` is the chat up to and including the model's reply; ``after`` adds the next
        observation. The tokens are: the end-of-sequence token when the reply did not produce
        one (a reply cut at its token limit), what the template writes after a closed reply,
        and the template's rendering of the new messages up to the assistant's next opening.
        """
        closed = render(self.tokenizer, before, tools, generation=False)
        following = render(self.tokenizer, after, tools)
        if not following.startswith(closed):
            raise ChatTemplateError(
                "the chat template rewrote earlier turns of this episode when an observation was added"
            )
        end = closed.rfind(self.eos)
        if end < 0:
            raise ChatTemplateError(f"the chat template did not close the reply with {self.eos!r}")
        ids = [] if reply_ids and int(reply_ids[-1]) == self.eos_id else [self.eos_id]
        return ids + self.encode(closed[end + len(self.eos) :] + following[len(closed) :])
