"""``python -m harness_gym.cli ...``: the same as ``harness-gym ...``."""

from harness_gym.cli import main

raise SystemExit(main())
