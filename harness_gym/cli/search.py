"""``harness-gym search``: find the harness an agent does best under, judged on unseen seeds.

    harness-gym search --agent oracle@Python --tasks ClickButton EnterText LoginUser \\
        --space examples/demo-space.yaml --budget 600 --dev-seeds 8 --test-seeds 20 --out runs/search
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from harness_gym.analysis.agent_spec import AGENT_FORMS
from harness_gym.cli.common import (
    CommandError,
    add_trajectory_argument,
    int_at_least,
    non_negative_int,
    output_dir,
    positive_int,
)
from harness_gym.llm.cli_options import DEFAULT_IN_FLIGHT, add_llm_arguments, apply_llm_options
from harness_gym.logging_backends import active, add_log_arguments, check_log_dir, cli_log

HELP = "search a harness space for the harness an agent does best under (dev seeds), judged on test seeds"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``harness-gym search``."""
    parser.add_argument("--agent", required=True, help=f"agent spec: {', '.join(AGENT_FORMS)}")
    parser.add_argument("--tasks", nargs="+", default=["all"], help="task ids, or 'all' (default)")
    parser.add_argument(
        "--space", default="default", help="'default' (DEFAULT_SPACE) or a harness-space YAML file"
    )
    parser.add_argument(
        "--default",
        default=None,
        help="the harness to compare against: a preset name or a harness YAML (default: the space's point "
        "nearest its base)",
    )
    parser.add_argument(
        "--budget", type=positive_int, default=2_000, help="dev episodes the search may spend"
    )
    parser.add_argument(
        "--dev-seeds",
        type=positive_int,
        default=8,
        help="dev seeds (0..K-1): the most a candidate is raced on",
    )
    parser.add_argument(
        "--test-seeds",
        type=positive_int,
        default=20,
        help="test seeds (100000..): only the final table sees them",
    )
    parser.add_argument(
        "--eta", type=int_at_least(2), default=2, help="successive halving keeps the best 1/eta (default 2)"
    )
    parser.add_argument(
        "--random",
        type=non_negative_int,
        default=8,
        help="random points added to the covering design (default 8)",
    )
    parser.add_argument(
        "--start",
        default="covering",
        help="design the pool starts from, as sweep --subset: covering (default), balanced, balanced:N, "
        "sample:N, ...",
    )
    parser.add_argument("--no-local", action="store_true", help="skip the one-factor local search")
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed of the covering and random points"
    )
    parser.add_argument("--no-ceiling", action="store_true", help="skip ceilings (no ceiling flags or split)")
    parser.add_argument(
        "--workers", type=non_negative_int, default=0, help="worker processes (0: in this process)"
    )
    parser.add_argument("--out", required=True, help="results folder; resumed if it holds this search")
    parser.add_argument(
        "--overwrite", action="store_true", help="discard the folder's rows instead of resuming"
    )
    parser.add_argument(
        "--retry-errors",
        action="store_true",
        help="run again the episodes that recorded an error (a model-server outage stops a search)",
    )
    parser.add_argument("--report", action="store_true", help="build the report when the search ends")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    add_trajectory_argument(parser)
    add_log_arguments(parser, "<--out>/logs")
    add_llm_arguments(parser)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``harness-gym search``: inputs and the folder are checked before any episode runs."""
    from harness_gym.analysis.search import SearchSpec, run_search

    check_log_dir(args)
    (agent,) = apply_llm_options([args.agent], args)
    spec = SearchSpec.build(
        agent,
        tasks=args.tasks,
        space=args.space,
        budget=args.budget,
        dev_seeds=args.dev_seeds,
        test_seeds=args.test_seeds,
        default=_default(args.default),
        eta=args.eta,
        n_random=args.random,
        local=not args.no_local,
        random_seed=args.seed,
        start=args.start,
        ceiling=not args.no_ceiling,
    )
    output_dir(args.out)
    out.write(spec.describe() + "\n")
    out.flush()
    with cli_log(args, "search", "search", {"search": spec.describe()}) as run_log, active(run_log):
        result = run_search(
            spec,
            args.out,
            workers=args.workers,
            progress=False,
            overwrite=args.overwrite,
            log=None if not args.quiet else _Null(),
            in_flight=args.in_flight or DEFAULT_IN_FLIGHT,
            retry_errors=args.retry_errors,
            trajectories=args.trajectories,
        )
    ratio = result.dev_episodes / spec.exhaustive_cost()
    out.write(
        f"{result.dev_episodes:,} dev episodes ({ratio:.1%} of evaluating all {spec.space.size:,} "
        f"harnesses on every dev seed), {result.test_episodes:,} test episodes; "
        f"{result.episodes_run:,} run now, {result.episodes_resumed:,} reused\n"
    )
    _final(result.tables["final"], out)
    imp = result.tables["improvements"]
    survived = int(imp["significant_on_test"].sum()) if len(imp) else 0
    replayed = int(imp["accepted_on_test"].sum()) if len(imp) else 0
    out.write(
        f"accepted improvements on dev: {len(imp)}; the rule still accepts {replayed} on test seeds, "
        f"{survived} with a significant gain in success (exact McNemar, Holm-adjusted over the search)\n"
        f"best harness: {result.best_yaml}\n"
    )
    if args.report:
        from harness_gym.cli.report import build

        report = build(args.out, None, None, out)
        out.write(f"report: {report.html}\n")
    else:
        out.write(f"next: harness-gym report {args.out}\n")
    return 0


def _default(text: str | None) -> Any:
    if text is None:
        return None
    from harness_gym.core.harness import Harness
    from harness_gym.core.presets import PRESETS, get_preset

    if text in PRESETS:
        return get_preset(text)
    if Path(text).is_file():
        return Harness.from_yaml(Path(text))
    raise CommandError(
        f"--default takes a preset name ({', '.join(PRESETS)}) or a harness YAML file; got {text!r}"
    )


def _final(table: Any, out: TextIO) -> None:
    """The test-seed table, short: role, change, success, vs default, cost, ceiling flag."""
    rows = [
        [
            "role",
            "harness",
            "test success",
            "vs default [95%]",
            "wins/losses",
            "Holm p",
            "steps",
            "obs chars",
            "ceiling-limited",
            "change",
        ]
    ]
    for r in table.itertuples(index=False):
        rows.append(
            [
                r.role,
                r.harness,
                f"{r.success:.2f}",
                _difference(r.vs_default, r.vs_default_low, r.vs_default_high),
                f"{r.vs_default_wins}/{r.vs_default_losses}",
                f"{r.vs_default_p_holm:.3f}",
                f"{r.steps:.1f}",
                f"{r.obs_chars:.0f}",
                "yes" if r.ceiling_limited else "no",
                r.change if len(r.change) <= 60 else r.change[:57] + "...",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")


def _difference(mean: float, low: float, high: float) -> str:
    from harness_gym.core.intervals import MIN_PAIRS_FOR_INTERVAL

    if low != low or high != high:
        return f"{mean:+.2f} [no interval: needs {MIN_PAIRS_FOR_INTERVAL}+ pairs]"
    return f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]"


class _Null:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass
