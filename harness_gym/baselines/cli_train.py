"""Deprecated alias: the ``train`` and ``eval --model`` verbs live in :mod:`harness_gym.cli.train`
and :mod:`harness_gym.cli.evaluate`.

``run_train(args)`` and ``run_model_eval(args)`` still work and go through the CLI's error layer
(an error is one line on stderr and a :class:`SystemExit` with code 2). The CLI is imported only
when they are called, so ``harness_gym.baselines`` does not depend on the command-line layer.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

TRAIN_ALGOS = ("maskable_ppo", "ppo", "dqn", "text_policy")


def run_train(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``harness-gym train`` on parsed arguments."""
    from harness_gym.cli import train
    from harness_gym.cli.common import run_guarded

    return run_guarded(lambda: train.run(args, out or sys.stdout), debug=getattr(args, "debug", False))


def run_model_eval(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``harness-gym eval --model DIR`` on parsed arguments."""
    from harness_gym.cli import evaluate
    from harness_gym.cli.common import run_guarded

    return run_guarded(
        lambda: evaluate.run_model_eval(args, out or sys.stdout), debug=getattr(args, "debug", False)
    )
