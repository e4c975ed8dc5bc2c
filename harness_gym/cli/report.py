"""``harness-gym report DIR``: a Markdown + HTML report with plots from a sweep folder."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, TextIO

from harness_gym.cli.common import output_dir

if TYPE_CHECKING:
    from harness_gym.analysis.report import Report

HELP = "write a Markdown + HTML report with plots from a sweep folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``harness-gym report``."""
    parser.add_argument("dir", help="a sweep folder (written by harness-gym sweep)")
    parser.add_argument("--out", default=None, help="report folder (default DIR/report)")
    parser.add_argument("--title", default=None, help="report title")
    parser.add_argument(
        "--reference",
        default=None,
        metavar="AGENT",
        help="an agent of the sweep whose success stands in for each harness's ceiling: rank "
        "harnesses by success, estimated ceiling, mismatch and their difference",
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``harness-gym report``."""
    from harness_gym.analysis.sweep import read_meta

    meta = read_meta(args.dir)  # not a sweep folder: one clear error before anything is written
    reference = reference_name(args.reference, meta.get("agents", []))
    if args.out is not None:
        output_dir(args.out)
    _warn_foreign_view(args.dir, out)
    report = build(args.dir, args.out, args.title, out, reference)
    out.write(f"wrote {report.markdown} and {report.html} ({len(report.plots)} plots)\n")
    return 0


def _warn_foreign_view(directory: str, out: TextIO) -> None:
    """Say at once when the run's ``view/`` holds files the viewer did not write: the report is
    written without links to episodes, and those files are left alone."""
    from pathlib import Path

    from harness_gym.analysis.view_folder import ViewFolderError, check
    from harness_gym.analysis.viewer import VIEW_DIR

    try:
        check(Path(directory) / VIEW_DIR)
    except ViewFolderError as err:
        out.write(f"note: the report links to no episodes: {err}\n")


def build(
    directory: str, out_dir: str | None, title: str | None, out: TextIO, reference: str | None = None
) -> Report:
    from harness_gym.analysis.report import build_report

    start = time.perf_counter()
    report = build_report(directory, out_dir, title, reference)
    out.write(f"report built in {time.perf_counter() - start:.1f}s: {report.out_dir}\n")
    if reference is not None:
        from harness_gym.analysis.reference import reference_analysis
        from harness_gym.analysis.sweep import load_rows

        out.write(reference_analysis(load_rows(directory), reference).summary() + "\n")
    return report


def reference_name(spec: str | None, agents: list[str]) -> str | None:
    """The sweep's agent name that ``--reference`` gives (its spec string or recorded name)."""
    if spec is None:
        return None
    if spec in agents:
        return spec
    from harness_gym.analysis.agent_spec import AgentSpecError, parse_agent
    from harness_gym.cli.common import CommandError

    try:
        name = parse_agent(spec).name
    except AgentSpecError:
        name = spec
    if name not in agents:
        raise CommandError(f"--reference {spec!r} is not an agent of this sweep; its agents: {agents}")
    return name
