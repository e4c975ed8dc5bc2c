"""``harness-gym check``: hold each task to the package's task rules (``check_task``: the oracle
reaches the exact ceiling, instances vary, a random agent rarely wins, tight budgets behave,
snapshots restore) and check harnesses keep the contract on it (``check_harness``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from harness_gym.cli.common import EXIT_CHECK_FAILED, CommandError, positive_int

HELP = "check harnesses keep the contract on tasks (check_harness)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", action="append", help="task id (repeatable; default: all tasks)")
    parser.add_argument(
        "--harness",
        action="append",
        help="preset name, YAML path, 'balanced:SPACE.yaml' (orthogonal array), 'covering:SPACE.yaml' "
        "or 'all' presets (repeatable)",
    )
    parser.add_argument("--seeds", type=positive_int, default=5, help="seeds 0..N-1 per pair (default 5)")
    parser.add_argument("--verbose", "-v", action="store_true", help="print passing pairs too")
    parser.add_argument(
        "--no-task-rules", action="store_true", help="skip the task rules; check the harnesses only"
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.analysis.ceiling import seed_ceiling
    from harness_gym.core.checker import check_harness, check_task
    from harness_gym.core.harness import Harness
    from harness_gym.core.plugins import failures_note
    from harness_gym.core.presets import PRESETS, preset_applies, resolve_harness
    from harness_gym.core.registry import FAMILY_TASKS, TASKS, get_task
    from harness_gym.core.space import HarnessSpace
    from harness_gym.progress import progress

    tasks = sorted(TASKS) if args.task in (None, ["all"]) else args.task
    for task in tasks:
        if task not in TASKS and task not in FAMILY_TASKS:  # terminal tasks are checkable by id
            raise CommandError(f"unknown task {task!r}; tasks: {sorted(TASKS)}{failures_note()}")
    harnesses: list[Harness] = []
    every_preset = False
    for spec in args.harness or ["all"]:
        if spec == "all":
            every_preset = True
        elif spec.startswith(("balanced:", "covering:")):
            kind, _, path = spec.partition(":")
            space = HarnessSpace.from_yaml(Path(path))
            harnesses.extend(space.balanced(2) if kind == "balanced" else space.covering(2))
        else:
            harnesses.append(resolve_harness(spec))
    jobs = [(t, h) for t in tasks for h in harnesses]
    if every_preset:  # each task with the presets registered for it (a family's own, web conventions)
        jobs += [(t, PRESETS[p]) for t in tasks for p in PRESETS if preset_applies(p, get_task(t))]
    failed = bad_tasks = 0
    if not args.no_task_rules:
        for task in progress(tasks, total=len(tasks), desc="task rules", unit="task"):
            rules = check_task(task, seeds=range(args.seeds), ceiling=seed_ceiling, raise_on_failure=False)
            bad_tasks += not rules.ok
            if not rules.ok or args.verbose:
                out.write(f"task rules: {rules}\n")
        out.write(
            f"checked {len(tasks)} task(s) against the task rules on {args.seeds} seeds each: "
            f"{len(tasks) - bad_tasks} ok, {bad_tasks} with failures\n"
        )
    for task, harness in progress(jobs, total=len(jobs), desc="check", unit="pair"):
        report = check_harness(
            harness, task, seeds=range(args.seeds), raise_on_failure=False, ceiling=seed_ceiling
        )
        failed += not report.ok
        if not report.ok or args.verbose:
            out.write(str(report) + "\n")
    out.write(
        f"checked {len(jobs)} (task, harness) pairs on {args.seeds} seeds each: "
        f"{len(jobs) - failed} ok, {failed} with failures\n"
    )
    return EXIT_CHECK_FAILED if failed or bad_tasks else 0
