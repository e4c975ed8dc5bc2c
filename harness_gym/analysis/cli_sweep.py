"""The ``harness-gym sweep`` and ``harness-gym report`` commands (argparse parts).

harness-gym sweep --agent random --agent oracle@Json --tasks all --space default \\
    --subset balanced:8 --seeds 5 --workers 2 --out runs/demo
harness-gym report runs/demo
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from harness_gym.analysis.agent_spec import AGENT_FORMS, AgentSpecError
from harness_gym.analysis.sweep import ALL_LIMIT, BACKENDS, SUBSET_FORMS, SweepError
from harness_gym.core.harness import HarnessSpecError
from harness_gym.llm.cli_options import add_llm_arguments, apply_llm_options
from harness_gym.llm.spec import LLMSpecError

if TYPE_CHECKING:
    from harness_gym.analysis.report import Report

SWEEP_HELP = "run every (task, harness, seed) cell for each agent; one row per episode (resumable)"
REPORT_HELP = "write a Markdown + HTML report with plots from a sweep folder"


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``harness-gym sweep``."""
    parser.add_argument(
        "--agent",
        action="append",
        required=True,
        help=f"agent spec (repeatable): {', '.join(AGENT_FORMS)}",
    )
    parser.add_argument("--tasks", nargs="+", default=["all"], help="task ids, or 'all' (default)")
    parser.add_argument(
        "--space",
        default="default",
        help="'default' (DEFAULT_SPACE), 'presets', or a harness-space YAML file",
    )
    parser.add_argument(
        "--subset",
        default=None,
        help=f"which harnesses of the space: {SUBSET_FORMS} (default: balanced; 'all' for presets)",
    )
    parser.add_argument(
        "--seeds", type=int, default=5, help="episodes per (task, harness, agent): seeds 0..K-1"
    )
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument(
        "--workers",
        type=int,
        default=min(4, os.cpu_count() or 1),
        help="worker processes (0: run in this process); default min(4, CPUs)",
    )
    parser.add_argument(
        "--backend", choices=BACKENDS, default="local", help="local process pool or Ray tasks"
    )
    parser.add_argument("--ray-address", default=None, help="join this Ray cluster (backend ray)")
    parser.add_argument("--out", required=True, help="output folder (rows, sweep.json); resumed if it exists")
    parser.add_argument(
        "--no-ceiling", action="store_true", help="skip the per-cell ceiling (no mismatch in the report)"
    )
    parser.add_argument("--node-limit", type=int, default=2_000, help="ceiling search budget per cell")
    parser.add_argument(
        "--max-harnesses", type=int, default=ALL_LIMIT, help="largest space '--subset all' accepts"
    )
    parser.add_argument("--chunk-size", type=int, default=None, help="cells per worker task (default: auto)")
    parser.add_argument(
        "--overwrite", action="store_true", help="discard the folder's rows instead of resuming"
    )
    parser.add_argument(
        "--retry-errors", action="store_true", help="re-run finished cells that recorded an error"
    )
    parser.add_argument("--report", action="store_true", help="build the report when the sweep ends")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_llm_arguments(parser)


def run_sweep(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``harness-gym sweep``; bad input exits with a one-line ``error: ...`` message."""
    from harness_gym.analysis import sweep as sweeps

    try:
        spec = sweeps.SweepSpec.build(
            apply_llm_options(args.agent, args),
            tasks=args.tasks,
            space=args.space,
            subset=args.subset,
            seeds=args.seeds,
            first_seed=args.first_seed,
            ceiling=not args.no_ceiling,
            node_limit=args.node_limit,
            max_harnesses=args.max_harnesses,
        )
        out.write(spec.describe() + "\n")
        out.flush()
        result = sweeps.run_sweep(
            spec,
            args.out,
            workers=args.workers,
            backend=args.backend,
            chunk_size=args.chunk_size,
            progress=not args.quiet,
            overwrite=args.overwrite,
            retry_errors=args.retry_errors,
            ray_address=args.ray_address,
            log=sys.stderr,
            in_flight=args.in_flight,
        )
    except (SweepError, AgentSpecError, LLMSpecError, HarnessSpecError, FileNotFoundError) as err:
        raise SystemExit(f"error: {err}") from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    rate = result.n_run / result.seconds if result.seconds > 0 else 0.0
    out.write(
        f"{result.n_cells:,} cells: {result.n_skipped:,} already done, {result.n_run:,} run "
        f"({rate:,.0f} cells/s), {result.n_errors:,} with errors\n"
        f"rows: {result.parquet} and {result.jsonl}\n"
    )
    _summary(result.rows(), out)
    if args.report:
        report = _build(args.out, None, None, out)
        out.write(f"report: {report.html}\n")
    else:
        out.write(f"next: harness-gym report {args.out}\n")
    return 0


def _summary(rows: object, out: TextIO) -> None:
    from harness_gym.analysis.mismatch import mismatch_table, side_by_side

    table = side_by_side(mismatch_table(rows, by=("agent",)))
    widths = {c: max(len(c), *(len(str(v)) for v in table[c])) for c in table.columns}
    out.write("  ".join(c.ljust(widths[c]) for c in table.columns).rstrip() + "\n")
    for row in table.itertuples(index=False):
        out.write("  ".join(str(v).ljust(widths[c]) for v, c in zip(row, table.columns)).rstrip() + "\n")


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``harness-gym report``."""
    parser.add_argument("dir", help="a sweep folder (written by harness-gym sweep)")
    parser.add_argument("--out", default=None, help="report folder (default DIR/report)")
    parser.add_argument("--title", default=None, help="report title")


def run_report(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``harness-gym report``."""
    try:
        report = _build(args.dir, args.out, args.title, out)
    except (SweepError, FileNotFoundError) as err:
        raise SystemExit(f"error: {err}") from None
    out.write(f"wrote {report.markdown} and {report.html} ({len(report.plots)} plots)\n")
    return 0


def _build(directory: str, out_dir: str | None, title: str | None, out: TextIO) -> Report:
    from harness_gym.analysis.report import build_report

    start = time.perf_counter()
    report = build_report(directory, out_dir, title)
    out.write(f"report built in {time.perf_counter() - start:.1f}s: {report.out_dir}\n")
    return report


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """``python -m harness_gym.analysis.cli_sweep sweep|report ...`` (the same as the
    ``harness-gym`` subcommands)."""
    parser = argparse.ArgumentParser(prog="python -m harness_gym.analysis.cli_sweep", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    add_sweep_arguments(sub.add_parser("sweep", help=SWEEP_HELP))
    add_report_arguments(sub.add_parser("report", help=REPORT_HELP))
    args = parser.parse_args(argv)
    out = out or sys.stdout
    return run_sweep(args, out) if args.command == "sweep" else run_report(args, out)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
