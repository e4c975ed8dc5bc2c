"""Re-run a test file as an unprivileged uid (the terminal attack suites run as root and not).

``rerun_unprivileged(path, "-k", ...)`` runs pytest on ``path`` as an unprivileged uid from a
0700 copy of the tree whose path has a space (``scripts/as-unprivileged.py --copy``, the way
CI's unprivileged pass runs), with this interpreter, and returns the completed process. The
script makes the interpreter and its venv reachable for that uid even when they sit in a 0700
folder; the earlier way (the system Python with the checkout's venv on ``PYTHONPATH``) failed
from a private clone with "No module named pytest". It skips when the caller is not root (the
file already runs unprivileged).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def rerun_unprivileged(
    path: str | Path, *pytest_args: str, timeout: float = 900
) -> subprocess.CompletedProcess:
    """Run pytest on ``path`` (a file of this tree) as an unprivileged uid; output in the result."""
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: this run is the unprivileged one")
    relative = Path(path).resolve().relative_to(ROOT)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    argv = [sys.executable, str(ROOT / "scripts" / "as-unprivileged.py"), "--copy", "--"]
    argv += [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q"]
    argv += [str(relative), *pytest_args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
