"""A backend for any OpenAI-compatible chat server: vLLM, llama.cpp's server, hosted APIs.

Requests go through the ``openai`` client with its own retries off: this backend retries
timeouts, connection errors, HTTP 429 and 5xx itself, with exponential backoff that honours
``Retry-After``, so it can count attempts and name what finally failed. A batch is sent
concurrently, at most ``concurrency`` requests at a time. Grammars go to vLLM's structured
outputs (``extra_body={"structured_outputs": {"json" | "regex": ...}}``), beside the agent
spec's pass-through fields (:attr:`Sampling.extra`).

Replies are read as vLLM writes them: a reasoning model's thinking from ``reasoning`` (vLLM
>= 0.11) or ``reasoning_content`` (older vLLM, llama.cpp), its token count from
``usage.completion_tokens_details.reasoning_tokens``; a server without a reasoning parser
leaves a ``<think>`` block in the content, which is split off the same way. The server's
version (``GET /version``, vLLM) is asked once and recorded in rows.

Everything the pool's threads import is imported before the pool starts
(:func:`_import_http_modules`): the ``openai`` client looks modules up in ``sys.modules`` on
every request and response, and a module that one thread is importing for the first time is
visible half-built to the others (a cold sweep lost most of its replies to ``AttributeError``).
"""

from __future__ import annotations

import importlib
import json
import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from harness_gym.llm.endpoints import EndpointPool, split_urls
from harness_gym.llm.identity import server_identity
from harness_gym.llm.types import ChatRequest, Completion, ToolCall, split_thinking

RETRYABLE = ("connection", "timeout", "http_429", "http_5xx")


class OpenAIBackend:
    """Chat completions over HTTP.

    Requests go out one by one as episodes need them (:meth:`submit`, a future) or as a
    batch, at most ``concurrency`` per endpoint at a time. Several base URLs serving the same
    model are one backend: attempts are spread over them and fail over between them
    (:mod:`harness_gym.llm.endpoints`).

    Args:
        model: the model name the server serves (``model`` of each request).
        base_url: e.g. ``http://127.0.0.1:8000/v1``; several servers of the same model as a
            list or comma-separated (load balanced, with failover).
        api_key_env: the environment variable holding the API key (``"EMPTY"`` if unset,
            which local servers accept).
        timeout: seconds per request attempt.
        retries: further attempts after a retryable failure (with several endpoints, one more
            per further endpoint: a failed attempt is retried on another endpoint at once).
        backoff: first wait in seconds (doubles each retry, with jitter, capped at 30 s);
            a ``Retry-After`` header overrides it.
        concurrency: most requests in flight at once, per endpoint.
        structured_outputs: whether the server takes vLLM's ``structured_outputs`` field.
        revision: the user's name for the weights behind ``model`` (part of :attr:`identity`).
    """

    kind = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | Sequence[str],
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
        concurrency: int = 8,
        structured_outputs: bool = True,
        revision: str | None = None,
    ) -> None:
        import openai

        self._http = _import_http_modules()
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        urls = split_urls(base_url)
        self.model_id = model
        self.base_url = ",".join(urls)
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.concurrency = int(concurrency)
        self.supports_grammar = structured_outputs
        self._openai = openai
        key = os.environ.get(api_key_env) or "EMPTY"
        self.endpoints = EndpointPool(
            urls, lambda url: openai.OpenAI(base_url=url, api_key=key, timeout=self.timeout, max_retries=0)
        )
        self._client = self.endpoints.endpoints[0].client
        self._pool = ThreadPoolExecutor(
            max_workers=self.concurrency * len(urls), thread_name_prefix="harness-gym-llm"
        )
        self._sleep = time.sleep
        self.revision = revision
        self._identity: str | None = None
        self._identity_lock = threading.Lock()
        #: The model ids the server listed on ``GET /models`` (None: it did not answer).
        self.served: list[str] | None = None
        self._version: str | None = None

    @property
    def server_version(self) -> str:
        """The version the server reports on ``GET /version`` (vLLM: ``0.32.0``), asked once;
        ``unknown`` for a server without that route (hosted APIs, llama.cpp)."""
        with self._identity_lock:
            if self._version is None:
                version, answered = _server_version(self._http, self.base_url, self.timeout)
                if not answered:  # down now: ask again next time
                    return version
                self._version = version
            return self._version

    @property
    def identity(self) -> str:
        """What the server reports about ``model`` (:func:`~harness_gym.llm.identity.server_identity`);
        the cache key and the rows' ``model_identity``. With several endpoints, each is asked;
        endpoints that report different models give all their identities joined by ``+``
        (replies may come from any of them).

        It is kept once every endpoint has answered ``GET /models`` (a listing, or a 4xx: no
        such route). While one cannot be reached (a server still starting) the answer is
        ``unverified:...`` and is asked again next time; :class:`LLMAgent` never caches under
        an unverified identity, so a model served later under the same name never gets
        another model's cached replies."""
        with self._identity_lock:
            if self._identity is not None:
                return self._identity
            answers, asked_all = [], True
            for endpoint in self.endpoints.endpoints:
                try:
                    answers.append([m.model_dump() for m in endpoint.client.models.list()])
                except self._openai.APIStatusError as err:  # up, but no listing: 4xx is final
                    asked_all = asked_all and int(getattr(err, "status_code", 0) or 0) < 500
                except Exception:  # noqa: BLE001 - down, starting, or a body the client cannot read
                    asked_all = False
            if answers:
                self.served = sorted({str(m.get("id")) for listed in answers for m in listed})
            entries = [e for listed in answers for e in listed if e.get("id") == self.model_id]
            found = {server_identity(e, self.model_id, self.revision) for e in entries}
            identity = "+".join(sorted(found)) or server_identity(None, self.model_id, self.revision)
            # Kept only when final: every endpoint answered, and the model is listed (or no
            # endpoint lists anything). Servers that serve other models fail the requests.
            if asked_all and (entries or not any(answers)):
                self._identity = identity
            return identity

    def complete(self, requests: list[ChatRequest]) -> list[Completion]:
        if len(requests) <= 1:
            return [self._complete(r) for r in requests]
        return list(self._pool.map(self._complete, requests))

    def submit(self, request: ChatRequest) -> Future[Completion]:
        """Send one request now; the future never raises (a failure is a :class:`Completion`)."""
        return self._pool.submit(self._complete, request)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self.endpoints.close()

    # -- one request ---------------------------------------------------------------------

    def _complete(self, request: ChatRequest) -> Completion:
        start = time.perf_counter()
        attempts = 0
        endpoint = None
        while True:
            attempts += 1
            endpoint = self.endpoints.acquire(avoid=endpoint)
            completion, retry_after = self._attempt(request, endpoint.url, endpoint.client)
            retryable = completion.error_kind in RETRYABLE
            self.endpoints.release(endpoint, retryable, retry_after)
            if not retryable or attempts > self.retries + len(self.endpoints) - 1:
                completion.latency = time.perf_counter() - start
                completion.attempts = attempts
                if (completion.error or "").startswith("HTTP 404"):
                    self.identity  # noqa: B018 - asks GET /models, which fills self.served
                    if self.served is not None and self.model_id not in self.served:
                        completion.error = (
                            f"the server at {self.base_url} does not serve {self.model_id!r} "
                            f"(it serves {self.served}): {completion.error}"
                        )
                return completion
            if self.endpoints.other_up(endpoint):
                continue  # fail over at once
            wait = retry_after if retry_after is not None else self.backoff * 2 ** (attempts - 1)
            self._sleep(min(30.0, wait) * (1.0 if retry_after is not None else random.uniform(0.8, 1.2)))

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        s = request.sampling
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": request.messages,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if request.tools:
            body["tools"] = request.tools
            if request.tool_choice:
                body["tool_choice"] = request.tool_choice
        extra = s.extra_body()
        if request.grammar is not None and self.supports_grammar:
            key = "json" if request.grammar.kind == "json_schema" else "regex"
            extra["structured_outputs"] = {key: request.grammar.value}
        if extra:
            body["extra_body"] = extra
        return body

    def _attempt(self, request: ChatRequest, url: str, client: Any) -> tuple[Completion, float | None]:
        openai = self._openai
        try:
            response = client.chat.completions.create(**self._body(request))
        except openai.APITimeoutError as err:
            return Completion(error_kind="timeout", error=f"no answer within {self.timeout:g} s: {err}"), None
        except openai.APIConnectionError as err:
            return Completion(error_kind="connection", error=f"cannot reach {url}: {err}"), None
        except openai.APIStatusError as err:
            return _status_error(err), _retry_after(err)
        except Exception as err:  # noqa: BLE001 - a body the client cannot read
            return Completion(error_kind="malformed_response", error=f"{type(err).__name__}: {err}"), None
        return _completion(response), None


def _status_error(err: Any) -> Completion:
    status = int(getattr(err, "status_code", 0) or 0)
    message = _error_message(err)
    if status == 408:  # the server's own request timeout: as retryable as ours
        return Completion(error_kind="timeout", error=f"HTTP 408: {message}")
    if status == 429:
        return Completion(error_kind="http_429", error=f"HTTP 429 (rate limited): {message}")
    if status >= 500:
        return Completion(error_kind="http_5xx", error=f"HTTP {status}: {message}")
    if "context length" in message.lower() or "context window" in message.lower():
        return Completion(error_kind="context_length", error=f"HTTP {status}: {message}")
    if status == 404:
        return Completion(error_kind="http_4xx", error=f"HTTP 404 (no such model or route): {message}")
    return Completion(error_kind="http_4xx", error=f"HTTP {status}: {message}")


def _error_message(err: Any) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:500]
        if body.get("message"):
            return str(body["message"])[:500]
    return str(err)[:500]


def _retry_after(err: Any) -> float | None:
    response = getattr(err, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _completion(response: Any) -> Completion:
    """Read a chat completion defensively: servers differ, and some are broken."""
    try:
        choices = getattr(response, "choices", None)
        if isinstance(response, (str, bytes)) or choices is None:
            return Completion(
                error_kind="malformed_response", error=f"not a chat completion: {str(response)[:200]!r}"
            )
        if not choices:
            return Completion(error_kind="empty_choices", error="the server returned no choices")
        choice = choices[0]
        message = choice.message
        calls = []
        for call in message.tool_calls or []:
            function = getattr(call, "function", None)
            name = getattr(function, "name", None)
            arguments = getattr(function, "arguments", None)
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments) if arguments is not None else ""
            calls.append(ToolCall(str(name) if name is not None else "", arguments))
        usage = getattr(response, "usage", None)
        text = message.content or ""
        reasoning = _field(message, "reasoning", "reasoning_content")
        if reasoning is None:
            reasoning, text = split_thinking(text)
        details = getattr(usage, "completion_tokens_details", None)
        counted = getattr(details, "reasoning_tokens", None) if reasoning is not None else None
        return Completion(
            text=text,
            tool_calls=calls,
            finish_reason=choice.finish_reason,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            reasoning=reasoning,
            reasoning_tokens=counted if isinstance(counted, int) else None,
        )
    except (AttributeError, TypeError, IndexError) as err:
        return Completion(error_kind="malformed_response", error=f"{type(err).__name__}: {err}")


def _field(message: Any, *names: str) -> str | None:
    """The first of ``names`` the message carries as text (vLLM's own fields are extras of the
    ``openai`` client's message model)."""
    extra = getattr(message, "model_extra", None) or {}
    for name in names:
        value = extra.get(name, getattr(message, name, None))
        if isinstance(value, str):
            return value
    return None


def _import_http_modules() -> Any:
    """Import every HTTP module the client's threads may look up, before any thread starts;
    return the one :func:`_server_version` uses (``httpx2`` with openai >= 3, else ``httpx``)."""
    found = None
    for name in ("httpx", "httpx2"):
        try:
            found = importlib.import_module(name)
        except ImportError:
            continue
    if found is None:
        raise ImportError("the openai backend needs httpx2 (openai >= 3) or httpx: pip install openai")
    return found


def _server_version(http: Any, base_url: str, timeout: float) -> tuple[str, bool]:
    """The ``version`` of ``GET /version`` at the server's root (vLLM's route), or ``unknown``
    where there is none; and whether the server answered at all. ``http`` is ``httpx`` or
    ``httpx2`` (imported before the pool's threads started)."""
    root = base_url.rstrip("/")
    root = root[: -len("/v1")] if root.endswith("/v1") else root
    try:
        response = http.get(root + "/version", timeout=min(timeout, 10.0))
    except http.HTTPError:
        return "unknown", False
    try:
        version = response.json().get("version") if response.status_code == 200 else None
    except (ValueError, AttributeError):  # not JSON, or not an object: not vLLM's route
        version = None
    return (version if isinstance(version, str) and version else "unknown"), True
