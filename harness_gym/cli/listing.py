"""``harness-gym list [tasks|presets|factors|envs]``: what exists."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from harness_gym.cli.common import table

HELP = "list tasks, presets, factors or env ids"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "what", nargs="?", default="all", choices=["all", "tasks", "presets", "factors", "envs"]
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.core.harness import EXTRA_FIELDS, LEVELS, MAX_FEW_SHOT, REASONING_LEVELS, Harness
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
        write_presets(out)
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
        levels["reasoning"] = ", ".join(REASONING_LEVELS) + " (a reasoning model's thinking sent back or not)"
        table(
            [["factor", "default", "levels"]]
            + [[f, json.dumps(Harness().to_dict()[f]), levels[f]] for f in Harness.factor_names()],
            out,
        )
    if what == "envs":
        for env_id in registered_env_ids():
            out.write(env_id + "\n")
    return 0


#: What each kind of preset is for, as ``list presets`` heads its group.
KIND_HEADINGS = {
    "canonical": "every factor at its default",
    "one-change": "the canonical harness with one change, named by it: compare each against Json",
    "convention": "a real system's conventions, as close as the factors allow (docs/presets.md)",
    "bundle": "coverage bundles: many factors at once, so a few presets touch every level (for sweeps)",
    "other": "put into PRESETS without register_preset",
}


def all_presets() -> list[Any]:
    """Every preset: the generic ones, then each family's own (``register_family(presets=...)``)."""
    from harness_gym.core.plugins import load_plugins
    from harness_gym.core.presets import FAMILY_PRESETS, PRESET_INFO, PRESETS, Preset

    load_plugins(["tasks", "families"])
    presets = [PRESET_INFO[n] for n in PRESETS if n in PRESET_INFO]
    presets += [
        Preset(n, h, "other", "added to PRESETS directly") for n, h in PRESETS.items() if n not in PRESET_INFO
    ]
    for family_presets in FAMILY_PRESETS.values():
        presets += family_presets.values()
    return presets


def changes(harness: Any) -> str:
    """The factors a harness moves from the defaults, one ``factor=level`` each, long text cut."""
    parts = []
    for factor, level in harness.to_dict(full=False).items():
        text = level if isinstance(level, str) else json.dumps(level, separators=(",", ":"))
        if isinstance(level, str) and (len(text) > 40 or "\n" in text):
            text = f"<custom text, {len(level)} chars>"
        parts.append(f"{factor}={text}")
    return " ".join(parts) or "(none)"


def write_presets(out: TextIO) -> None:
    """The presets grouped by kind, each with its harness id and its changes."""
    from harness_gym.core.presets import DEPRECATED_PRESETS, KINDS

    presets = all_presets()
    out.write("\nPresets:\n")
    for kind in (*KINDS, "other"):
        members = [p for p in presets if p.kind == kind]
        if not members:
            continue
        out.write(f"\n{kind} ({KIND_HEADINGS[kind]}):\n")
        table(
            [["preset", "for", "harness_id", "changes"]]
            + [[p.name, p.family or "any", p.harness.id, changes(p.harness)] for p in members],
            out,
        )
    if DEPRECATED_PRESETS:
        out.write("\ndeprecated names (resolve with a warning for one release):\n")
        table(
            [["old name", "now"]] + [[old, new] for old, new in DEPRECATED_PRESETS.items()],
            out,
        )
