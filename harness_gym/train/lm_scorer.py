"""A language model's log-probabilities of the harness's legal actions, for preference recovery.

:class:`LMActionScorer` implements :class:`~harness_gym.analysis.preferences.LogProbPolicy`:
for an observation it builds the chat the model is trained and evaluated with (the harness's
system prompt, its worked examples, the observation), scores each legal action as the
harness writes it (the reply's tokens and the end-of-sequence token) and normalises over the
legal actions. Its log-odds between two actions are what
:func:`~harness_gym.analysis.preferences.recover_preferences` compares with the harness's
exact Q-differences.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from harness_gym.core.harness import Harness
from harness_gym.train.chat_tokens import ChatTokenizer


class LMActionScorer:
    """Log-probabilities of legal actions under a causal LM, in the harness's chat.

    Args:
        folder: a Hugging Face model folder (the embedded model's, or a trained one).
        task: the task id (for the system prompt and the worked examples).
        harness: the harness the actions are written in.
        threads: torch threads.
    """

    def __init__(self, folder: str | Path, task: str, harness: Harness, threads: int | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        from harness_gym.core.registry import make_env
        from harness_gym.train.grpo_lm import load_tokenizer

        if threads is not None:
            torch.set_num_threads(int(threads))
        self._torch = torch
        self.tokenizer = load_tokenizer(Path(folder))
        self.chat = ChatTokenizer(self.tokenizer)
        self.model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
        # transformers renamed ``past_key_values`` to ``cache`` during 5.x.
        forward = inspect.signature(self.model.forward).parameters
        self._cache_arg = "cache" if "cache" in forward else "past_key_values"
        self.env = make_env(task, harness)
        self.env.reset(seed=0)

    def log_probs(self, observation: str, legal_actions: Sequence[str]) -> np.ndarray:
        """log p(action | chat) for each action, normalised over ``legal_actions``.

        The prompt (system prompt, examples, observation: nearly every token) runs through the
        model once; the replies then run as one right-padded batch over copies of its cache,
        and only their positions' logits are computed. Same numbers as scoring each
        ``prompt + reply`` in full, at a fraction of the work.
        """
        torch = self._torch
        from transformers import DynamicCache

        from harness_gym.llm.chat import chat_messages

        messages = chat_messages(self.env.harness, self.env.system_prompt, observation, (), self.env.examples)
        prompt = self.chat.prompt_ids(messages)
        replies = [self.chat.encode(text) + [self.chat.eos_id] for text in legal_actions]
        width = max(len(r) for r in replies)
        ids = torch.full((len(replies), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(replies), len(prompt) + width), dtype=torch.long)
        mask[:, : len(prompt)] = 1
        for i, reply in enumerate(replies):
            ids[i, : len(reply)] = torch.tensor(reply)
            mask[i, len(prompt) : len(prompt) + len(reply)] = 1
        with torch.no_grad():
            cache = DynamicCache(config=self.model.config)
            first = (
                self.model(
                    input_ids=torch.tensor([prompt]),
                    **{self._cache_arg: cache},
                    use_cache=True,
                    logits_to_keep=1,
                )
                .logits[0, -1]
                .float()
            )  # predicts each reply's first token
            cache.batch_repeat_interleave(len(replies))
            rest = self.model(input_ids=ids, attention_mask=mask, **{self._cache_arg: cache}).logits.float()
        head = torch.log_softmax(first, dim=-1)
        tail = torch.log_softmax(rest, dim=-1)  # position k predicts reply token k + 1
        scores = []
        for i, reply in enumerate(replies):
            target = torch.tensor(reply[1:])
            scores.append(float(head[reply[0]] + tail[i, torch.arange(len(reply) - 1), target].sum()))
        out = np.array(scores)
        return out - np.logaddexp.reduce(out)

    def close(self) -> None:
        self.env.close()
