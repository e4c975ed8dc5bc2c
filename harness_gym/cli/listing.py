"""``harness-gym list [tasks|presets|factors|envs] [--family F] [--match TEXT]``: what exists.

Tasks and env ids of every family (web, the real-browser and terminal families, plugins'),
each filtered by ``--family`` and by ``--match`` (text the task or env id contains).
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from harness_gym.cli.common import CommandError, refuse_ignored, remember_defaults, table

HELP = "list tasks, presets, factors or env ids"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "what", nargs="?", default="all", choices=["all", "tasks", "presets", "factors", "envs"]
    )
    parser.add_argument("--family", help="only this family's tasks and env ids (web, browser, terminal, ...)")
    parser.add_argument("--match", help="only tasks and env ids that contain this text")
    remember_defaults(parser)


def every_task() -> dict[str, tuple[str, type]]:
    """Task id -> (family, class) for every registered task: the fast suite's and every
    family's (their classes are loaded here; none starts a browser or a sandbox)."""
    from harness_gym.core.plugins import load_plugins
    from harness_gym.core.registry import FAMILY_TASKS, TASKS, family_of, family_task

    load_plugins(["tasks", "families"])
    tasks = {t: (family_of(t) or "", cls) for t, cls in TASKS.items()}
    for task_id in FAMILY_TASKS:
        tasks.setdefault(task_id, (family_of(task_id) or "", family_task(task_id)))
    return tasks


def every_env_id() -> list[str]:
    """Every ``harness_gym/<Task>-<Preset>-v0`` id of every family (preset-less ids excluded)."""
    from harness_gym.core.registry import FAMILY_ENV_IDS, registered_env_ids

    every_task()  # plugins loaded
    return list(dict.fromkeys([*registered_env_ids(), *FAMILY_ENV_IDS]))


def _chosen(args: argparse.Namespace, tasks: dict[str, tuple[str, type]]) -> set[str]:
    """The task ids ``--family`` and ``--match`` keep (``--match`` on task ids)."""
    families = sorted({family for family, _ in tasks.values() if family})
    if args.family is not None and args.family not in families:
        raise CommandError(f"--family: unknown family {args.family!r}; families: {', '.join(families)}")
    return {t for t, (family, _) in tasks.items() if args.family in (None, family)}


def run(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.core.harness import EXTRA_FIELDS, LEVELS, MAX_FEW_SHOT, REASONING_LEVELS, Harness

    what = args.what
    if what in ("presets", "factors"):
        why = f"they filter tasks and env ids, and `list {what}` lists neither"
        refuse_ignored(args, ["family", "match"], why)
    tasks = every_task()
    chosen = _chosen(args, tasks)
    if what in ("tasks", "all"):
        out.write("Tasks:\n")
        rows = [
            [t, family, str(cls.max_steps), cls.description]
            for t, (family, cls) in tasks.items()
            if t in chosen and (args.match is None or args.match in t)
        ]
        table([["task", "family", "max_steps", "description"], *rows], out)
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
        for env_id in every_env_id():
            task = env_id.removeprefix("harness_gym/").rsplit("-", 2)[0]
            if task in chosen and (args.match is None or args.match in env_id):
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
