"""Old path of :mod:`harness_gym.rollout.batched` (batched rollouts); import from
:mod:`harness_gym.rollout` in new code."""

from harness_gym.rollout.batched import Episode, RolloutStats, run_batched

__all__ = ["Episode", "RolloutStats", "run_batched"]
