"""Preference recovery: read a harness's action values off a policy's log odds.

Under KL-regularized control with strength ``beta`` the optimal policy is
``pi*(a|s) ∝ pi_ref(a|s) exp(Q_H(s,a) / beta)``, so for any two actions

    log[pi*(a|s) / pi*(b|s)] - log[pi_ref(a|s) / pi_ref(b|s)] = (Q_H(s,a) - Q_H(s,b)) / beta.

Given any policy that exposes log-probabilities over legal actions (the protocol
:class:`LogProbPolicy`), :func:`recover_preferences` computes the implied differences
``beta * (log-odds against the reference)`` on a set of states and correlates them with the
exact differences ``Q_H(s,a) - Q_H(s,b)``, which :func:`collect_states` computes by exact
search through the harness (its exposed tools and its remaining step budget).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from harness_gym.analysis.ceiling import HarnessLike, SoftValueSearch, ValueSearch
from harness_gym.core.env import HarnessEnv
from harness_gym.core.presets import resolve_harness
from harness_gym.core.task import Action, Task


@runtime_checkable
class LogProbPolicy(Protocol):
    """A policy that scores the legal actions of a state, as written by the harness."""

    def log_probs(self, observation: str, legal_actions: Sequence[str]) -> np.ndarray: ...


@dataclass
class StateRecord:
    """One state: how to reach it, what the agent sees, and the exact action values there."""

    seed: int
    prefix: tuple[str, ...]
    observation: str
    actions: tuple[Action, ...]
    texts: tuple[str, ...]
    q: np.ndarray


@dataclass
class PreferenceRecovery:
    """Implied vs exact action-value differences over all action pairs of all states."""

    implied: np.ndarray
    exact: np.ndarray
    pearson: float
    spearman: float
    sign_agreement: float

    @property
    def n_pairs(self) -> int:
        return len(self.exact)

    def __str__(self) -> str:
        return (
            f"{self.n_pairs} pairs: pearson={self.pearson:.3f} spearman={self.spearman:.3f} "
            f"sign agreement={self.sign_agreement:.1%}"
        )


def collect_states(
    task: str | type[Task],
    harness: HarnessLike,
    seeds: Iterable[int],
    max_prefix: int = 2,
    rng_seed: int = 0,
    node_limit: int = 5_000,
    soft_beta: float | None = None,
) -> list[StateRecord]:
    """States reached by random legal prefixes (0..max_prefix actions) from each seed.

    Each record holds the observation under ``harness`` and the exact Q value of every
    legal action the harness exposes, with the budget that remains at that state: hard
    values (best continuation), or with ``soft_beta`` the KL-regularized values against a
    uniform reference (:class:`~harness_gym.analysis.ceiling.SoftValueSearch`), the ones the
    identity is exact for in multi-step tasks.
    """
    from harness_gym.core.registry import get_task

    task_cls = get_task(task) if isinstance(task, str) else task
    env = HarnessEnv(task_cls, resolve_harness(harness))
    rng = np.random.default_rng(rng_seed)
    records = []
    for seed in seeds:
        length = int(rng.integers(0, max_prefix + 1))
        obs, info = env.reset(seed=seed)
        prefix: list[str] = []
        done = False
        for _ in range(length):
            legal = info["legal_actions"]
            if not legal:
                break
            text = legal[int(rng.integers(len(legal)))]
            obs, _, terminated, truncated, info = env.step(text)
            prefix.append(text)
            if terminated or truncated:
                done = True
                break
        if done:
            continue
        actions = env.legal_actions()
        if len(actions) < 2:
            continue
        search = (
            ValueSearch(env, node_limit) if soft_beta is None else SoftValueSearch(env, soft_beta, node_limit)
        )
        steps_left = env.budget - info["step"]
        q = np.array([search.q_value(a, steps_left) for a in actions])
        records.append(
            StateRecord(
                seed, tuple(prefix), obs, tuple(actions), tuple(env.format_action(a) for a in actions), q
            )
        )
    return records


def soft_optimal_log_probs(reference_log_probs: np.ndarray, q: np.ndarray, beta: float) -> np.ndarray:
    """log pi*(a|s) for pi* ∝ pi_ref exp(Q / beta)."""
    logits = np.asarray(reference_log_probs) + np.asarray(q) / beta
    return logits - np.logaddexp.reduce(logits)


def implied_differences(
    policy: LogProbPolicy, reference: LogProbPolicy, states: Sequence[StateRecord], beta: float
) -> tuple[np.ndarray, np.ndarray]:
    """(implied, exact) Q differences for every unordered action pair of every state."""
    implied, exact = [], []
    for state in states:
        log_ratio = np.asarray(policy.log_probs(state.observation, state.texts)) - np.asarray(
            reference.log_probs(state.observation, state.texts)
        )
        i, j = np.triu_indices(len(state.texts), k=1)
        implied.append(beta * (log_ratio[i] - log_ratio[j]))
        exact.append(state.q[i] - state.q[j])
    if not implied:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(implied), np.concatenate(exact)


def recover_preferences(
    policy: LogProbPolicy, reference: LogProbPolicy, states: Sequence[StateRecord], beta: float
) -> PreferenceRecovery:
    """Correlate the policy's implied action-value differences with the exact ones."""
    implied, exact = implied_differences(policy, reference, states, beta)
    informative = exact != 0
    agree = (
        float(np.mean(np.sign(implied[informative]) == np.sign(exact[informative])))
        if informative.any()
        else float("nan")
    )
    return PreferenceRecovery(implied, exact, _pearson(implied, exact), _spearman(implied, exact), agree)


class SoftOptimalPolicy:
    """The exact KL-regularized optimum over a reference, for checking the identity itself."""

    def __init__(self, reference: LogProbPolicy, states: Sequence[StateRecord], beta: float) -> None:
        self.reference = reference
        self.beta = beta
        self._q = {(s.observation, s.texts): s.q for s in states}

    def log_probs(self, observation: str, legal_actions: Sequence[str]) -> np.ndarray:
        q = self._q[(observation, tuple(legal_actions))]
        return soft_optimal_log_probs(self.reference.log_probs(observation, legal_actions), q, self.beta)


class UniformPolicy:
    """The uniform reference: every legal action equally likely."""

    def log_probs(self, observation: str, legal_actions: Sequence[str]) -> np.ndarray:
        return np.full(len(legal_actions), -np.log(len(legal_actions)))


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2 or np.std(x) == 0 or np.std(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks with ties averaged."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=float)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    # Round away float noise so that equal differences tie, as they do in exact arithmetic.
    return _pearson(_ranks(np.round(x, 9)), _ranks(np.round(y, 9)))
