"""The harness-search section of ``harness-gym report``: trajectory plot and test-seed tables.

:func:`search_section` reads a search folder (:mod:`harness_gym.analysis.search`) and returns
the report section: the incumbent's success against dev episodes spent, on dev and on test
seeds (``search_trajectory.png``); the final table on test seeds (chosen, default, best
one-factor changes; paired differences with exact, Holm-adjusted tests; cost; ceiling flag
and split); and the replay of the acceptance rule on test seeds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from harness_gym.analysis.report_section import Section
from harness_gym.analysis.search.run import SEARCH_FILE
from harness_gym.core.intervals import MIN_PAIRS_FOR_INTERVAL

PLOT = "search_trajectory.png"


def is_search_folder(folder: str | Path) -> bool:
    return (Path(folder) / SEARCH_FILE).exists()


def plot_trajectory(trajectory: Any, path: Path) -> Path:
    """Incumbent success against dev episodes spent: dev seeds (what the search saw) and test."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.0), dpi=110)
    if len(trajectory):
        x = trajectory["episodes_spent"]
        ax.step(x, trajectory["dev_success"], where="post", marker="o", label="dev seeds (searched on)")
        ax.step(x, trajectory["test_success"], where="post", marker="s", label="test seeds (unseen)")
        changes = trajectory["incumbent"].ne(trajectory["incumbent"].shift())
        for xi, name in zip(x[changes], trajectory["incumbent"][changes]):
            ax.annotate(name, (xi, 1.02), fontsize=7, rotation=45, ha="left", annotation_clip=False)
        ax.legend(loc="lower right", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no trajectory", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("dev episodes spent")
    ax.set_ylabel("incumbent success rate")
    ax.set_ylim(-0.02, 1.1)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def search_section(folder: str | Path, out: Path) -> Any:
    """The report section of a search folder (a :class:`~harness_gym.analysis.report_section.Section`)."""
    import pandas as pd

    folder = Path(folder)
    meta = json.loads((folder / SEARCH_FILE).read_text(encoding="utf-8"))
    if meta.get("status") != "done":
        return Section(
            "Harness search",
            [f"Search `{meta.get('search_id')}` has not finished; run the same command again to resume it."],
        )
    spec = meta["spec"]
    trajectory = pd.read_csv(folder / "trajectory.csv")
    final = pd.read_csv(folder / "final.csv")
    improvements = pd.read_csv(folder / "improvements.csv")
    plot_trajectory(trajectory, out / PLOT)
    survived = int(improvements["significant_on_test"].sum()) if len(improvements) else 0
    replayed = int(improvements["accepted_on_test"].sum()) if len(improvements) else 0
    text = [
        f"Search `{meta['search_id']}` for agent `{spec['agent']}`: chosen harness `{meta['chosen']}` "
        f"(`{folder.name}/best_harness.yaml`), "
        f"after {meta['dev_episodes']:,} dev episodes on {len(spec['dev_seeds'])} dev seed(s) "
        f"({meta['dev_episodes'] / max(1, meta['exhaustive_dev_episodes']):.1%} of evaluating every "
        f"harness of the space on every dev seed); judged on {len(spec['test_seeds'])} test seed(s) the "
        "search never saw.",
        "The plot follows the incumbent (the harness the search would return at that point) against the dev "
        "episodes spent: its success on the dev seeds it was chosen on, and on the test seeds. A dev curve "
        "above the test curve is selection on noise.",
        f"The search accepted {len(improvements)} improvement(s) on dev; replayed on the test seeds, the "
        f"acceptance rule still accepts {replayed}, and {survived} show a significant gain in success.",
        "Paired differences are over the test (task, seed) pairs: Newcombe's 95% interval for the "
        "difference in success rate, and the exact McNemar test on the pairs where exactly one harness "
        "succeeded (wins / losses). Significant means Holm-adjusted p < 0.05, the adjustment taken over "
        "every test in both tables together, so the chance that a search of an agent that no harness "
        "helps shows any significant row is at most 5% (family-wise error). The intervals are not "
        "adjusted; a tie over n pairs still has an interval of nonzero width.",
        "Ceiling-limited: the harness's ceiling is below the best seen on the same episodes (a dropped tool, "
        "a tight budget), so part of its score is the harness being harder, not the agent fitting it worse; "
        "success = ceiling - mismatch splits the two.",
    ]
    return Section(
        "Harness search",
        text,
        image=PLOT,
        tables=[
            ("On test seeds only: chosen, default and the default's best one-factor changes", _final(final)),
            ("Accepted improvements replayed on test seeds", _improvements(improvements)),
        ],
    )


def _interval(m: float, lo: float, hi: float, signed: bool = False) -> str:
    if m != m:
        return "-"
    f = "{:+.2f}" if signed else "{:.2f}"
    if lo != lo or hi != hi:
        return f"{f.format(m)} [no interval: needs {MIN_PAIRS_FOR_INTERVAL}+ pairs]"
    return f"{f.format(m)} [{f.format(lo)}, {f.format(hi)}]"


def _column(table: Any, name: str) -> list[Any]:
    """A column, or NaN for each row of a folder written before the column existed."""
    return list(table[name]) if name in table else [math.nan] * len(table)


def _wins(table: Any, prefix: str) -> list[str]:
    wins, losses = _column(table, f"{prefix}_wins"), _column(table, f"{prefix}_losses")
    return ["-" if w != w else f"{int(w)} / {int(lo)}" for w, lo in zip(wins, losses)]


def _p(v: float) -> str:
    return "-" if v != v else ("< 0.001" if v < 0.001 else f"{v:.3f}")


def _num(v: float, digits: int = 1) -> str:
    return "-" if v != v else f"{v:,.{digits}f}"


def _final(final: Any) -> Any:
    import pandas as pd

    return pd.DataFrame(
        {
            "role": final["role"],
            "harness": final["harness"],
            "change from default": final["change"],
            "success": [_interval(*v) for v in zip(final.success, final.success_low, final.success_high)],
            "vs default": [
                _interval(*v, signed=True)
                for v in zip(final.vs_default, final.vs_default_low, final.vs_default_high)
            ],
            "wins / losses": _wins(final, "vs_default"),
            "Holm p": [_p(v) for v in _column(final, "vs_default_p_holm")],
            "ceiling": [_num(v, 2) for v in final["ceiling"]],
            "mismatch": [_num(v, 2) for v in final["mismatch"]],
            "ceiling-limited": ["yes" if v else "no" for v in final["ceiling_limited"]],
            "steps": [_num(v) for v in final["steps"]],
            "obs chars": [_num(v, 0) for v in final["obs_chars"]],
            "action chars": [_num(v, 0) for v in final["action_chars"]],
            "tokens": [_num(v, 0) for v in final["tokens"]],
            "errors": final["errors"],
        }
    )


def _improvements(imp: Any) -> Any:
    import pandas as pd

    if not len(imp):
        return pd.DataFrame()
    return pd.DataFrame(
        {
            "step": imp["step"],
            "stage": imp["stage"],
            "from -> to": [f"{a} -> {b}" for a, b in zip(imp["from"], imp["to"])],
            "dev success": [f"{a:.2f} -> {b:.2f}" for a, b in zip(imp.dev_success_from, imp.dev_success_to)],
            "dev steps": [f"{a:.1f} -> {b:.1f}" for a, b in zip(imp.dev_steps_from, imp.dev_steps_to)],
            "decided by": imp["decided_by"],
            "test success": [
                f"{a:.2f} -> {b:.2f}" for a, b in zip(imp.test_success_from, imp.test_success_to)
            ],
            "test difference": [
                _interval(*v, signed=True) for v in zip(imp.test_difference, imp.test_low, imp.test_high)
            ],
            "wins / losses": _wins(imp, "test"),
            "Holm p": [_p(v) for v in _column(imp, "test_p_holm")],
            "rule accepts on test": ["yes" if v else "no" for v in imp["accepted_on_test"]],
            "significant on test": ["yes" if v else "no" for v in imp["significant_on_test"]],
        }
    )
