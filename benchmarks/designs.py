"""Design sizes and effect-estimation time.

    .venv/bin/python benchmarks/designs.py [--rows 100000] [--replicates 1000]

1. Points each design needs for a space (covering: the greedy strength-2 covering array;
   balanced: the smallest orthogonal array constructed, every pair of levels equally often;
   flips: a 2-point balanced base plus every one-factor change to every other level, as
   ``make demo`` runs; balanced+flips: the orthogonal array as the base) against the full
   factorial, with the lower bound for an orthogonal array (the lcm of the pairwise level
   products).
2. Time to estimate the report's factor effects (least squares with cluster-bootstrap
   intervals, and paired flips) on a synthetic sweep of ``--rows`` rows, beside a plain
   pandas groupby-mean of success per factor level over the same rows, measured in the same
   run, as a ratio. Target: under 10 s on 2 cores.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import numpy as np
import pandas as pd

from harness_gym.analysis.effects import factor_effects
from harness_gym.core.space import DEFAULT_SPACE, HarnessSpace

SPACES = {
    "default (11 factors)": DEFAULT_SPACE,
    "demo (8 factors)": HarnessSpace.from_yaml("examples/demo-space.yaml"),
    "presentation (4 factors)": HarnessSpace(
        {
            "obs_format": ["json", "markdown", "xml", "yaml", "key_value", "html"],
            "field_order": ["canonical", "reversed"],
            "extra_fields": [(), ("step",), ("last_error",), ("step", "last_error")],
            "history_window": [0, 1, "all"],
        }
    ),
    "interface (5 factors)": HarnessSpace(
        {
            "tool_style": ["json", "xml", "python", "command"],
            "tool_naming": ["canonical", "synonyms", "opaque"],
            "tool_order": ["canonical", "reversed", "alphabetical"],
            "tool_descriptions": ["full", "terse", "none"],
            "parser": ["strict", "lenient"],
        }
    ),
}


def sizes() -> pd.DataFrame:
    rows = []
    for name, space in SPACES.items():
        counts = [len(f.levels) for f in space.factors]
        oa = space.balanced_design()
        rows.append(
            {
                "space": name,
                "full factorial": space.size,
                "covering": len(space.covering(2)),
                "OA lower bound": int(np.lcm.reduce([a * b for a, b in itertools.combinations(counts, 2)])),
                "balanced": len(oa),
                "flips (balanced:2+flips)": len(space.flips(space.balanced_design(max_points=2))),
                "balanced+flips": len(space.flips(oa)),
                "balanced+flips:next": len(space.flips(oa, "next")),
            }
        )
    return pd.DataFrame(rows)


def synthetic(n_rows: int, flips: bool, seed: int = 0) -> tuple[pd.DataFrame, list[str], dict | None]:
    """A complete sweep of about ``n_rows`` rows over the demo space: success depends on tool
    style and the invalid-action policy (with an interaction) and on a per-(task, seed) coin."""
    space = SPACES["demo (8 factors)"]
    design = space.flips(space.balanced_design(max_points=2)) if flips else space.balanced_design()
    points = space.points(design)
    names = [f"h{i:03d}" for i in range(len(points))]
    levels = pd.DataFrame([space.levels_of(h) for h in points])
    clusters = max(1, n_rows // len(points))
    tasks = 12
    rng = np.random.default_rng(seed)
    u = rng.random(clusters)
    p = np.where(levels["tool_style"] == "json", 0.8, 0.3) - 0.2 * (
        (levels["tool_style"] == "json") & (levels["invalid_action"] == "end")
    )
    success = u[:, None] < p.to_numpy()[None, :]
    frame = pd.DataFrame(
        {
            "agent": "a",
            "task_id": np.repeat([f"T{i % tasks}" for i in range(clusters)], len(points)),
            "seed": np.repeat(np.arange(clusters) // tasks, len(points)),
            "harness_name": np.tile(names, clusters),
            "error": None,
            "success": success.ravel().astype(float),
        }
    )
    for f in space.factor_names:
        frame[f"level_{f}"] = np.tile(levels[f].to_numpy(), clusters)
    record = None
    if flips:
        record = {"flips": [[names[b], names[g], space.factor_names[c]] for b, g, c in design.flips]}
    return frame, list(space.factor_names), record


def timing(n_rows: int, replicates: int) -> pd.DataFrame:
    out = []
    for label, flips in (("least squares (balanced)", False), ("paired flips (balanced:2+flips)", True)):
        rows, factors, record = synthetic(n_rows, flips)
        start = time.perf_counter()
        for f in factors:
            rows.groupby(["agent", f"level_{f}"])["success"].mean()
        reference = time.perf_counter() - start
        start = time.perf_counter()
        effects = factor_effects(rows, factors, design=record, replicates=replicates)
        took = time.perf_counter() - start
        out.append(
            {
                "estimator": label,
                "rows": len(rows),
                "effect rows": len(effects.table),
                "bootstrap replicates": replicates,
                "seconds": round(took, 2),
                "groupby-mean seconds": round(reference, 3),
                "ratio": round(took / reference, 1) if reference > 0 else math.nan,
            }
        )
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--replicates", type=int, default=1000)
    args = parser.parse_args()
    pd.set_option("display.width", 200)
    print("Points each design needs (strength 2):")
    print(sizes().to_string(index=False))
    print()
    print(f"Estimating the report's factor effects on a synthetic {args.rows:,}-row sweep:")
    print(timing(args.rows, args.replicates).to_string(index=False))


if __name__ == "__main__":
    main()
