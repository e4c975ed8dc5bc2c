"""A customer-service task family (the tests' proof that a family edits no package file).

``register()`` (the ``harness_gym.families`` entry point) registers the family: its task
``SupportRefund``, its own preset ``SupportStyle`` and its option ``user_messages``
(``family_options: {support: {user_messages: last}}``), built by :class:`SupportEnv`.
Registering imports only this module: the task and env modules load when an env is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness_gym.core.harness import Harness, HarnessSpecError
from harness_gym.core.presets import Preset
from harness_gym.core.registry import register_family

FAMILY = "support"
#: How much of the conversation with the simulated customer the observation shows.
USER_MESSAGES = ("all", "last")


def normalize_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The family's options, checked, with defaults left out."""
    unknown = sorted(set(options) - {"user_messages"})
    if unknown:
        raise HarnessSpecError(f"unknown support option(s) {unknown}; options: ['user_messages']")
    level = options.get("user_messages", "all")
    if level not in USER_MESSAGES:
        raise HarnessSpecError(
            f"support option user_messages must be one of {list(USER_MESSAGES)}, got {level!r}"
        )
    return {} if level == "all" else {"user_messages": level}


def presets() -> dict[str, Preset]:
    """The family's own preset (made once its option is registered: the harness carries it)."""
    harness = Harness(obs_format="markdown", family_options={FAMILY: {"user_messages": "last"}})
    summary = "support desk: markdown, only the customer's last message"
    return {"SupportStyle": Preset("SupportStyle", harness, "convention", summary, FAMILY)}


def register() -> list[str]:
    """Register the family (idempotent); return its Gymnasium ids."""
    return register_family(
        {"SupportRefund": "hg_support_family.tasks:SupportRefund"},
        "hg_support_family.env:make_support_env",
        add_to_task_registry=False,
        family=FAMILY,
        presets=presets,
        options=normalize_options,
    )
