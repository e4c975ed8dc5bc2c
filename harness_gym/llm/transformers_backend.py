"""An in-process backend: a Hugging Face causal LM generating batches with transformers.

Requests with the same sampling parameters and tools are generated together in batches of
``batch_size`` (left padding), one ``generate`` call per batch. The tokens a batch's prompts
share at their start (the system prompt and worked examples of one harness) are run through
the model once and their cache copied to every row, as a server's prefix cache does: with
two worked examples that is most of the prompt. Greedy decoding gives the same text batched
as one at a time. Sampled decoding seeds torch's generator from the batch's request seeds, so
a batch reproduces across processes and thread counts (but a request's text depends on what
it was batched with; use a server for per-request seeds).

Native tool calls are read from the text the way vLLM's ``hermes`` parser reads them
(``<tool_call>{"name": ..., "arguments": ...}</tool_call>``), so the two backends agree.
Grammars are not enforced in process (``supports_grammar`` is False).
"""

from __future__ import annotations

import inspect
import re
import time
from pathlib import Path
from typing import Any

from harness_gym.core.tools import dump_json, load_json
from harness_gym.llm.identity import folder_identity
from harness_gym.llm.types import ChatRequest, Completion, ToolCall

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


class TransformersBackend:
    """Generate with a local model folder (``hf:PATH``) or the embedded model (``llm``).

    Args:
        path: a Hugging Face model folder.
        threads: torch's thread count for this process (None: leave it as it is).
        batch_size: most requests per ``generate`` call.
        max_model_len: prompts longer than this (in tokens) are refused with
            ``error_kind="context_length"``, as a server with ``--max-model-len`` does.
        device: ``"cpu"`` or a torch device string such as ``"cuda"``.
        share_prefix: run a batch's common leading tokens once (off: every row in full).
    """

    kind = "transformers"
    supports_grammar = False

    def __init__(
        self,
        path: str | Path,
        threads: int | None = None,
        batch_size: int = 8,
        max_model_len: int = 2048,
        device: str = "cpu",
        share_prefix: bool = True,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads is not None:
            torch.set_num_threads(int(threads))
        self.path = Path(path)
        self.model_id = self.path.name
        #: A content hash of the folder's weights, config and tokenizer (the cache key).
        self.identity = folder_identity(self.path)
        self.batch_size = int(batch_size)
        self.max_model_len = int(max_model_len)
        self.device = device
        self.share_prefix = bool(share_prefix)
        self.last_shared_tokens = 0  # the last batch's prefix run once (0: none)
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        dtype = torch.float32 if device == "cpu" else "auto"
        self.model = AutoModelForCausalLM.from_pretrained(str(self.path), dtype=dtype).to(device).eval()
        # transformers renamed ``past_key_values`` to ``cache`` during 5.x.
        forward = inspect.signature(self.model.forward).parameters
        self._cache_arg = "cache" if "cache" in forward else "past_key_values"

    def prompt_text(self, request: ChatRequest) -> str:
        """The templated prompt for one request (what the model reads)."""
        return self.tokenizer.apply_chat_template(
            request.messages,
            tools=request.tools or None,
            add_generation_prompt=True,
            tokenize=False,
        )

    def complete(self, requests: list[ChatRequest]) -> list[Completion]:
        out: list[Completion | None] = [None] * len(requests)
        groups: dict[Any, list[int]] = {}
        for i, request in enumerate(requests):
            s = request.sampling
            groups.setdefault((s.temperature, s.top_p, s.max_tokens), []).append(i)
        for indices in groups.values():
            for start in range(0, len(indices), self.batch_size):
                batch = indices[start : start + self.batch_size]
                for i, completion in zip(batch, self._generate([requests[i] for i in batch])):
                    out[i] = completion
        return [c for c in out if c is not None]

    def _encode(self, rows: list[list[int]]) -> dict[str, Any]:
        """Inputs for ``generate`` from prompt token ids: padded ids, their mask, and the
        shared prefix's cache.

        Rows are laid out as ``shared prefix | padding | own suffix`` (no shared prefix: plain
        left padding); the mask hides the padding and the position ids ``generate`` derives
        from it count only real tokens, so each row is computed as if it stood alone.
        """
        torch = self._torch
        shared = _shared_length(rows) if self.share_prefix and len(rows) > 1 else 0
        shared = min(shared, min(len(r) for r in rows) - 1)  # every row keeps a token to feed
        if shared < MIN_SHARED_PREFIX:
            shared = 0
        self.last_shared_tokens = shared
        pad = self.tokenizer.pad_token_id
        width = max(len(r) for r in rows) - shared
        ids, mask = [], []
        for row in rows:
            gap = width - (len(row) - shared)
            ids.append(row[:shared] + [pad] * gap + row[shared:])
            mask.append([1] * shared + [0] * gap + [1] * (len(row) - shared))
        inputs = {
            "input_ids": torch.tensor(ids, device=self.device),
            "attention_mask": torch.tensor(mask, device=self.device),
        }
        if not shared:
            return inputs
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        with torch.inference_mode():
            self.model(
                input_ids=torch.tensor([rows[0][:shared]], device=self.device), **{self._cache_arg: cache}
            )
        cache.batch_repeat_interleave(len(rows))
        return {**inputs, self._cache_arg: cache}

    def _generate(self, requests: list[ChatRequest]) -> list[Completion]:
        torch = self._torch
        start = time.perf_counter()
        token_rows = [
            self.tokenizer(self.prompt_text(r), add_special_tokens=False)["input_ids"] for r in requests
        ]
        lengths = [len(row) for row in token_rows]
        results: list[Completion | None] = [None] * len(requests)
        fit = []
        for i, n in enumerate(lengths):
            if n > self.max_model_len:
                results[i] = Completion(
                    error_kind="context_length",
                    error=f"the prompt has {n} tokens; this model's context is {self.max_model_len} tokens",
                    prompt_tokens=n,
                )
            else:
                fit.append(i)
        if fit:
            s = requests[fit[0]].sampling
            enc = self._encode([token_rows[i] for i in fit])
            room = min(s.max_tokens, self.max_model_len - max(lengths[i] for i in fit))
            kwargs: dict[str, Any] = {
                "max_new_tokens": max(1, room),
                "pad_token_id": self.tokenizer.pad_token_id,
                "eos_token_id": self.tokenizer.eos_token_id,
            }
            sampled = s.temperature > 0
            if sampled:
                kwargs.update(do_sample=True, temperature=s.temperature, top_p=s.top_p, top_k=0)
            else:
                kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            # generate() samples from torch's global generator: seed it for this batch and
            # give the caller's random state back afterwards.
            saved = torch.random.get_rng_state() if sampled else None
            try:
                if sampled:
                    torch.manual_seed(hash_seeds([requests[i].seed or 0 for i in fit]))
                with torch.inference_mode():
                    generated = self.model.generate(**enc, **kwargs)
            finally:
                if saved is not None:
                    torch.random.set_rng_state(saved)
            new = generated[:, enc["input_ids"].shape[1] :]
            elapsed = time.perf_counter() - start
            for row, i in enumerate(fit):
                ids = new[row].tolist()
                eos = self.tokenizer.eos_token_id
                stopped = eos in ids
                ids = ids[: ids.index(eos)] if stopped else ids
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                completion = Completion(
                    text=text,
                    finish_reason="stop" if stopped else "length",
                    prompt_tokens=lengths[i],
                    completion_tokens=len(ids) + (1 if stopped else 0),
                    latency=elapsed,
                )
                if requests[i].tools:
                    completion.text, completion.tool_calls = hermes_tool_calls(text)
                results[i] = completion
        return [c for c in results if c is not None]


def hermes_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """Split ``<tool_call>{...}</tool_call>`` blocks off a reply, as vLLM's hermes parser does."""
    calls = []
    for match in _TOOL_CALL.finditer(text):
        try:
            data = load_json(match.group(1))  # a key given twice is not a call
        except (ValueError, RecursionError):
            continue
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            arguments = data.get("arguments", {})
            calls.append(
                ToolCall(data["name"], arguments if isinstance(arguments, str) else dump_json(arguments))
            )
    if not calls:
        return text, []
    return text[: text.find("<tool_call>")].strip(), calls


#: Shorter shared prefixes are recomputed per row (a prefix pass has a fixed cost).
MIN_SHARED_PREFIX = 32


def _shared_length(rows: list[list[int]]) -> int:
    """How many leading tokens every row has in common."""
    first = rows[0]
    n = min(len(r) for r in rows)
    for row in rows[1:]:
        k = 0
        while k < n and row[k] == first[k]:
            k += 1
        n = k
    return n


def hash_seeds(seeds: list[int]) -> int:
    """One seed for a batch from its requests' seeds (order matters)."""
    import hashlib

    blob = ",".join(map(str, seeds)).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") & 0x7FFFFFFFFFFFFFFF
