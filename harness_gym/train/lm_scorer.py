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
        self.env = make_env(task, harness)
        self.env.reset(seed=0)

    def log_probs(self, observation: str, legal_actions: Sequence[str]) -> np.ndarray:
        """log p(action | chat) for each action, normalised over ``legal_actions``."""
        torch = self._torch
        from harness_gym.llm.chat import chat_messages

        messages = chat_messages(self.env.harness, self.env.system_prompt, observation, (), self.env.examples)
        prompt = self.chat.prompt_ids(messages)
        replies = [self.chat.encode(text) + [self.chat.eos_id] for text in legal_actions]
        width = len(prompt) + max(len(r) for r in replies)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(replies), width), pad, dtype=torch.long)
        mask = torch.zeros((len(replies), width), dtype=torch.long)
        for i, reply in enumerate(replies):
            seq = prompt + reply
            ids[i, : len(seq)] = torch.tensor(seq)
            mask[i, : len(seq)] = 1
        with torch.no_grad():
            logits = self.model(input_ids=ids, attention_mask=mask).logits.float()
        logps = torch.log_softmax(logits[:, :-1], dim=-1)
        scores = []
        for i, reply in enumerate(replies):
            positions = torch.arange(len(prompt) - 1, len(prompt) - 1 + len(reply))
            scores.append(float(logps[i, positions, torch.tensor(reply)].sum()))
        out = np.array(scores)
        return out - np.logaddexp.reduce(out)

    def close(self) -> None:
        self.env.close()
