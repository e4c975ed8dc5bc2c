"""SupportEnv: a HarnessEnv whose family option goes in through the public binding hook."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import BoundHarness, Harness
from hg_support_family import FAMILY


class SupportBoundHarness(BoundHarness):
    """Shows all of the conversation, or (``user_messages: last``) its last message only."""

    user_messages = "all"

    def render(self, fields: Mapping[str, Any], **kwargs: Any) -> str:
        if self.user_messages == "last":
            fields = {**fields, "conversation": list(fields["conversation"])[-1:]}
        return super().render(fields, **kwargs)


class SupportEnv(HarnessEnv):
    def bind_harness(self, harness: Harness) -> BoundHarness:
        bound = SupportBoundHarness(harness, tuple(self.task.field_names), tuple(self.task.action_specs))
        bound.user_messages = harness.family(FAMILY).get("user_messages", "all")
        return bound


def make_support_env(task: str, harness: Any = None, render_mode: str | None = None) -> SupportEnv:
    from hg_support_family.tasks import SupportRefund

    if task != SupportRefund.task_id:
        raise KeyError(f"unknown support task {task!r}")
    return SupportEnv(SupportRefund, harness=harness, render_mode=render_mode)


__all__: Sequence[str] = ("SupportEnv", "make_support_env")
