"""verifiers' environment module for harness-gym: ``vf-eval harness-gym-verifiers``.

verifiers imports a taskset by a top-level module name (``harness-gym-verifiers`` ->
``harness_gym_verifiers``), so this module only re-exports
:mod:`harness_gym.integrations.verifiers_env`, where everything lives.
"""

from harness_gym.integrations.verifiers_env import *  # noqa: F403
from harness_gym.integrations.verifiers_env import __all__  # noqa: F401
