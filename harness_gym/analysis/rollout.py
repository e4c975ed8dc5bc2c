"""Old path of :mod:`harness_gym.rollout.episode` (one episode, one row); import from
:mod:`harness_gym.rollout` in new code."""

from harness_gym.rollout.episode import EpisodeResult, episode_result, evaluate, run_episode

__all__ = ["EpisodeResult", "episode_result", "evaluate", "run_episode"]
