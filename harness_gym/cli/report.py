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


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``harness-gym report``."""
    from harness_gym.analysis.sweep import read_meta

    read_meta(args.dir)  # not a sweep folder: one clear error before anything is written
    if args.out is not None:
        output_dir(args.out)
    report = build(args.dir, args.out, args.title, out)
    out.write(f"wrote {report.markdown} and {report.html} ({len(report.plots)} plots)\n")
    return 0


def build(directory: str, out_dir: str | None, title: str | None, out: TextIO) -> Report:
    from harness_gym.analysis.report import build_report

    start = time.perf_counter()
    report = build_report(directory, out_dir, title)
    out.write(f"report built in {time.perf_counter() - start:.1f}s: {report.out_dir}\n")
    return report
