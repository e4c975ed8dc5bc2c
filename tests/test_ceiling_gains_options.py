"""experiments/ceiling_gains.py refuses counts below 1 in one line (0 once meant the default)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "ceiling_gains.py"


@pytest.mark.parametrize("flag", ["--retrain-steps", "--seeds", "--candidates", "--workers"])
@pytest.mark.parametrize("value", ["0", "-3", "x"])
def test_a_count_below_one_is_refused_in_one_line(flag: str, value: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), flag, value], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert f"argument {flag}: needs a whole number of at least 1, got '{value}'" in done.stderr
    assert "Traceback" not in done.stderr
