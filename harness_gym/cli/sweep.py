"""``harness-gym sweep``: run every (task, harness, seed) cell for each agent (resumable).

    harness-gym sweep --agent random --agent oracle@Json --tasks all --space default \\
        --subset balanced:8 --seeds 5 --workers 2 --out runs/demo
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

from harness_gym.analysis.agent_spec import AGENT_FORMS
from harness_gym.analysis.sweep import ALL_LIMIT, BACKENDS, SUBSET_FORMS
from harness_gym.cli.common import (
    CommandError,
    add_trajectory_argument,
    non_negative_int,
    output_dir,
    positive_int,
    refuse_ignored,
    remember_defaults,
    seed_int,
)
from harness_gym.cli.report import build, reference_name
from harness_gym.llm.cli_options import DEFAULT_IN_FLIGHT, add_llm_arguments, apply_llm_options
from harness_gym.logging_backends import active, add_log_arguments, check_log_dir, cli_log

HELP = "run every (task, harness, seed) cell for each agent; one row per episode (resumable)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
        "--design-seed",
        type=seed_int,
        default=0,
        help="seed of the design's construction: another balanced / covering / foldover / sample "
        "design of the same size (default 0; recorded in sweep.json)",
    )
    parser.add_argument(
        "--seeds", type=positive_int, default=5, help="episodes per (task, harness, agent): seeds 0..K-1"
    )
    parser.add_argument("--first-seed", type=seed_int, default=0, help="the first seed (default 0)")
    parser.add_argument(
        "--workers",
        type=non_negative_int,
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
    parser.add_argument(
        "--node-limit", type=positive_int, default=2_000, help="ceiling search budget per cell"
    )
    parser.add_argument(
        "--max-harnesses", type=positive_int, default=ALL_LIMIT, help="largest space '--subset all' accepts"
    )
    parser.add_argument(
        "--chunk-size", type=positive_int, default=None, help="cells per worker task (default: auto)"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="discard the folder's rows instead of resuming"
    )
    parser.add_argument(
        "--retry-errors", action="store_true", help="re-run finished cells that recorded an error"
    )
    parser.add_argument("--report", action="store_true", help="build the report when the sweep ends")
    parser.add_argument(
        "--reference",
        default=None,
        metavar="AGENT",
        help="agent spec whose success stands in for each harness's ceiling (added to --agent if "
        "absent): prints the harness rankings by success, estimated ceiling, mismatch and both",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_trajectory_argument(parser)
    add_log_arguments(parser, "<--out>/logs")
    add_llm_arguments(parser)
    remember_defaults(parser)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``harness-gym sweep``: the spec and the folder are checked before any cell runs."""
    from harness_gym.analysis import sweep as sweeps

    if args.no_ceiling:
        refuse_ignored(args, ["node_limit"], "--no-ceiling computes no ceiling")
    if args.backend != "ray":
        refuse_ignored(args, ["ray_address"], f"--backend {args.backend} does not use Ray")
    if args.workers == 0 and args.backend == "local":
        refuse_ignored(args, ["chunk_size"], "--workers 0 runs every cell in this process, in no chunks")
    if args.space == "presets" or (args.subset or "").partition("+")[0] == "all":
        refuse_ignored(args, ["design_seed"], "every point of the space runs, a design built from no seed")
    check_log_dir(args)
    agents = list(args.agent)
    if args.reference is not None and args.reference not in agents:
        agents.append(args.reference)
    spec = sweeps.SweepSpec.build(
        apply_llm_options(agents, args),
        tasks=args.tasks,
        space=args.space,
        subset=args.subset,
        seeds=args.seeds,
        first_seed=args.first_seed,
        ceiling=not args.no_ceiling,
        node_limit=args.node_limit,
        max_harnesses=args.max_harnesses,
        design_seed=args.design_seed,
    )
    output_dir(args.out)
    out.write(spec.describe() + "\n")
    out.flush()
    with cli_log(args, "sweep", f"sweep-{spec.id}", {"sweep_id": spec.id}) as run_log, active(run_log):
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
            in_flight=args.in_flight or DEFAULT_IN_FLIGHT,
            trajectories=args.trajectories,
        )
    rate = result.n_run / result.seconds if result.seconds > 0 else 0.0
    out.write(
        f"{result.n_cells:,} cells: {result.n_skipped:,} already done, {result.n_run:,} run "
        f"({rate:,.0f} cells/s), {result.n_errors:,} with errors\n"
        f"rows: {result.parquet} and {result.jsonl}\n"
    )
    rows = result.rows()
    _summary(rows, out)
    reference = None
    if args.reference is not None:
        from harness_gym.analysis.reference import reference_analysis

        reference = reference_name(args.reference, [a.name for a in spec.agents])
        out.write(reference_analysis(rows, reference).summary() + "\n")
    if args.report:
        report = build(args.out, None, None, out, reference)
        out.write(f"report: {report.html}\n")
    else:
        ref = f" --reference {args.reference}" if args.reference else ""
        out.write(f"next: harness-gym report {args.out}{ref}\n")
    _fail_on_outages(rows)
    return 0


def _fail_on_outages(rows: Any) -> None:
    """A failing exit (2, as eval and search) while the folder holds rows whose episodes lost
    model replies: an outage is not a 0% success rate, and a batch job must see it."""
    from harness_gym.analysis.sweep.cell import is_outage

    records = rows.to_dict("records") if "error" in getattr(rows, "columns", ()) else []
    lost = [r for r in records if is_outage(r)]
    if lost:
        raise CommandError(
            f"{len(lost)} of {len(records)} rows lost model replies and are left out of every "
            f"statistic: {lost[0]['error']}; check the server (URL, model name, timeout), then run "
            "the same command with --retry-errors"
        )


def _summary(rows: object, out: TextIO) -> None:
    from harness_gym.analysis.mismatch import mismatch_table, side_by_side

    table = side_by_side(mismatch_table(rows, by=("agent",)))
    widths = {c: max(len(c), *(len(str(v)) for v in table[c])) for c in table.columns}
    out.write("  ".join(c.ljust(widths[c]) for c in table.columns).rstrip() + "\n")
    for row in table.itertuples(index=False):
        out.write("  ".join(str(v).ljust(widths[c]) for v, c in zip(row, table.columns)).rstrip() + "\n")
