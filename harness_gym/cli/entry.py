"""The ``harness-gym`` command: list what exists, play an env by hand, evaluate agents, train
baselines, check harnesses, run sweeps and report on them.

harness-gym list [tasks|presets|factors|envs]
harness-gym play harness_gym/EnterText-ObsMarkdown-v0 --seed 3
harness-gym eval --agent oracle --agent random --env 'harness_gym/*' --episodes 20 --seed 0
harness-gym sweep --agent random --tasks ClickButton --subset balanced:4 --seeds 2 --out runs/demo
harness-gym validate --task terminal --harness Json

Errors print one line, ``harness-gym: error: ...``, and exit with code 2 (an unexpected error:
3; interrupted: 130; ``check`` or ``validate`` finding failures: 1). ``harness-gym --debug ...``
shows tracebacks.

One module per verb (``listing``, ``play``, ``evaluate``, ``train``, ``check``, ``sweep``,
``report``); ``common`` holds the shared argument types, output-path checks and the error layer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

import harness_gym
from harness_gym.cli import (
    check,
    evaluate,
    export,
    listing,
    play,
    report,
    rootfs,
    search,
    serve,
    sweep,
    train,
    validate,
    view,
)
from harness_gym.cli.common import (
    IMPORT_OPTION,
    CommandError,
    Parser,
    load_plugins,
    run_guarded,
)
from harness_gym.progress import progress_interval

VERBS = {
    "list": listing,
    "play": play,
    "eval": evaluate,
    "train": train,
    "check": check,
    "sweep": sweep,
    "report": report,
    "search": search,
    "export": export,
    "serve": serve,
    "rootfs": rootfs,
    "validate": validate,
    "view": view,
}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="harness-gym", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=harness_gym.__version__)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    parser.add_argument("--import", **IMPORT_OPTION)
    debug = Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    debug.add_argument("--import", **{**IMPORT_OPTION, "default": argparse.SUPPRESS})
    sub = parser.add_subparsers(dest="command", required=True)
    for name, verb in VERBS.items():
        verb.add_arguments(sub.add_parser(name, help=verb.HELP, parents=[debug]))
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, inp: TextIO | None = None) -> int:
    """Run one command; an error prints ``harness-gym: error: <one line>`` and raises
    :class:`CLIExit` (a ``SystemExit``: code 2, ``str()`` the printed line)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args: argparse.Namespace | None = None

    def command() -> int:
        nonlocal args
        args = build_parser().parse_args(argv)
        try:
            progress_interval()  # a bad HARNESS_GYM_PROGRESS_INTERVAL is refused before any work
        except ValueError as err:
            raise CommandError(str(err)) from None
        load_plugins(args.imports or [])
        stdout = out or sys.stdout
        if args.command == "play":
            return play.run(args, stdout, inp or sys.stdin)
        return VERBS[args.command].run(args, stdout)

    return run_guarded(command, debug=lambda: bool(args is not None and args.debug))
