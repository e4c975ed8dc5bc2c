"""Deprecated alias of the ``sweep`` and ``report`` verbs, which live in :mod:`harness_gym.cli`.

``python -m harness_gym.analysis.cli_sweep sweep|report ...`` and ``cli_sweep.main([...])`` still
work (they run ``harness-gym sweep|report``). The CLI is imported only when they are used, so
``harness_gym.analysis`` does not depend on the command-line layer.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

SWEEP_HELP = "run every (task, harness, seed) cell for each agent; one row per episode (resumable)"
REPORT_HELP = "write a Markdown + HTML report with plots from a sweep folder"


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """``harness-gym sweep|report ...`` (errors: one line on stderr, :class:`SystemExit` code 2)."""
    from harness_gym.cli import main as cli_main

    return cli_main(list(sys.argv[1:] if argv is None else argv), out=out)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
