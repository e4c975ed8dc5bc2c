"""``harness-gym check``: check harnesses keep the contract on tasks (``check_harness``)."""

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


def run(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.core.checker import check_harness
    from harness_gym.core.harness import Harness
    from harness_gym.core.presets import PRESETS, resolve_harness
    from harness_gym.core.registry import TASKS
    from harness_gym.core.space import HarnessSpace
    from harness_gym.progress import progress

    tasks = sorted(TASKS) if args.task in (None, ["all"]) else args.task
    for task in tasks:
        if task not in TASKS:
            raise CommandError(f"unknown task {task!r}; tasks: {sorted(TASKS)}")
    harnesses: list[Harness] = []
    for spec in args.harness or ["all"]:
        if spec == "all":
            harnesses.extend(PRESETS.values())
        elif spec.startswith(("balanced:", "covering:")):
            kind, _, path = spec.partition(":")
            space = HarnessSpace.from_yaml(Path(path))
            harnesses.extend(space.balanced(2) if kind == "balanced" else space.covering(2))
        else:
            harnesses.append(resolve_harness(spec))
    jobs = [(t, h) for t in tasks for h in harnesses]
    failed = 0
    for task, harness in progress(jobs, total=len(jobs), desc="check", unit="pair"):
        report = check_harness(harness, task, seeds=range(args.seeds), raise_on_failure=False)
        failed += not report.ok
        if not report.ok or args.verbose:
            out.write(str(report) + "\n")
    out.write(
        f"checked {len(jobs)} (task, harness) pairs on {args.seeds} seeds each: "
        f"{len(jobs) - failed} ok, {failed} with failures\n"
    )
    return EXIT_CHECK_FAILED if failed else 0
