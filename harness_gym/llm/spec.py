"""Language-model agents named by a string, so sweeps and the CLI can build them anywhere.

==============================  ===============================================================
``llm``                         the embedded SmolLM2-135M-Instruct, in process (transformers)
``hf:PATH``                     a Hugging Face model folder, in process
``openai:MODEL@BASE_URL``       a model served by an OpenAI-compatible server (vLLM, llama.cpp,
                                a hosted API), e.g. ``openai:SmolLM2-135M-Instruct@http://127.0.0.1:8000/v1``;
                                ``openai:MODEL@URL1,URL2``: one agent over several servers
==============================  ===============================================================

Options follow a ``?``, separated by ``&``: ``llm?temperature=0.7&max_tokens=48``. They are
``temperature``, ``top_p``, ``max_tokens``, ``seed`` (sampling); ``constrain`` (0/1: send the
step's action grammar as structured output, servers only); ``concurrency``, ``timeout``,
``retries``, ``api_key_env`` (HTTP); ``threads``, ``batch_size``, ``max_model_len``,
``device`` (in process); ``tool_choice`` (``required`` / ``auto``); ``cache`` (a folder, or
``off``; default: the user cache, :func:`harness_gym.llm.cache.default_cache_dir`);
``revision`` (your name for the weights a server serves under a name, e.g. a checkpoint
step: another revision is another agent and never shares cached replies).

Any other request field goes through as ``body.FIELD=VALUE`` (servers only), the value read
as JSON where it parses and as a string otherwise (URL-encode ``&`` as ``%26``):
``openai:Qwen3-8B@URL?body.top_k=20&body.chat_template_kwargs={"enable_thinking":false}``,
``body.stop=["\n\n"]``, ``body.min_p=0.05``. They change what the model writes, so they are
part of the agent's name and of the cache key. Fields the harness or an option already sets
(:data:`BODY_OWNED`) are refused with the option to use instead.

The agent's name in result rows (:attr:`LLMSpec.name`, also the key a sweep or search
resumes by) holds what identifies the model and its sampling: the kind, the model (the
served name, without the URL), the sampling options, ``constrain``, ``tool_choice``,
``max_model_len`` and ``revision``. How the model is reached (:data:`REACH_OPTIONS`: the URL,
concurrency, timeout, retries, API key, threads, batch size, device, cache) is left out, so
the same model served at another port resumes the same sweep. What the model *is* (a content
hash of a folder, or what the server reports) is the rows' ``model_identity`` column and the
completion cache's key (:mod:`harness_gym.llm.identity`).

Backends are built once per process and shared by every agent of the same configuration.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

PREFIXES = ("llm", "hf:", "openai:")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {text!r}")
    return value


def _integer(text: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text):  # int() also takes "2_0" and non-ASCII digits
        raise ValueError(f"expected an integer, got {text!r}")
    return int(text)


_SAMPLING = {"temperature": _finite, "top_p": _finite, "max_tokens": _integer, "seed": _integer}
_OPTIONS: dict[str, Callable[[str], Any]] = {
    **_SAMPLING,
    "constrain": lambda v: _flag(v),
    "concurrency": _integer,
    "timeout": _finite,
    "retries": _integer,
    "api_key_env": str,
    "threads": _integer,
    "batch_size": _integer,
    "max_model_len": _integer,
    "device": str,
    "tool_choice": str,
    "cache": str,
    "revision": str,
}

#: Options that say how a model is reached, not what it is: left out of the agent's name.
REACH_OPTIONS = (
    "concurrency",
    "timeout",
    "retries",
    "api_key_env",
    "threads",
    "batch_size",
    "device",
    "cache",
)

#: Prefix of a pass-through request field (``body.top_k=20``).
BODY = "body."
#: Request fields set by the agent or an option: refused as ``body.`` fields (field -> why).
BODY_OWNED = {
    **dict.fromkeys(("model", "messages", "tools", "stream", "stream_options"), "the agent sets it"),
    "temperature": "use ?temperature=",
    "top_p": "use ?top_p=",
    "max_tokens": "use ?max_tokens=",
    "max_completion_tokens": "use ?max_tokens=",
    "seed": "use ?seed= (each request gets a seed derived from it)",
    "tool_choice": "use ?tool_choice=",
    "n": "the agent reads one choice per request",
    "structured_outputs": "use ?constrain=1 (the harness's action grammar)",
    "response_format": "use ?constrain=1 (the harness's action grammar)",
    "guided_json": "removed by vLLM (silently ignored); use ?constrain=1",
    "guided_regex": "removed by vLLM (silently ignored); use ?constrain=1",
    "guided_choice": "removed by vLLM (silently ignored); use ?constrain=1",
    "parallel_tool_calls": "several calls in one reply follow the harness's rule (multiple_actions); "
    "a server told false keeps the first silently",
}


#: Numeric options with a lower bound: (option, smallest value, the rule as messages say it).
_BOUNDS = (
    ("concurrency", 1, ">= 1"),
    ("timeout", 1e-9, "> 0"),
    ("retries", 0, ">= 0"),
    ("threads", 1, ">= 1"),
    ("batch_size", 1, ">= 1"),
    ("max_model_len", 1, ">= 1"),
)


#: The torch device strings an in-process backend accepts (checked without importing torch).
_DEVICE = re.compile(r"(cpu|mps|meta|(cuda|xpu|npu|hpu|xla)(:[0-9]+)?)")


class LLMSpecError(ValueError):
    """An LLM agent spec that cannot be built (bad form, option or value)."""


def _flag(value: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected 0/1, got {value!r}")


def _body_value(text: str) -> Any:
    """A ``body.`` value: JSON where it parses (numbers, lists, objects, true/false), else text."""
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def is_llm_spec(spec: str) -> bool:
    return spec == "llm" or spec.startswith("llm?") or spec.startswith(("hf:", "openai:"))


@dataclass(frozen=True)
class LLMSpec:
    """A parsed LLM agent spec."""

    text: str
    kind: str  # embedded | hf | openai
    model: str = ""  # folder path (hf) or served model name (openai)
    base_url: str = ""
    options: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def name(self) -> str:
        """The agent's name in rows: the model and its sampling, not how it is reached."""
        head = {"embedded": "llm", "hf": self.text.partition("?")[0], "openai": f"openai:{self.model}"}[
            self.kind
        ]
        kept = [(k, v) for k, v in parse_qsl(self.text.partition("?")[2], keep_blank_values=True)]
        kept = [(k, v) for k, v in kept if k not in REACH_OPTIONS]
        return head + ("?" + "&".join(f"{k}={v}" for k, v in kept) if kept else "")

    def backend_key(self) -> tuple[Any, ...]:
        shared = (
            "revision",
            "concurrency",
            "timeout",
            "retries",
            "api_key_env",
            "threads",
            "batch_size",
            "max_model_len",
            "device",
        )
        return (self.kind, self.model, self.base_url, *(self.options.get(k) for k in shared))

    def with_defaults(self, defaults: dict[str, Any]) -> LLMSpec:
        """This spec with CLI-wide options added where it sets none (the name says so)."""
        extra = {k: v for k, v in defaults.items() if v is not None and k not in self.options}
        if not extra:
            return self
        for key in extra:
            if key not in _OPTIONS:
                raise LLMSpecError(f"unknown LLM option {key!r}; options: {sorted(_OPTIONS)}")
        joined = "&".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in extra.items())
        return parse_llm_spec(self.text + ("&" if "?" in self.text else "?") + joined)


def parse_llm_spec(text: str) -> LLMSpec:
    """Parse ``llm``, ``hf:PATH`` or ``openai:MODEL@BASE_URL`` with ``?options``."""

    head, _, query = text.partition("?")
    options: dict[str, Any] = {}
    body: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key.startswith(BODY):
            name = key[len(BODY) :]
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise LLMSpecError(
                    f"agent {text!r}: {key!r} names no request field; write body.FIELD=VALUE, "
                    "e.g. body.top_k=20"
                )
            if name in BODY_OWNED:
                raise LLMSpecError(f"agent {text!r}: {key!r} cannot be passed through: {BODY_OWNED[name]}")
            if name in body:
                raise LLMSpecError(f"agent {text!r}: {key!r} is given twice")
            body[name] = _body_value(value)
            continue
        if key not in _OPTIONS:
            raise LLMSpecError(f"agent {text!r}: unknown option {key!r}; options: {sorted(_OPTIONS)}")
        try:
            options[key] = _OPTIONS[key](value)
        except ValueError as err:
            raise LLMSpecError(f"agent {text!r}: bad value for {key!r}: {err}") from None
    if options.get("tool_choice", "required") not in ("required", "auto"):
        raise LLMSpecError(f"agent {text!r}: tool_choice must be 'required' or 'auto'")
    if "device" in options and not _DEVICE.fullmatch(options["device"]):
        raise LLMSpecError(
            f"agent {text!r}: device must be a torch device such as cpu, cuda, cuda:1 or mps, "
            f"got {options['device']!r}"
        )
    cache = options.get("cache")
    if cache not in (None, "", "off"):
        where = next((p for p in (Path(cache), *Path(cache).parents) if p.exists()), None)
        if where is not None and not where.is_dir():
            raise LLMSpecError(
                f"agent {text!r}: cache must be a folder (or off), but {str(where)!r} is a file"
            )
    # Values that parse but cannot work fail here, named, not later inside a sweep worker.
    if body:
        options["body"] = body
    try:
        _sampling(options)
    except ValueError as err:
        raise LLMSpecError(f"agent {text!r}: {err}") from None
    for key, low, rule in _BOUNDS:
        if key in options and not options[key] >= low:
            raise LLMSpecError(f"agent {text!r}: {key} must be {rule}, got {options[key]!r}")
    if head == "llm":
        spec = LLMSpec(text, "embedded", options=options)
    elif head.startswith("hf:"):
        path = head[3:]
        if not path:
            raise LLMSpecError(f"agent {text!r} names no model folder; write hf:PATH")
        if not Path(path).is_dir():
            raise LLMSpecError(f"agent {text!r}: no model folder at {path!r}")
        spec = LLMSpec(text, "hf", str(Path(path).resolve()), options=options)
    elif head.startswith("openai:"):
        model, at, url = head[7:].partition("@")
        if not (model and at and url.startswith(("http://", "https://"))):
            raise LLMSpecError(
                f"agent {text!r}: write openai:MODEL@BASE_URL, e.g. openai:my-model@http://127.0.0.1:8000/v1"
            )
        from harness_gym.llm.endpoints import split_urls

        try:  # several servers of one model: openai:MODEL@URL1,URL2 (one agent)
            urls = split_urls(url)
        except ValueError as err:
            raise LLMSpecError(f"agent {text!r}: {err}") from None
        spec = LLMSpec(text, "openai", model, ",".join(urls), options=options)
    else:
        raise LLMSpecError(f"not an LLM agent spec: {text!r}; forms: llm, hf:PATH, openai:MODEL@BASE_URL")
    if body and spec.kind != "openai":
        raise LLMSpecError(
            f"agent {text!r}: body.{next(iter(body))} is a request field for a server "
            "(openai:MODEL@URL); the in-process backend takes only the sampling options"
        )
    if spec.options.get("constrain") and spec.kind != "openai":
        raise LLMSpecError(
            f"agent {text!r}: constrain=1 needs a server with structured outputs (openai:MODEL@URL "
            "served by vLLM); the in-process backend does not enforce grammars"
        )
    return spec


def _sampling(options: dict[str, Any]) -> Any:
    """The :class:`Sampling` of parsed options (the ``body.`` fields as its extra fields)."""
    from harness_gym.llm.types import Sampling, extra_fields

    extra = extra_fields(options.get("body") or {})
    return Sampling(**{k: options[k] for k in _SAMPLING if k in options}, extra=extra)


_BACKENDS: dict[tuple[Any, ...], Any] = {}


def build_backend(spec: LLMSpec) -> Any:
    """The backend a spec names (built once per process, configuration and, for a local
    folder, content: a model retrained into the same folder is loaded anew)."""
    key = spec.backend_key()
    path: Any = None
    if spec.kind != "openai":
        from harness_gym.llm.identity import folder_identity

        if spec.kind == "embedded":
            from harness_gym.llm.embedded import embedded_model_path

            path = embedded_model_path()
        else:
            path = spec.model
        key = (*key, folder_identity(path))
    if key in _BACKENDS:
        return _BACKENDS[key]
    o = spec.options
    if spec.kind == "openai":
        from harness_gym.llm.openai_backend import OpenAIBackend

        backend: Any = OpenAIBackend(
            spec.model,
            spec.base_url,
            api_key_env=o.get("api_key_env", "OPENAI_API_KEY"),
            timeout=o.get("timeout", 60.0),
            retries=o.get("retries", 3),
            concurrency=o.get("concurrency", 8),
            revision=o.get("revision") or None,
        )
    else:
        from harness_gym.llm.transformers_backend import TransformersBackend

        backend = TransformersBackend(
            path,
            threads=o.get("threads"),
            batch_size=o.get("batch_size", 8),
            max_model_len=o.get("max_model_len", 2048),
            device=o.get("device", "cpu"),
        )
    _BACKENDS[key] = backend
    return backend


def agent_factory(spec: LLMSpec) -> Callable[[Any], Any]:
    """``factory(env) -> LLMAgent`` for the spec (the backend is built on first use)."""
    from harness_gym.llm.agent import LLMAgent
    from harness_gym.llm.cache import CompletionCache

    o = spec.options
    sampling = _sampling(o)
    cache_opt = o.get("cache")
    cache = None if cache_opt == "off" else CompletionCache(cache_opt or None)

    def factory(env: Any) -> LLMAgent:
        return LLMAgent(
            env,
            build_backend(spec),
            sampling=sampling,
            constrain=bool(o.get("constrain", False)),
            cache=cache,
            tool_choice=o.get("tool_choice", "required"),
            name=spec.name,
        )

    return factory
