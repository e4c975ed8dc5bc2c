"""LMActionScorer: the cached prompt gives the same log-probabilities as scoring in full.

Marked ``llm``: it loads the embedded model.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness_gym.analysis.preferences import collect_states
from harness_gym.core.harness import Harness

pytestmark = pytest.mark.llm


def full_log_probs(scorer, observation: str, legal: list[str]) -> np.ndarray:  # noqa: ANN001
    """Each ``prompt + reply`` through the model whole (what the cache must reproduce)."""
    import torch

    from harness_gym.llm.chat import chat_messages

    env = scorer.env
    prompt = scorer.chat.prompt_ids(
        chat_messages(env.harness, env.system_prompt, observation, (), env.examples)
    )
    scores = []
    for text in legal:
        reply = scorer.chat.encode(text) + [scorer.chat.eos_id]
        with torch.no_grad():
            logits = scorer.model(input_ids=torch.tensor([prompt + reply])).logits[0].float()
        logps = torch.log_softmax(logits, dim=-1)
        scores.append(sum(float(logps[len(prompt) - 1 + k, t]) for k, t in enumerate(reply)))
    out = np.array(scores)
    return out - np.logaddexp.reduce(out)


@pytest.mark.parametrize(
    "harness", [Harness(step_budget=1), Harness(step_budget=3, field_order="reversed", few_shot=1)]
)
def test_cached_scores_equal_full_scores(harness: Harness) -> None:
    from harness_gym.llm.embedded import embedded_model_path
    from harness_gym.train.lm_scorer import LMActionScorer

    scorer = LMActionScorer(embedded_model_path(), "ClickButton", harness, threads=2)
    states = collect_states("ClickButton", harness, range(2), max_prefix=1)
    try:
        for state in states:
            legal = list(state.texts)
            got = scorer.log_probs(state.observation, legal)
            assert got.shape == (len(legal),) and np.isclose(np.logaddexp.reduce(got), 0.0)
            np.testing.assert_allclose(got, full_log_probs(scorer, state.observation, legal), atol=2e-3)
    finally:
        scorer.close()
