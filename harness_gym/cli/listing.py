"""``harness-gym list [tasks|presets|factors|envs]``: what exists."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from harness_gym.cli.common import table

HELP = "list tasks, presets, factors or env ids"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "what", nargs="?", default="all", choices=["all", "tasks", "presets", "factors", "envs"]
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.core.harness import EXTRA_FIELDS, LEVELS, MAX_FEW_SHOT, Harness
    from harness_gym.core.presets import PRESETS
    from harness_gym.core.registry import TASKS, registered_env_ids

    what = args.what
    if what in ("tasks", "all"):
        out.write("Tasks:\n")
        table(
            [["task", "max_steps", "description"]]
            + [[t.task_id, str(t.max_steps), t.description] for t in TASKS.values()],
            out,
        )
    if what in ("presets", "all"):
        out.write("\nPresets:\n")
        table(
            [["preset", "harness_id", "non-default factors"]]
            + [[name, h.id, h.describe()] for name, h in PRESETS.items()],
            out,
        )
    if what in ("factors", "all"):
        out.write("\nFactors:\n")
        levels = {**{k: ", ".join(map(str, v)) for k, v in LEVELS.items()}}
        levels["field_order"] = "canonical, reversed, or a permutation of the task's fields"
        levels["tool_order"] = "canonical, reversed, alphabetical, or a permutation of tools"
        levels["extra_fields"] = f"any subset of {', '.join(EXTRA_FIELDS)}"
        levels["history_window"] = "0, 1, 2, ... or all"
        levels["step_budget"] = "a positive integer, or null for the task's own budget"
        levels["drop_tools"] = "canonical tool names to hide"
        levels["rename_tools"] = "canonical tool name -> shown name"
        levels["rename_args"] = "canonical argument name -> shown name"
        levels["prompt_template"] = "default, terse, verbose, or a template using {tools}"
        levels["max_action_chars"] = "longest agent output parsed (default 8192)"
        levels["few_shot"] = f"0 to {MAX_FEW_SHOT} worked examples in the system prompt"
        levels["family_options"] = "a task family's own factors, e.g. {terminal: {shell: persistent}}"
        table(
            [["factor", "default", "levels"]]
            + [[f, json.dumps(Harness().to_dict()[f]), levels[f]] for f in Harness.factor_names()],
            out,
        )
    if what == "envs":
        for env_id in registered_env_ids():
            out.write(env_id + "\n")
    return 0
