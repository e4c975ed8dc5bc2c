"""Rollouts: the :class:`Agent` protocol, one episode (:func:`run_episode`) and many in flight,
each a stream of requests or all asked together (:func:`run_batched`).

This layer sits just above the core, so baselines, language-model agents, training and
analysis all run episodes the same way and record the same :class:`EpisodeResult`.
"""

from harness_gym.rollout.agent import Agent
from harness_gym.rollout.batched import Episode, RolloutStats, run_batched
from harness_gym.rollout.episode import EpisodeResult, episode_result, evaluate, run_episode

__all__ = [
    "Agent",
    "Episode",
    "EpisodeResult",
    "RolloutStats",
    "episode_result",
    "evaluate",
    "run_batched",
    "run_episode",
]
