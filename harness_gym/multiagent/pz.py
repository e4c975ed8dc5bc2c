"""PettingZoo's base classes, imported with a clear error when the ``pettingzoo`` extra is missing."""

from harness_gym.multiagent import require_pettingzoo

require_pettingzoo()

from pettingzoo import AECEnv, ParallelEnv  # noqa: E402

__all__ = ["AECEnv", "ParallelEnv"]
