"""The ``harness-gym`` command line.

One module per verb (``listing``, ``play``, ``evaluate``, ``train``, ``check``, ``sweep``,
``report``, ...); ``common`` holds the shared argument types, output-path checks and the error
layer; :mod:`~harness_gym.cli.entry` builds the parser from the verbs and runs a command
(:func:`main`; its docstring is the command's ``--help`` text).
"""

from __future__ import annotations

from harness_gym.cli.common import (
    IMPORT_OPTION,
    CLIExit,
    CommandError,
    Parser,
    load_plugins,
    resolve_env_ids,
    run_guarded,
    write_results,
)
from harness_gym.cli.entry import VERBS, build_parser, main

__all__ = [
    "IMPORT_OPTION",
    "VERBS",
    "CLIExit",
    "CommandError",
    "Parser",
    "build_parser",
    "load_plugins",
    "main",
    "resolve_env_ids",
    "run_guarded",
    "write_results",
]
