"""The report's parse-status section: how often the parser, not the policy, failed.

Every attempted action has a parse status (:mod:`harness_gym.core.parse_status`); each row
counts them (``parse_status``, ``parse_failures``). Per agent and per factor level this gives
the parse failure rate (failures / attempted actions) and the parser's share of failed
episodes (failed episodes with at least one parse failure / failed episodes): a harness
whose failures are mostly the parser's is telling the agent's format apart from its policy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from harness_gym.analysis.report_section import Section
from harness_gym.core.parse_status import PARSE_STATUSES

TABLE = "parse_status.csv"
COLUMNS = (
    "agent",
    "factor",
    "level",
    "actions",
    "parse_failures",
    "parse_failure_rate",
    "failed_episodes",
    "parser_share_of_failures",
)


def _counts(value: Any) -> dict[str, int]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {}
    return {str(k): int(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _summary(group: Any) -> dict[str, Any]:
    actions = int(group["steps"].sum())
    fails = int(group["parse_failures"].sum())
    failed = group[~group["success"].astype(bool)]
    with_parse = int((failed["parse_failures"] > 0).sum())
    return {
        "actions": actions,
        "parse_failures": fails,
        "parse_failure_rate": fails / actions if actions else float("nan"),
        "failed_episodes": len(failed),
        "parser_share_of_failures": with_parse / len(failed) if len(failed) else float("nan"),
    }


def parse_status_table(rows: Any, factors: Sequence[str]) -> Any:
    """Per agent (factor ``(all)``) and per agent and factor level: the parse failure rate and
    the parser's share of failed episodes."""
    import pandas as pd

    ok = rows[rows["error"].isna() & rows["parse_failures"].notna()].copy()
    if ok.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    ok["parse_failures"] = ok["parse_failures"].astype(int)
    ok["steps"] = ok["steps"].astype(int)
    records = []
    for agent, g in ok.groupby("agent", sort=False):
        records.append({"agent": agent, "factor": "(all)", "level": "(all)", **_summary(g)})
        for factor in factors:
            column = f"level_{factor}"
            if column not in g:
                continue
            for level, h in g.groupby(column, sort=True):
                records.append({"agent": agent, "factor": factor, "level": str(level), **_summary(h)})
    return pd.DataFrame.from_records(records, columns=list(COLUMNS))


def kinds_table(rows: Any) -> Any:
    """Per agent: attempted actions by parse status."""
    import pandas as pd

    ok = rows[rows["error"].isna() & rows["parse_status"].notna()]
    records = []
    for agent, g in ok.groupby("agent", sort=False):
        total: dict[str, int] = {}
        for value in g["parse_status"]:
            for k, n in _counts(value).items():
                total[k] = total.get(k, 0) + n
        records.append({"agent": agent, **{s: total.get(s, 0) for s in PARSE_STATUSES}})
    table = pd.DataFrame.from_records(records, columns=["agent", *PARSE_STATUSES])
    keep = ["agent"] + [s for s in PARSE_STATUSES if s == "ok" or table[s].sum() > 0]
    return table[keep]


def parse_status_section(rows: Any, factors: Sequence[str]) -> tuple[Section | None, dict[str, Any]]:
    """The section and its CSV table, or ``(None, {})`` for rows without parse status (older runs)."""
    if "parse_failures" not in rows or not rows["parse_failures"].notna().any():
        return None, {}
    table = parse_status_table(rows, factors)
    shown = table[table["parse_failures"] > 0] if len(table) else table
    pretty = shown.copy()
    for column in ("parse_failure_rate", "parser_share_of_failures"):
        pretty[column] = [("-" if v != v else f"{100 * v:.1f}%") for v in pretty[column]]
    text = [
        "Each attempted action has a parse status: ok, or malformed with its kind (invalid JSON, "
        "unclosed call, other malformed, unknown tool, bad argument, multiple actions, empty, a "
        "reply cut at the token limit, too long). An action that parsed but that the task refused "
        "counts as ok: that is the policy's failure. Parse failure rate: failures / attempted "
        "actions. Parser's share of failures: failed episodes with at least one parse failure / "
        "failed episodes. Rows: each agent overall, then each factor level where the parser "
        f"failed at least once (all levels in `{TABLE}`).",
    ]
    section = Section(
        "Parse status",
        text,
        tables=[("Attempted actions by parse status", kinds_table(rows)), ("By factor level", pretty)],
    )
    return section, {TABLE: table}
