"""scripts/system-deps.sh waits for another package manager's apt locks, within a bound.

A fresh cloud machine often runs unattended upgrades while the user's first ``make`` starts:
the script used to fail at once with "Could not get lock /var/lib/dpkg/lock-frontend". Here a
process holds apt's locks (the lists' lock, which ``apt-get update`` takes, and dpkg's) while
the script runs with a ``PATH`` on which the browser and the sandbox tools are missing, so it
must take the locks. Slow: ``apt-get update`` reads the package registry. Root only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ("/var/lib/apt/lists/lock", "/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")
HOLD = """
import fcntl, sys, time
held = [open(p, "a") for p in sys.argv[2:]]
for f in held:
    fcntl.lockf(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[1]))
"""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("apt-get") is None, reason="needs root and apt-get"),
]


def run_with_locks_held(tmp_path: Path, hold_seconds: float, timeout: int) -> subprocess.CompletedProcess:
    """Run the script while another process holds apt's locks for ``hold_seconds``."""
    bin_dir = tmp_path / "bin"  # the tools the script needs, without chromium, bwrap, mmdebstrap
    bin_dir.mkdir()
    for tool in ("apt-get", "grep", "sleep", "id"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(hold_seconds), *LOCKS], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        env = {"PATH": str(bin_dir), "HARNESS_GYM_APT_LOCK_TIMEOUT": str(timeout), "LANG": "C.UTF-8"}
        script = ["/bin/bash", str(ROOT / "scripts" / "system-deps.sh")]
        return subprocess.run(script, env=env, capture_output=True, text=True, timeout=900)
    finally:
        holder.kill()
        holder.wait()


def test_the_script_waits_for_apt_locks_then_installs(tmp_path: Path) -> None:
    started = time.monotonic()
    done = run_with_locks_held(tmp_path, hold_seconds=6, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "waiting up to 120s" in done.stdout, done.stdout
    assert time.monotonic() - started >= 5  # it did wait for the holder, not fail past it


def test_a_lock_held_past_the_bound_is_one_clear_error(tmp_path: Path) -> None:
    done = run_with_locks_held(tmp_path, hold_seconds=60, timeout=4)
    assert done.returncode == 1
    assert "still held after 4s (HARNESS_GYM_APT_LOCK_TIMEOUT)" in done.stderr, done.stderr
