"""Registers a task, a format and an agent on import: for ``harness-gym --import hg_import_only``
(this module is on PYTHONPATH in the tests but not installed: no entry points)."""

from __future__ import annotations

from hg_demo_plugin.agents import FirstLegalAgent
from hg_demo_plugin.formats import render_ini_like
from hg_demo_plugin.tasks import PickLargest

from harness_gym.core.formats import register_format
from harness_gym.core.plugins import register_agent
from harness_gym.core.registry import register_envs, register_task


class PickLargestToo(PickLargest):
    task_id = "PickLargestToo"


register_task(PickLargestToo)
register_envs(["PickLargestToo"])
register_format("ini_too", render_ini_like)
register_agent("first-legal-too", FirstLegalAgent)
