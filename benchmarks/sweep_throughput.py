"""Sweep throughput (cells per second): 1 and 2 local workers, and Ray vs local at equal workers.

    .venv/bin/python benchmarks/sweep_throughput.py [--seeds 4] [--rounds 3] [--no-ray] [--no-ceiling]
    .venv/bin/python benchmarks/sweep_throughput.py --trajectories --no-ceiling   # recording's cost

Every configuration runs the same sweep (random agent, every task, the covering subset of
DEFAULT_SPACE, ``--seeds`` seeds, ceilings on) into a fresh folder, interleaved round by round
so machine noise hits them alike; the table shows the median and the best round (the best is
the better estimate on a shared, noisy machine). Start-up that a
long sweep pays once is warmed up first and left out: the local pool's fork server and Ray's
``ray.init`` (a Ray user joins a running cluster). Worker processes themselves start inside
the timing on both backends. Targets: 2 local workers at least 1.6x one; Ray within 25% of
local at 2 workers (ratio >= 0.75).

``--trajectories`` compares, in process, a sweep that records no trajectory (``none``) with
one that records every episode and keeps all (``all``) or prunes to the pairs (``pairs``,
the default). Target: recording costs at most 25% (ratio ``all / none`` >= 0.75).
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path

from harness_gym.analysis.sweep import SweepSpec, run_sweep


def timed(spec: SweepSpec, root: Path, name: str, **kwargs: object) -> float:
    """Cells per second of one fresh sweep."""
    out = root / f"{name}-{time.monotonic_ns()}"
    start = time.perf_counter()
    result = run_sweep(spec, out, progress=False, log=io.StringIO(), **kwargs)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    assert result.n_run == spec.n_cells and result.n_errors == 0, result
    return spec.n_cells / seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--agent", default="random")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--no-ceiling", action="store_true")
    parser.add_argument("--trajectories", action="store_true", help="compare recording none / pairs / all")
    args = parser.parse_args()

    spec = SweepSpec.build(args.agent, "all", "default", "covering", args.seeds, ceiling=not args.no_ceiling)
    warm = SweepSpec.build(args.agent, ["ClickButton"], "default", "covering:4", 2)
    configs: dict[str, dict[str, object]] = {
        "in-process": {"workers": 0},
        "local x1": {"workers": 1},
        "local x2": {"workers": 2},
    }
    if args.trajectories:
        configs = {f"traj {p}": {"workers": 0, "trajectories": p} for p in ("none", "pairs", "all")}
    ray = None
    if not args.no_ray and not args.trajectories:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        configs["ray x2"] = {"workers": 2, "backend": "ray"}
    print(spec.describe())
    rates: dict[str, list[float]] = {name: [] for name in configs}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for kwargs in configs.values():  # warm-up: fork server, Ray workers' imports
                timed(warm, root, "warm", **kwargs)
            for r in range(args.rounds):
                for name, kwargs in configs.items():
                    rates[name].append(timed(spec, root, name, **kwargs))
                print(f"round {r + 1}: " + ", ".join(f"{n} {v[-1]:,.0f}/s" for n, v in rates.items()))
    finally:
        if ray is not None:
            ray.shutdown()

    median = {name: statistics.median(v) for name, v in rates.items()}
    best = {name: max(v) for name, v in rates.items()}
    print(f"\n{spec.n_cells:,} cells per sweep, {args.rounds} rounds")
    print(f"{'configuration':<12} {'median/s':>9} {'best/s':>9}")
    for name in rates:
        print(f"{name:<12} {median[name]:>9,.0f} {best[name]:>9,.0f}")
    checks = [("local x2 / local x1", "local x2", "local x1", 1.6)] if "local x2" in rates else []
    if args.trajectories:
        checks = [
            ("all / none", "traj all", "traj none", 0.75),
            ("pairs / none", "traj pairs", "traj none", 0.75),
        ]
    if "ray x2" in rates:
        checks.append(("ray x2 / local x2", "ray x2", "local x2", 0.75))
    print(f"\n{'ratio':<20} {'median':>7} {'best':>7}  target")
    for label, top, bottom, target in checks:
        m, b = median[top] / median[bottom], best[top] / best[bottom]
        verdict = "ok" if m >= target else ("ok (best)" if b >= target else "MISSED")
        print(f"{label:<20} {m:>7.2f} {b:>7.2f}  >= {target}: {verdict}")


if __name__ == "__main__":
    main()
