"""``harness-gym validate``: can this task be trusted as a reward? The audit to run before
training on a task (see :mod:`harness_gym.analysis.validate` for every check).

    harness-gym validate                                  # the web suite, every preset
    harness-gym validate --task terminal --harness Json   # the built-in terminal tasks
    harness-gym validate --tasks examples/harbor --harness TerminusStyle --json
    harness-gym --import my_tasks validate --task MyTask  # a plugin's task

Prints one line per finding (``FAIL TASK HARNESS CHECK: why``), then the table (a row per
task x harness, and a ``*`` row per task for the checks no harness changes), then a summary;
``--json`` prints the same as one JSON object instead. Exit code 1 when any check fails.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, TextIO

from harness_gym.cli.common import (
    EXIT_CHECK_FAILED,
    CommandError,
    positive_int,
    refuse_ignored,
    remember_defaults,
)

HELP = "audit tasks as rewards: the own solution reaches the maximum, floor policies and known hacks do not"
#: ``--task`` words that name groups of built-in tasks.
GROUPS = ("all", "web", "terminal")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--task",
        action="append",
        help="task id, or 'web' (the fast suite: the default), 'terminal' (the built-in terminal "
        "tasks) or 'all' (both) (repeatable)",
    )
    parser.add_argument(
        "--tasks",
        action="append",
        metavar="FOLDER",
        help="a Harbor task folder, or a folder of them (repeatable)",
    )
    parser.add_argument(
        "--harness",
        action="append",
        help="preset name, YAML path, 'balanced:SPACE.yaml', 'covering:SPACE.yaml' or 'all' "
        "(every preset registered with the task: the default) (repeatable)",
    )
    parser.add_argument("--seeds", type=positive_int, default=3, help="seeds 0..N-1 per check (default 3)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--verbose", "-v", action="store_true", help="print every check, not only failures")
    remember_defaults(parser)


def _task_ids(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    from harness_gym.core.plugins import failures_note
    from harness_gym.core.presets import task_family
    from harness_gym.core.registry import FAMILY_TASKS, TASKS
    from harness_gym.envs.terminal import TERMINAL_TASK_IDS

    ids: list[str] = []
    skipped: dict[str, str] = {}
    words = args.task if args.task is not None else ([] if args.tasks else ["web"])
    for word in words:
        if word in ("all", "web"):  # the registry's own tasks, not another family's that joined it
            ids += sorted(t for t, cls in TASKS.items() if task_family(cls) in (None, "web"))
        if word in ("all", "terminal"):
            ids += list(TERMINAL_TASK_IDS)
        if word in GROUPS:
            continue
        if word not in TASKS and word not in FAMILY_TASKS:
            from harness_gym.core.registry import get_task

            try:  # a plugin's task, loaded on first use
                get_task(word)
            except KeyError:
                raise CommandError(
                    f"unknown task {word!r}; tasks: {sorted(TASKS)}, the terminal tasks "
                    f"(harness-gym list tasks), or {', '.join(repr(g) for g in GROUPS)}{failures_note()}"
                ) from None
        ids.append(word)
    for folder in args.tasks or []:
        if not os.path.isdir(folder):
            raise CommandError(
                f"--tasks {folder}: not a folder (give a Harbor task folder or a folder of them)"
            )
        from harness_gym.envs.terminal.harbor import find_task_folders, register_harbor_folder

        if not find_task_folders(folder):
            raise CommandError(f"--tasks {folder}: no Harbor task folder (one holding task.toml) there")
        found, rejected = register_harbor_folder(folder)
        ids += found
        skipped.update({str(Path(folder) / name): why for name, why in rejected.items()})
    return list(dict.fromkeys(ids)), skipped


def _harnesses(specs: list[str], task: type) -> list[Any]:
    from harness_gym.analysis.validate import presets_for
    from harness_gym.core.presets import resolve_harness, task_family
    from harness_gym.core.space import HarnessSpace

    out: list[Any] = []
    for spec in specs:
        if spec == "all":
            out += presets_for(task)
        elif spec.startswith(("balanced:", "covering:")):
            kind, _, path = spec.partition(":")
            space = HarnessSpace.from_yaml(Path(path))
            out += space.balanced(2) if kind == "balanced" else space.covering(2)
        else:
            out.append(resolve_harness(spec, family=task_family(task)))
    return list(dict.fromkeys(out))


def run(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.analysis.validate import ValidationReport, validate_task
    from harness_gym.core.registry import get_task, make_env
    from harness_gym.progress import progress_bar

    if args.json:
        refuse_ignored(args, ["verbose"], "--json prints every check already")
    ids, skipped = _task_ids(args)
    if not ids:
        reasons = "; ".join(f"{k}: {v}" for k, v in skipped.items())
        raise CommandError(f"no task to validate: no task folder loads ({reasons})")
    plans = []
    for task_id in ids:
        task = get_task(task_id)
        harnesses = _harnesses(args.harness or ["all"], task)
        if not harnesses:
            raise CommandError(f"no harness to validate {task_id} under (no preset is registered with it)")
        plans.append((task_id, harnesses))
    if any(_needs_sandbox(t) for t, _ in plans):
        from harness_gym.envs.terminal.sandbox_view import bwrap_problem

        problem = bwrap_problem()
        if problem is not None:
            raise CommandError(f"terminal tasks need bubblewrap, which cannot run here: {problem}")
    report = ValidationReport(skipped=skipped)
    total = sum(len(h) + 1 for _, h in plans)
    bar = progress_bar(total, "validate", unit="check")
    try:
        for task_id, harnesses in plans:
            if bar is not None:
                bar.set_postfix_str(task_id)
            report.checks += validate_task(
                task_id,
                harnesses,
                range(args.seeds),
                lambda t, h: make_env(t, harness=h),
                tick=(lambda: bar.update(1)) if bar is not None else (lambda: None),
            )
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        out.write(report.to_json() + "\n")
    else:
        for check in report.checks if args.verbose else report.failures:
            out.write(f"{check.status} {check.line()}\n")
        for folder, why in skipped.items():
            out.write(f"skipped {folder}: {' '.join(why.split())}\n")
        out.write(report.table() + "\n")
        n_fail = len(report.failures)
        out.write(
            f"validated {len(plans)} task(s) under {sum(len(h) for _, h in plans)} (task, harness) pair(s) "
            f"on {args.seeds} seed(s): {len(report.checks)} checks, {n_fail} finding(s)"
            + (f", {len(skipped)} task folder(s) skipped" if skipped else "")
            + "\n"
        )
    return EXIT_CHECK_FAILED if report.failures else 0


def _needs_sandbox(task_id: str) -> bool:
    from harness_gym.core.registry import TASK_FAMILIES

    return TASK_FAMILIES.get(task_id) == "terminal"
