"""Reward functions for ``GRPOTrainer``, reading what :class:`HarnessRollout` recorded.

TRL calls each with the batch's prompts and completions and every extra field of the
rollout as a keyword list, one value per completion. A group whose rewards are all equal
has zero advantage and teaches nothing; the harness tasks' returns are binary, so
:data:`DEFAULT_REWARDS` adds a small weight on the share of the episode's replies that were
valid actions, which varies within a group long before the first success does.
"""

from __future__ import annotations

from typing import Any


def episode_return(completions: list[Any], episode_return: list[float], **_: Any) -> list[float]:
    """The episode's return in the env (the task's reward under the harness)."""
    return [float(r) for r in episode_return]


def valid_actions(completions: list[Any], valid_action_rate: list[float], **_: Any) -> list[float]:
    """The share of the episode's replies the harness parsed into legal actions."""
    return [float(r) for r in valid_action_rate]


def success(completions: list[Any], success: list[float], **_: Any) -> list[float]:
    """1.0 for an episode the task counts as solved."""
    return [float(s) for s in success]


REWARDS = {"return": episode_return, "valid_actions": valid_actions, "success": success}
#: (reward name, weight): the default mixture.
DEFAULT_REWARDS: tuple[tuple[str, float], ...] = (("return", 1.0), ("valid_actions", 0.2))


def reward_functions(spec: tuple[tuple[str, float], ...] = DEFAULT_REWARDS) -> tuple[list[Any], list[float]]:
    """The functions and weights of a ``((name, weight), ...)`` mixture, names from :data:`REWARDS`."""
    unknown = [name for name, _ in spec if name not in REWARDS]
    if unknown or not spec:
        raise ValueError(f"unknown reward(s) {unknown}; choose from {sorted(REWARDS)}")
    return [REWARDS[name] for name, _ in spec], [float(w) for _, w in spec]
