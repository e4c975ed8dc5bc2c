"""Import time of ``harness_gym`` against ``gymnasium``, side by side in fresh processes.

    .venv/bin/python benchmarks/import_time.py [--rounds 15]

Each round starts, in turn, fresh interpreters that run ``pass``, ``import gymnasium``,
``import harness_gym`` and ``harness-gym --help``, so load on the machine falls on all
of them alike. The wall time of each process counts (interpreter start included, as a user
pays it); the table shows medians over rounds, and the ratio to ``import gymnasium`` is the
median of the per-round ratios. Target (issue 29): ``import harness_gym`` at most 2x.
Bytecode caches are on (``PYTHONDONTWRITEBYTECODE`` is dropped), as in an installed package:
without them every process compiles the package's sources again, which is not import time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import gymnasium": [sys.executable, "-c", "import gymnasium"],
    "import harness_gym": [sys.executable, "-c", "import harness_gym"],
    "harness-gym --help": [sys.executable, "-m", "harness_gym.cli", "--help"],
}
BASELINE = "import gymnasium"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


#: Processes start in an empty folder, so that ``import harness_gym`` is the package that
#: ``PYTHONPATH`` (or the install) gives, not a ``harness_gym`` folder in the current one.
_EMPTY = tempfile.TemporaryDirectory(prefix="import_time-")  # removed at exit
CWD = _EMPTY.name


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=ENV, cwd=CWD)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    for command in COMMANDS.values():  # warm the file cache and the bytecode caches
        wall(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.rounds):
        for name, command in COMMANDS.items():
            times[name].append(wall(command))
    where = subprocess.run(
        [sys.executable, "-c", "import harness_gym; print(harness_gym.__file__)"],
        capture_output=True, text=True, env=ENV, cwd=CWD, check=True,
    ).stdout.strip()  # fmt: skip
    print(f"{args.rounds} interleaved rounds of fresh processes ({sys.executable}; {where})")
    print(f"{'command':<22} {'median s':>9} {'min s':>7} {'x ' + BASELINE:>20}")
    for name, values in times.items():
        ratios = [v / b for v, b in zip(values, times[BASELINE])]
        median, ratio = statistics.median(values), statistics.median(ratios)
        print(f"{name:<22} {median:9.3f} {min(values):7.3f} {ratio:20.2f}")


if __name__ == "__main__":
    main()
