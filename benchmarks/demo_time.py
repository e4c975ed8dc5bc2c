"""How long ``make demo``'s jobs take (issue 44: at most 10 minutes on 2 idle cores).

    .venv/bin/python benchmarks/demo_time.py [--out DIR]

The jobs are read from the Makefile (``make -s -n demo``: the recipe as make would run it, so
this follows any change to the demo), set-up excluded (it runs once per machine); each
``harness-gym`` command runs as written, its ``runs/`` folder moved under ``--out`` (a fresh
temporary folder by default, so nothing already done is skipped), with a cache folder of its own
(``HARNESS_GYM_CACHE``: no completion the language model gave in an earlier run is reused, and
the model's conversion is paid, as on a newcomer's first run). Prints each job's wall time,
the total against the target, and the load average before and after (the time is only
"idle" when the load average stays near 0 on a 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 600.0


def demo_jobs() -> list[list[str]]:
    """``make demo``'s harness-gym commands, in order (the set-up's commands left out)."""
    listed = subprocess.run(
        ["make", "-s", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    commands = [shlex.split(line) for line in listed.replace("\\\n", " ").splitlines() if line.strip()]
    return [c for c in commands if c and Path(c[0]).name == "harness-gym"]


def moved(command: list[str], out: Path) -> list[str]:
    """``command`` with its ``runs/...`` paths under ``out``."""
    return [str(out / a.removeprefix("runs/")) if a.startswith("runs/") else a for a in command]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="folder for the demo's runs (default: a new temporary one)")
    args = parser.parse_args()
    jobs = demo_jobs()
    if not jobs:
        print("no harness-gym command found in make -n demo", file=sys.stderr)
        return 1
    out = args.out or Path(tempfile.mkdtemp(prefix="demo_time-"))
    print(f"make demo's {len(jobs)} jobs into {out}; load average at the start: {os.getloadavg()}")
    env = {**os.environ, "HARNESS_GYM_CACHE": str(out / "cache")}
    total = 0.0
    for job in jobs:
        command = moved(job, out)
        began = time.monotonic()
        done = subprocess.run(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        took = time.monotonic() - began
        total += took
        print(f"{took:7.1f} s  {' '.join(job[1:])[:100]}")
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
            return done.returncode
    verdict = "meets" if total <= TARGET_S else "misses"
    print(f"total {total:.0f} s ({total / 60:.1f} min): {verdict} the {TARGET_S / 60:.0f}-minute target")
    print(f"load average at the end: {os.getloadavg()}; cores: {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
