"""Mismatch: ceiling minus the return an agent reaches through a harness, with intervals.

Per group (by default agent x task x harness) over the episodes of a sweep:

* ``ceiling``: mean of the per-seed ceilings (the best return any policy reaches);
* ``deployed``: mean of the agent's returns;
* ``mismatch``: mean of the paired per-seed differences ``ceiling - return``.

Each comes with a 95% interval (:func:`~harness_gym.analysis.stats.mean_ci`): Wilson at the
effective sample size for values in [0, 1], Student's t otherwise. The episodes of a group are
clustered by task instance, (task, seed): every harness of a sweep plays the same instance, so
a group that pools harnesses has as many independent units as instances, not episodes. Below
20 instances the interval counts instances; from 20 on it estimates the design effect from
the data. ``deployed = ceiling - mismatch`` holds exactly for the means. Rows with an ``error``
(crashed cells) are left out and counted in ``errors``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness_gym.analysis.stats import mean_ci

DEFAULT_BY = ("agent", "task_id", "harness_name", "harness_id")


def mismatch_table(rows: Any, by: Sequence[str] = DEFAULT_BY) -> Any:
    """Ceiling, deployed return and mismatch side by side, one row per group.

    Args:
        rows: a DataFrame of sweep rows (:func:`harness_gym.analysis.sweep.load_rows`) or a
            sweep folder.
        by: grouping columns, e.g. ``("agent", "task_id")`` to pool the harnesses.

    Returns:
        A DataFrame with ``by`` columns and ``n`` (episodes), ``errors``, ``ceiling``,
        ``ceiling_low``, ``ceiling_high``, ``deployed`` (+ ``_low``/``_high``), ``mismatch``
        (+ ``_low``/``_high``) and ``success`` (+ ``_low``/``_high``). Without ceilings (a sweep
        run with ``ceiling=False``) the ceiling and mismatch columns are NaN.
    """
    import numpy as np
    import pandas as pd

    df = _frame(rows)
    by = list(by)
    missing = [c for c in by if c not in df.columns]
    if missing:
        raise KeyError(f"no column(s) {missing} in the rows; columns: {list(df.columns)}")
    failed = df["error"].notna().to_numpy()
    returns = df["episode_return"].astype(float).to_numpy()
    ceilings = df["ceiling"].astype(float).to_numpy()
    success = df["success"].astype(float).to_numpy()
    instance = [repr(k) for k in zip(df["task_id"], df["seed"])] if "seed" in df else list(range(len(df)))
    records = []
    for key, positions in df.groupby(by, sort=False, dropna=False).indices.items():
        key = key if isinstance(key, tuple) else (key,)
        ok = positions[~failed[positions]]
        record: dict[str, Any] = dict(zip(by, key))
        record["n"] = len(ok)
        record["errors"] = len(positions) - len(ok)
        has_ceiling = len(ok) > 0 and not np.isnan(ceilings[ok]).any()
        units = [instance[i] for i in ok]
        record.update(_ci("ceiling", ceilings[ok] if has_ceiling else [], units))
        record.update(_ci("deployed", returns[ok], units))
        record.update(_ci("mismatch", (ceilings[ok] - returns[ok]) if has_ceiling else [], units))
        record.update(_ci("success", success[ok], units))
        records.append(record)
    return pd.DataFrame.from_records(records, columns=[*by, *COLUMNS])


COLUMNS = [
    "n",
    "errors",
    *[f"{m}{s}" for m in ("ceiling", "deployed", "mismatch", "success") for s in ("", "_low", "_high")],
]


def _ci(name: str, values: Any, clusters: Sequence[str]) -> dict[str, float]:
    values = list(values)
    mean, low, high = mean_ci(values, clusters=clusters if values else None)
    return {name: mean, f"{name}_low": low, f"{name}_high": high}


def _frame(rows: Any) -> Any:
    import pandas as pd

    if isinstance(rows, pd.DataFrame):
        return rows
    if isinstance(rows, (list, tuple)):
        return pd.DataFrame.from_records(rows)
    from harness_gym.analysis.sweep import load_rows

    return load_rows(rows)


def format_interval(mean: float, low: float, high: float, digits: int = 2) -> str:
    """``0.62 [0.41, 0.79]`` (``-`` for NaN; the mean alone when no interval was made)."""
    if mean != mean:  # NaN
        return "-"
    if low != low or high != high:
        return f"{mean:.{digits}f} [no interval: needs 2+ task instances that differ]"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def side_by_side(table: Any, digits: int = 2) -> Any:
    """The table with ``ceiling``, ``deployed`` and ``mismatch`` as ``mean [low, high]`` text."""
    import pandas as pd

    keys = [c for c in table.columns if c not in COLUMNS]
    out = table[keys + ["n", "errors"]].copy()
    for name in ("ceiling", "deployed", "mismatch", "success"):
        out[name] = [
            format_interval(m, lo, hi, digits)
            for m, lo, hi in zip(table[name], table[f"{name}_low"], table[f"{name}_high"])
        ]
    return pd.DataFrame(out)
