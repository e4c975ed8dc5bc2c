"""Multi-agent harness environments on PettingZoo (extra ``pettingzoo``).

- :class:`HarnessPanelEnv` (Parallel): one agent per harness over one seeded task instance.
- :class:`DelegationEnv` (AEC): a controller that may ``delegate(instruction)`` to a worker.
- :class:`HintMeshEnv` (Parallel): agents propose actions with confidences; the most
  confident proposal is broadcast to the others as a hint.

The channel between agents is a seeded, recorded spec like a harness
(:mod:`~harness_gym.multiagent.channels`). ``make(env_id, ...)`` builds an env by id
(:func:`registered_ids`). ``import harness_gym.multiagent`` needs nothing extra; the envs
import PettingZoo when first used and say how to install it when it is missing.
"""

from __future__ import annotations

import importlib
from typing import Any

from harness_gym.multiagent.agents import AgentError
from harness_gym.multiagent.channels import Channel, DelegationChannel, MeshChannel
from harness_gym.multiagent.effects import Effect, paired_effect

_LAZY = {
    "HarnessPanelEnv": "harness_gym.multiagent.panel",
    "panel_env": "harness_gym.multiagent.panel",
    "DelegationEnv": "harness_gym.multiagent.delegation",
    "delegation_env": "harness_gym.multiagent.delegation",
    "HintMeshEnv": "harness_gym.multiagent.mesh",
    "mesh_env": "harness_gym.multiagent.mesh",
    "make": "harness_gym.multiagent.registry",
    "registered_ids": "harness_gym.multiagent.registry",
    "run_multiagent_sweep": "harness_gym.multiagent.sweep",
}

INSTALL_HINT = "pip install 'harness-gym[pettingzoo]'"


def require_pettingzoo() -> Any:
    """Import PettingZoo, or raise an ImportError saying how to install it."""
    try:
        return importlib.import_module("pettingzoo")
    except ImportError as err:
        raise ImportError(
            f"harness_gym.multiagent needs PettingZoo (missing: {err.name}); install it with {INSTALL_HINT}"
        ) from None


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harness_gym.multiagent' has no attribute {name!r}")
    require_pettingzoo()
    return getattr(importlib.import_module(module), name)


__all__ = [
    "INSTALL_HINT",
    "AgentError",
    "Channel",
    "DelegationChannel",
    "Effect",
    "MeshChannel",
    "paired_effect",
    "require_pettingzoo",
    *_LAZY,
]
