"""The language-model agent: a harness's prompt, observations and tools in, the env's text out.

:class:`LLMAgent` builds chat messages from the env's harness (its ``context`` and
``tool_channel`` factors, see :mod:`harness_gym.llm.chat`), sends them to a backend, and
returns the text the env parses. On the native channel the model's tool call is written
back in the harness's own syntax (:meth:`BoundHarness.write_call`), so both channels share
one path for errors. With ``constrain=True`` the request carries the step's action grammar
(:meth:`HarnessEnv.action_grammar`), which a server with structured outputs enforces.

The agent never raises into the rollout. A request that fails in transport (server down,
timeout, 429 / 5xx after retries, a malformed body) or does not fit the context window
yields an empty reply, which the harness handles by its invalid-action policy; the episode
record (:meth:`LLMAgent.episode_record`) counts each error kind, and a sweep row whose
episode lost replies to the transport carries an ``error``. A reply cut at ``max_tokens``
inside a thinking or tool-call block (:func:`~harness_gym.llm.types.is_truncated`) is sent
as an empty reply too and counted as ``truncated``, so the report tells a token limit that
is too small from a model that writes bad actions.

Many agents (one per episode in flight) share one backend. On a server backend each agent
sends its request when its episode needs one (:meth:`LLMAgent.submit`, a future; the
runner's streams, :func:`~harness_gym.rollout.run_batched`); on the in-process backend
:meth:`LLMAgent.act_batch` sends the requests of every waiting episode as one batched
``generate``. Either way a request is the same (its seed comes from the episode seed and the
step) and so is its cache key.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import gymnasium as gym

from harness_gym.core.env import unwrap_harness_env
from harness_gym.core.grammar import describe
from harness_gym.llm.cache import CompletionCache
from harness_gym.llm.chat import Turn, call_from_json, chat_messages
from harness_gym.llm.types import TRANSPORT_ERRORS, Backend, ChatRequest, Completion, Sampling, is_truncated


class LLMAgent:
    """A language model acting through the env's harness.

    Args:
        env: the env (any wrappers over a :class:`~harness_gym.core.env.HarnessEnv`).
        backend: where completions come from (:class:`OpenAIBackend`, :class:`TransformersBackend`).
        sampling: temperature, top-p, max tokens and the base seed.
        constrain: send the step's action grammar (needs ``backend.supports_grammar``).
        cache: a :class:`CompletionCache`, or None for no cache.
        tool_choice: on the native channel, ``"required"`` (one call per turn, the default:
            every turn of a harness is one action) or ``"auto"``.
        name: what rows record as the agent.
    """

    def __init__(
        self,
        env: gym.Env,
        backend: Backend,
        sampling: Sampling | None = None,
        constrain: bool = False,
        cache: CompletionCache | None = None,
        tool_choice: str = "required",
        name: str = "llm",
    ) -> None:
        if constrain and not backend.supports_grammar:
            raise ValueError(
                f"constrain=True needs a backend that enforces grammars (a vLLM server); "
                f"the {backend.kind} backend does not"
            )
        if tool_choice not in ("required", "auto"):
            raise ValueError(f"tool_choice must be 'required' or 'auto', got {tool_choice!r}")
        self.env = unwrap_harness_env(env, "LLMAgent")
        self.backend = backend
        self.sampling = sampling or Sampling()
        self.constrain = constrain
        self.cache = cache
        self.tool_choice = tool_choice
        self.name = name
        self.reset(None)

    # -- the agent protocol ------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> None:
        self.episode_seed = seed
        self.turns: list[Turn] = []
        self.completions: list[Completion] = []
        self.truncated = 0
        self._last: tuple[ChatRequest, Completion, bool] | None = None
        self._pending: tuple[str, ChatRequest] | None = None
        self._grammars: list[str] = []

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return LLMAgent.act_batch([self], [observation], [info])[0]

    @property
    def streams(self) -> bool:
        """Whether this agent's requests go out one by one as episodes need them
        (:meth:`submit`): a backend with ``submit`` (a server); else :meth:`act_batch`."""
        return callable(getattr(self.backend, "submit", None))

    def submit(self, observation: str, info: dict[str, Any]) -> Future[Completion]:
        """Send this step's request; the future's completion goes to :meth:`receive`."""
        request = self.request(observation, info)
        cached = self._cached(request)
        if cached is not None:
            done: Future[Completion] = Future()
            done.set_result(cached)
            return done
        return self.backend.submit(request)

    @staticmethod
    def act_batch(
        agents: Sequence[LLMAgent], observations: Sequence[str], infos: Sequence[dict]
    ) -> list[str]:
        """One reply per agent; the requests of agents sharing a backend go out together."""
        requests = [a.request(o, i) for a, o, i in zip(agents, observations, infos)]
        completions: list[Completion | None] = [None] * len(agents)
        by_backend: dict[int, list[int]] = {}
        for k, agent in enumerate(agents):
            cached = agent._cached(requests[k])
            if cached is not None:
                completions[k] = cached
            else:
                by_backend.setdefault(id(agent.backend), []).append(k)
        for indices in by_backend.values():
            backend = agents[indices[0]].backend
            answers = list(backend.complete([requests[k] for k in indices]))
            if len(answers) != len(indices):  # a broken backend: never misalign replies
                lost = Completion(
                    error_kind="malformed_response",
                    error=f"the {backend.kind} backend returned {len(answers)} completions for "
                    f"{len(indices)} requests",
                )
                answers = [lost] * len(indices)
            for k, completion in zip(indices, answers):
                completions[k] = completion
        return [a.receive(c) for a, c in zip(agents, completions) if c is not None]

    # -- one step, in two halves (so a runner can batch the middle) -------------------------

    def request(self, observation: str, info: dict[str, Any]) -> ChatRequest:
        """The request for this step."""
        harness = self.env.harness
        native = harness.tool_channel == "native"
        messages = chat_messages(harness, self.env.system_prompt, observation, self.turns, self.env.examples)
        grammar = self.env.action_grammar() if self.constrain else None
        tools = self.env.bound.openai_tools if native else None
        # A constrained native reply is the call object itself (tool calls are not schema-
        # constrained by servers): tools stay in the prompt, and the content is the call.
        tool_choice = ("none" if grammar is not None else self.tool_choice) if native else None
        request = ChatRequest(
            messages=messages,
            sampling=self.sampling,
            seed=self.sampling.request_seed(self.episode_seed, len(self.turns)),
            tools=tools,
            tool_choice=tool_choice,
            grammar=grammar,
        )
        self._pending = (observation, request)
        if grammar is not None:
            self._grammars.append(describe(grammar))
        return request

    def receive(self, completion: Completion) -> str:
        """The text for ``env.step`` from the model's completion of the pending request."""
        if self._pending is None:
            raise RuntimeError("receive() needs a request() first")
        observation, request = self._pending
        self._pending = None
        key = self._cache_id() if self.cache is not None and not completion.cached else None
        if self.cache is not None and key is not None:
            self.cache.put(request, *key, completion)
        self.completions.append(completion)
        call = completion.tool_calls[0] if completion.tool_calls else None
        if call is None and request.tools and request.grammar is not None and not completion.failed:
            call = call_from_json(completion.text)
        # A required native call, or a reply held to the step's grammar, is incomplete when cut.
        whole = (bool(request.tools) and request.tool_choice == "required") or request.grammar is not None
        cut = is_truncated(completion, expects_call=whole)
        self.truncated += cut
        if completion.failed or cut:
            text, call = "", None
        elif call is not None:
            # Several calls in one reply are written back together, so that the parser answers
            # multiple_actions (the first is never run silently).
            calls = completion.tool_calls or [call]
            text = "\n".join(self.env.bound.write_call(c.name, c.arguments) for c in calls)
        else:
            text = completion.text
        self.turns.append(Turn(observation, text, call, completion.reasoning))
        self._last = (request, completion, cut)
        return text

    def step_record(self) -> dict[str, Any] | None:
        """What a recorded trajectory keeps of the last step: the chat messages sent, the raw
        reply (text or tool calls), whether it was cut at the token limit, tokens and latency."""
        last = getattr(self, "_last", None)
        if last is None:
            return None
        request, completion, cut = last
        self._last = None
        reply = completion.text
        if completion.tool_calls:
            reply = json.dumps([c.__dict__ for c in completion.tool_calls], ensure_ascii=False, default=str)
        return {
            "messages": request.messages,
            "reply": reply,
            "reasoning": completion.reasoning,
            "cut": bool(cut),
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "latency": completion.latency,
            "cached": completion.cached,
            "llm_error": completion.error_kind,
        }

    # -- records -----------------------------------------------------------------------------

    def _cache_id(self) -> tuple[str, str] | None:
        """The model as the cache keys it: its identity, never only its name; None while the
        identity is unverified (a server that did not answer ``GET /models`` yet), when
        nothing is read from or written to the cache."""
        identity = _identity(self.backend)
        return None if identity.startswith("unverified:") else (self.backend.kind, identity)

    def _cached(self, request: ChatRequest) -> Completion | None:
        key = self._cache_id() if self.cache is not None else None
        return self.cache.get(request, *key) if self.cache is not None and key is not None else None

    def episode_record(self) -> dict[str, Any]:
        """What a result row records about this episode's model use."""
        done = self.completions
        errors = Counter(c.error_kind for c in done if c.error_kind)
        errors.update("max_tokens" for c in done if c.finish_reason == "length")
        if self.truncated:
            errors["truncated"] = self.truncated
        transport = sum(1 for c in done if c.error_kind in TRANSPORT_ERRORS)
        return {
            "model": self.backend.model_id,
            "model_identity": _identity(self.backend),
            "backend": self.backend.kind,
            "sampling": self.sampling.to_dict(),
            "constrained": ",".join(sorted(set(self._grammars))) or "none",
            "llm_requests": len(done),
            "cache_hits": sum(c.cached for c in done),
            "prompt_tokens": sum(c.prompt_tokens or 0 for c in done),
            "completion_tokens": sum(c.completion_tokens or 0 for c in done),
            "reasoning_tokens": sum(c.reasoning_tokens or 0 for c in done),
            "truncated_replies": self.truncated,
            "server_version": getattr(self.backend, "server_version", None),
            "llm_latency": sum(c.latency for c in done if not c.cached),
            "llm_errors": dict(errors),
            "completions": [c.tool_calls[0].__dict__ if c.tool_calls else c.text for c in done],
            "transport_failures": transport,
            "first_error": next((c.error for c in done if c.error), None),
        }


def _identity(backend: Backend) -> str:
    """``backend.identity``; a backend without one is keyed by its name (plugins, tests)."""
    identity = getattr(backend, "identity", None)
    return str(identity) if identity else f"name:{backend.model_id}"
