"""Ids of the multi-agent envs, like the single-agent ones: ``harness_gym/<Task>-<Kind>-v0``.

``Kind`` is ``Panel`` (every preset as an agent), ``Delegation`` (``Json`` controller and
worker) or ``Mesh`` (three ``Json`` peers). :func:`make` builds one; keyword arguments
override the defaults (``harnesses=``, ``controller_harness=``, ``channel=`` ...).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from harness_gym.core.presets import PRESETS
from harness_gym.core.registry import NAMESPACE, TASKS
from harness_gym.multiagent.delegation import DelegationEnv
from harness_gym.multiagent.mesh import HintMeshEnv
from harness_gym.multiagent.panel import HarnessPanelEnv

#: Kind -> (constructor, default keyword arguments).
KINDS: dict[str, tuple[Callable[..., Any], Callable[[], dict[str, Any]]]] = {
    "Panel": (HarnessPanelEnv, lambda: {"harnesses": list(PRESETS)}),
    "Delegation": (DelegationEnv, lambda: {}),
    "Mesh": (HintMeshEnv, lambda: {"harnesses": 3}),
}


def multiagent_id(task_id: str, kind: str) -> str:
    return f"{NAMESPACE}/{task_id}-{kind}-v0"


def registered_ids() -> list[str]:
    """Every multi-agent id: each registered task under each kind."""
    return [multiagent_id(t, k) for t in sorted(TASKS) for k in KINDS]


def make(env_id: str, **kwargs: Any) -> Any:
    """Build a multi-agent env from its id, e.g. ``make("harness_gym/ClickButton-Mesh-v0")``."""
    if not isinstance(env_id, str):
        raise TypeError(f"env_id must be a str such as {multiagent_id('ClickButton', 'Panel')!r}")
    name = env_id.removeprefix(f"{NAMESPACE}/")
    task_id, _, rest = name.rpartition("-") if name.endswith("-v0") else ("", "", "")
    task_id, _, kind = task_id.rpartition("-")
    if rest != "v0" or kind not in KINDS or task_id not in TASKS:
        close = difflib.get_close_matches(env_id, registered_ids(), n=3)
        raise ValueError(
            f"unknown multi-agent env id {env_id!r}; ids look like "
            f"{multiagent_id('ClickButton', 'Panel')!r} with kinds {list(KINDS)} and tasks "
            f"{sorted(TASKS)}" + (f"; did you mean {close}?" if close else "")
        )
    constructor, defaults = KINDS[kind]
    return constructor(task_id, **{**defaults(), **kwargs})
