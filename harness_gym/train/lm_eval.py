"""Evaluate a trained (or any) model folder under a harness, the way ``harness-gym eval`` does.

The model acts through :class:`~harness_gym.llm.agent.LLMAgent` on an in-process
:class:`~harness_gym.llm.transformers_backend.TransformersBackend` (greedy unless told
otherwise), episodes batched with :func:`~harness_gym.rollout.run_batched`: exactly the
path of ``harness-gym eval --agent hf:FOLDER``, so numbers here and there agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_gym.analysis.stats import wilson
from harness_gym.core.harness import Harness


@dataclass(frozen=True)
class SuccessRate:
    """Successes out of episodes, with a 95% Wilson interval."""

    successes: int
    episodes: int
    replies: tuple[tuple[str, ...], ...] = ()
    #: per seed, in seed order: did the episode succeed (for paired comparisons across harnesses)
    outcomes: tuple[bool, ...] = ()

    @property
    def mean(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.successes, self.episodes)

    def __str__(self) -> str:
        low, high = self.interval
        return f"{100 * self.mean:.1f}% [{100 * low:.0f}, {100 * high:.0f}]"


_BACKENDS: dict[tuple[str, int], Any] = {}


def backend_for(folder: str | Path, threads: int | None = None) -> Any:
    """One in-process backend per folder (loading a model takes seconds).

    Not :func:`harness_gym.llm.spec.build_backend`'s cache, which keeps every backend it
    built: an experiment evaluates several trained folders in turn and holds one in memory.
    """
    from harness_gym.llm.transformers_backend import TransformersBackend

    key = (str(Path(folder).resolve()), int(threads or 0))
    if key not in _BACKENDS:
        _BACKENDS.clear()  # one model in memory at a time
        _BACKENDS[key] = TransformersBackend(folder, threads=threads)
    return _BACKENDS[key]


def evaluate_folder(
    folder: str | Path,
    task: str,
    harness: Harness,
    seeds: Iterable[int],
    threads: int | None = None,
    max_tokens: int = 48,
    in_flight: int = 8,
) -> SuccessRate:
    """Greedy success of the model in ``folder`` on ``task`` under ``harness`` over ``seeds``."""
    from harness_gym.core.registry import make_env
    from harness_gym.llm.agent import LLMAgent
    from harness_gym.llm.types import Sampling
    from harness_gym.rollout import Episode, run_batched

    backend = backend_for(folder, threads)
    sampling = Sampling(temperature=0.0, max_tokens=max_tokens)

    def make_agent(env: Any) -> LLMAgent:
        return LLMAgent(env, backend, sampling=sampling, name=f"hf:{folder}")

    episodes = [
        Episode(lambda: make_env(task, harness), make_agent, int(seed), key=int(seed)) for seed in seeds
    ]
    done = run_batched(episodes, in_flight=in_flight)
    outcomes = []
    replies = []
    for _episode, result, error in sorted(done, key=lambda d: d[0].key):
        if error is not None:
            raise error
        if result.extra.get("transport_failures"):  # an outage is never a failed episode
            lost = result.extra.get("first_error")
            raise RuntimeError(f"model replies were lost evaluating {folder}: {lost}")
        outcomes.append(bool(result.success))
        replies.append(tuple(str(c) for c in result.extra.get("completions", ())))
    return SuccessRate(sum(outcomes), len(episodes), tuple(replies), tuple(outcomes))
