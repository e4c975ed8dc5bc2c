"""The report's language-model section: what a model cost, where it broke, which harness to deploy.

Rows of language-model agents carry tokens, latency, invalid actions, truncated replies and
error kinds (:data:`harness_gym.rows.LLM_COLUMNS`). :func:`lm_summary` puts them side by side
per agent (and, with ``by``, per factor level): per episode, prompt and completion tokens
(reasoning tokens among them), seconds waiting for the model; per step, the rate of invalid
actions the model wrote (truncated replies left out) and per request the rate of replies cut
at ``max_tokens`` inside a thinking or tool-call block; tokens per success. :func:`deploy_table`
answers "which harness should I deploy this model under": the harness with the highest success,
compared with every other on the same task instances, and every harness it cannot be told
from called tied. :func:`lm_section` writes both as a report section.

Statistics (95%): success, Wilson at the number of task instances (:func:`mean_ci`); tokens
and seconds per episode, Student's t over task instances; rates and tokens per success, a
ratio of sums with cluster-robust intervals (:func:`ratio_ci`). The harness comparison is the
paired Newcombe interval of the difference in success (:func:`paired_binary`), Bonferroni over
the K - 1 comparisons with the best, so "a unique best" is claimed falsely for equal harnesses
at most 5% of the time (tests/test_lm_report.py measures it). Outage rows (an ``error``) are
left out of every figure and counted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from harness_gym.analysis.report_section import Section
from harness_gym.analysis.stats import mean_ci, paired_binary, ratio_ci

#: The columns :func:`lm_summary` reports (value columns; each has ``_low`` / ``_high``).
MEASURES = (
    "success",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "latency_s",
    "invalid_rate",
    "truncation_rate",
    "tokens_per_success",
    "tokens_per_episode",
)
#: Costs: positive quantities, whose intervals are taken on the log scale (never below zero).
POSITIVE = (
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "latency_s",
    "tokens_per_success",
    "tokens_per_episode",
)
#: Truncation above this share of requests is called out in the section's text.
TRUNCATION_WARNING = 0.01


def lm_rows(rows: Any) -> Any:
    """The rows of language-model agents (those that made model requests or recorded a model)."""
    if "llm_requests" not in rows or "model" not in rows:
        return rows.iloc[0:0]
    return rows[rows["model"].notna()]


def _num(frame: Any, column: str) -> Any:
    import pandas as pd

    if column not in frame:
        return pd.Series(0.0, index=frame.index)
    return pd.to_numeric(frame[column], errors="coerce").fillna(0.0).astype(float)


def _errors(value: Any) -> dict[str, int]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return {str(k): int(v) for k, v in value.items()} if isinstance(value, dict) else {}


def error_kinds(frame: Any) -> dict[str, int]:
    """Error kind -> count over the rows' ``llm_errors`` (``max_tokens``, ``truncated``,
    ``context_length``, ...)."""
    total: dict[str, int] = {}
    for value in frame.get("llm_errors", []):
        for kind, n in _errors(value).items():
            total[kind] = total.get(kind, 0) + n
    return dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0])))


def summarize(frame: Any, measures: Sequence[str] = MEASURES) -> dict[str, Any]:
    """One group's figures with 95% intervals (rows of finished, non-outage episodes)."""
    clusters = list(zip(frame["task_id"], frame["seed"]))
    steps = _num(frame, "steps").to_numpy()
    requests = _num(frame, "llm_requests").to_numpy()
    truncated = _num(frame, "truncated_replies").to_numpy()
    success = frame["success"].astype(float).to_numpy()
    tokens = (_num(frame, "prompt_tokens") + _num(frame, "completion_tokens")).to_numpy()
    invalid = (_num(frame, "invalid_actions").to_numpy() - truncated).clip(min=0)
    columns = {
        "prompt_tokens": "prompt_tokens",
        "completion_tokens": "completion_tokens",
        "reasoning_tokens": "reasoning_tokens",
        "latency_s": "llm_latency",
    }
    out: dict[str, Any] = {"episodes": len(frame), "steps": int(steps.sum()), "requests": int(requests.sum())}
    for name in measures:
        if name == "success":
            value = mean_ci(success, clusters=clusters)
        elif name in columns:
            value = mean_ci(_num(frame, columns[name]).to_numpy(), clusters=clusters)
        elif name == "invalid_rate":
            value = ratio_ci(invalid, steps, clusters, rate=True)
        elif name == "truncation_rate":
            value = ratio_ci(truncated, requests, clusters, rate=True)
        elif name == "tokens_per_episode":
            value = mean_ci(tokens, clusters=clusters)
        else:
            value = ratio_ci(tokens, success, clusters)
        if name in POSITIVE:
            value = positive_interval(*value)
        out[name], out[f"{name}_low"], out[f"{name}_high"] = value
    out["errors"] = ", ".join(f"{k} {n}" for k, n in error_kinds(frame).items()) or "-"
    return out


def positive_interval(value: float, low: float, high: float) -> tuple[float, float, float]:
    """An interval for a positive quantity (tokens, seconds): the same standard error on the log
    scale (delta method, ``value * exp(+/- half-width / value)``), so it never goes below zero
    and is skewed as costs are. Zero stays ``[0, high]``; NaN stays NaN."""
    if value != value or low != low or high != high:
        return value, low, high
    if value <= 0:
        return value, 0.0, max(high, 0.0)
    half = max(value - low, high - value, 0.0)
    return value, value * math.exp(-half / value), value * math.exp(half / value)


def lm_summary(rows: Any, by: Sequence[str] = ("agent",)) -> Any:
    """Per group of ``by`` (default: per agent): :func:`summarize` of its finished episodes."""
    import pandas as pd

    ok = _finished(lm_rows(rows))
    records = [
        {**dict(zip(by, key if isinstance(key, tuple) else (key,))), **summarize(g)}
        for key, g in ok.groupby(list(by), sort=False)
    ]
    return pd.DataFrame.from_records(records)


def by_factor(rows: Any, factors: Sequence[str], levels: dict[str, list[str]] | None = None) -> Any:
    """:func:`summarize` per agent, factor and level (over the other factors and the seeds)."""
    import pandas as pd

    ok = _finished(lm_rows(rows))
    records = []
    for agent, g in ok.groupby("agent", sort=False):
        for factor in factors:
            column = f"level_{factor}"
            if column not in g:
                continue
            order = (levels or {}).get(factor) or list(dict.fromkeys(g[column].dropna()))
            for level in order:
                part = g[g[column] == level]
                if len(part):
                    records.append({"agent": agent, "factor": factor, "level": level, **summarize(part)})
    return pd.DataFrame.from_records(records)


def _finished(frame: Any) -> Any:
    return frame[frame["error"].isna() & frame["success"].notna()]


def deploy_table(rows: Any, confidence: float = 0.95) -> Any:
    """Per language-model agent and harness: success, the paired difference from the best
    harness (Bonferroni over the comparisons), whether it is tied with the best, and tokens
    per success. ``verdict`` is ``best``, ``tied`` or ``worse``; rows are best first."""
    import pandas as pd

    ok = _finished(lm_rows(rows))
    records = []
    for agent, g in ok.groupby("agent", sort=False):
        per = {}
        for harness, h in g.groupby("harness_name", sort=False):
            outcome = dict(zip(zip(h["task_id"], h["seed"]), h["success"].astype(int)))
            figures = summarize(h, ("success", "truncation_rate", "tokens_per_success", "tokens_per_episode"))
            per[harness] = (outcome, figures, _levels_text(h))
        # best: highest success, then fewest tokens per success, then name
        ranked = sorted(
            per,
            key=lambda k: (-per[k][1]["success"], _cost_key(per[k][1]["tokens_per_success"]), str(k)),
        )
        best = ranked[0]
        k = len(ranked)
        level = 1 - (1 - confidence) / max(1, k - 1)
        for harness in ranked:
            outcome, s, text = per[harness]
            record = {
                "agent": agent,
                "harness": harness,
                "levels": text,
                "episodes": s["episodes"],
                "success": s["success"],
                "success_low": s["success_low"],
                "success_high": s["success_high"],
                "diff_vs_best": 0.0,
                "diff_low": math.nan,
                "diff_high": math.nan,
                "verdict": "best",
                "tokens_per_success": s["tokens_per_success"],
                "tokens_per_success_low": s["tokens_per_success_low"],
                "tokens_per_success_high": s["tokens_per_success_high"],
                "tokens_per_episode": s["tokens_per_episode"],
                "tokens_per_episode_low": s["tokens_per_episode_low"],
                "tokens_per_episode_high": s["tokens_per_episode_high"],
                "truncation_rate": s["truncation_rate"],
            }
            if harness != best:
                shared = sorted(set(outcome) & set(per[best][0]), key=repr)
                compared = paired_binary(
                    [per[best][0][u] for u in shared], [outcome[u] for u in shared], confidence=level
                )
                # best - this harness: tied unless the interval excludes 0
                record.update(
                    diff_vs_best=-compared.difference,
                    diff_low=-compared.high,
                    diff_high=-compared.low,
                    verdict="worse" if compared.n and compared.low > 0 else "tied",
                )
            records.append(record)
    return pd.DataFrame.from_records(records)


def _cost_key(value: float) -> float:
    return math.inf if value != value else value


def _levels_text(frame: Any) -> str:
    columns = [c for c in frame.columns if c.startswith("level_")]
    first = frame.iloc[0]
    return ", ".join(f"{c[len('level_') :]}={first[c]}" for c in columns if first[c] == first[c])


def deploy_text(deploy: Any) -> list[str]:
    """The answer to "which harness should I deploy this model under", one line per agent."""
    lines = []
    for agent, d in deploy.groupby("agent", sort=False):
        best = d.iloc[0]
        where = f"`{best['harness']}`" + (f" ({best['levels']})" if best["levels"] else "")
        if best["success"] == 0:
            lines.append(f"`{agent}`: no harness succeeded on any episode: nothing to deploy under yet.")
            continue
        shown = f"success {_pct(best['success'])} [{_pct(best['success_low'])}, {_pct(best['success_high'])}]"
        tied = d[d["verdict"] == "tied"]
        if len(d) == 1:
            lines.append(f"`{agent}`: one harness, {where}: {shown}.")
        elif tied.empty:
            closest = d.iloc[1]
            lines.append(
                f"`{agent}`: deploy under {where}: {shown}. It beats every other harness; the "
                f"closest, `{closest['harness']}`, by {_pp(-closest['diff_vs_best'])} "
                f"[{_pp(-closest['diff_high'])}, {_pp(-closest['diff_low'])}] "
                f"(paired, Bonferroni over {_comparisons(len(d) - 1)})."
            )
        else:
            group = d[d["verdict"] != "worse"]
            names = ", ".join(f"`{h}` ({_pct(s)})" for h, s in zip(group["harness"], group["success"]))
            cheapest = group.iloc[int(group["tokens_per_success"].map(_cost_key).to_numpy().argmin())]
            everyone = " (every harness of the sweep)" if len(group) == len(d) else ""
            text = (
                f"`{agent}`: a tie: {names}{everyone} cannot be told apart from the best ({shown} for "
                f"`{best['harness']}`; paired differences, Bonferroni over {_comparisons(len(d) - 1)}, "
                "include 0). Run more seeds to separate them"
            )
            if cheapest["tokens_per_success"] == cheapest["tokens_per_success"]:
                text += (
                    f", or choose among them by cost: `{cheapest['harness']}` uses the fewest tokens "
                    f"per success ({cheapest['tokens_per_success']:,.0f})"
                )
            lines.append(text + ".")
    return lines


def _comparisons(n: int) -> str:
    return f"{n} comparison" + ("" if n == 1 else "s")


def _pct(value: float) -> str:
    return "-" if value != value else f"{100 * value:.0f}%"


def _pp(value: float) -> str:
    return "-" if value != value else f"{100 * value:+.1f} pp"


def _interval(value: float, low: float, high: float, fmt: str) -> str:
    if value != value:
        return "-"
    if low != low or high != high:
        return format(value, fmt)
    return f"{format(value, fmt)} [{format(low, fmt)}, {format(high, fmt)}]"


def pretty(summary: Any, keys: Sequence[str]) -> Any:
    """A summary table for reading: each figure with its interval in one cell."""
    import pandas as pd

    if not len(summary):
        return pd.DataFrame()
    formats = {
        "success": ".0%",
        "prompt_tokens": ",.0f",
        "completion_tokens": ",.0f",
        "reasoning_tokens": ",.0f",
        "latency_s": ".2f",
        "invalid_rate": ".1%",
        "truncation_rate": ".1%",
        "tokens_per_success": ",.0f",
        "tokens_per_episode": ",.0f",
    }
    names = {
        "prompt_tokens": "tokens in / ep",
        "completion_tokens": "tokens out / ep",
        "reasoning_tokens": "of which reasoning",
        "latency_s": "model s / ep",
        "invalid_rate": "invalid / step",
        "truncation_rate": "truncated / reply",
        "tokens_per_success": "tokens / success",
        "tokens_per_episode": "tokens / ep",
    }
    out = summary[[*keys, "episodes"]].copy()
    for measure, fmt in formats.items():
        if measure == "reasoning_tokens" and not (summary[measure] > 0).any():
            continue
        out[names.get(measure, measure)] = [
            _interval(v, lo, hi, fmt)
            for v, lo, hi in zip(summary[measure], summary[f"{measure}_low"], summary[f"{measure}_high"])
        ]
    out["reply problems"] = summary["errors"]
    return out


def pretty_deploy(deploy: Any) -> Any:
    import pandas as pd

    if not len(deploy):
        return pd.DataFrame()
    out = deploy[["agent", "harness", "levels", "episodes"]].copy()
    bounds = zip(deploy.success, deploy.success_low, deploy.success_high)
    out["success"] = [_interval(v, lo, hi, ".0%") for v, lo, hi in bounds]
    out["vs best (pp)"] = [
        "-" if v == 0 and lo != lo else f"{100 * v:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        for v, lo, hi in zip(deploy.diff_vs_best, deploy.diff_low, deploy.diff_high)
    ]
    out["verdict"] = deploy["verdict"]
    out["tokens / success"] = [
        _interval(v, lo, hi, ",.0f")
        for v, lo, hi in zip(
            deploy.tokens_per_success, deploy.tokens_per_success_low, deploy.tokens_per_success_high
        )
    ]
    out["tokens / ep"] = [
        _interval(v, lo, hi, ",.0f")
        for v, lo, hi in zip(
            deploy.tokens_per_episode, deploy.tokens_per_episode_low, deploy.tokens_per_episode_high
        )
    ]
    out["truncated / reply"] = [_interval(v, math.nan, math.nan, ".1%") for v in deploy.truncation_rate]
    return out


def warnings(rows: Any, factors: Sequence[str]) -> list[str]:
    """Truncation, context-window and outage notes, in words, naming where they happen most."""
    lines = []
    all_lm = lm_rows(rows)
    outages = int(all_lm["error"].notna().sum())
    if outages:
        lines.append(
            f"{outages} language-model episode(s) recorded an error (an outage: server down, timeouts, "
            "...) and are left out of these figures; `--retry-errors` runs them again."
        )
    ok = _finished(all_lm)
    requests = float(_num(ok, "llm_requests").sum())
    truncated = float(_num(ok, "truncated_replies").sum())
    if requests and truncated / requests > TRUNCATION_WARNING:
        worst = _worst_level(ok, factors, "truncated_replies", "llm_requests")
        lines.append(
            f"Warning: {truncated / requests:.1%} of replies ({truncated:.0f} of {requests:.0f}) were cut "
            "at max_tokens inside a thinking or tool-call block (truncated, sent to the env as an empty "
            f"reply){worst}. Success there measures the token limit, not the harness: raise "
            "`--max-tokens` (or `?max_tokens=`) until no reply is truncated."
        )
    context = error_kinds(ok).get("context_length", 0)
    if context:
        worst = _worst_level(ok, factors, None, "llm_requests", kind="context_length")
        lines.append(
            f"Warning: {context} request(s) did not fit the model's context window (context_length){worst}: "
            "those steps got no reply at all, so the success there is the prompt's length, not the model."
        )
    return lines


def _worst_level(
    frame: Any, factors: Sequence[str], column: str | None, per: str, kind: str | None = None
) -> str:
    best: tuple[float, str] = (0.0, "")
    for factor in factors:
        col = f"level_{factor}"
        if col not in frame:
            continue
        for level, g in frame.groupby(col, sort=False):
            if column is not None:
                hits = float(_num(g, column).sum())
            else:
                hits = float(error_kinds(g).get(kind or "", 0))
            total = float(_num(g, per).sum())
            share = hits / total if total else 0.0
            if share > best[0]:
                best = (share, f"{factor}={level}")
    return f", most under {best[1]} ({best[0]:.1%} of its replies)" if best[1] else ""


def model_identity(rows: Any) -> list[str]:
    """One line per agent: the model it ran and what the server reported as its version."""
    lm = lm_rows(rows)
    lines = []
    for agent, g in lm.groupby("agent", sort=False):
        models = ", ".join(f"`{m}`" for m in dict.fromkeys(g["model"].dropna().astype(str))) or "unknown"
        versions = (
            ", ".join(dict.fromkeys(g["server_version"].dropna().astype(str)))
            if "server_version" in g
            else ""
        )
        weights = (
            ", ".join(dict.fromkeys(g["model_identity"].dropna().astype(str)))
            if "model_identity" in g
            else ""
        )
        lines.append(
            f"`{agent}`: model {models} (weights {weights or 'not recorded'}); server version "
            f"{versions or 'not recorded'}."
        )
    return lines


def lm_section(
    rows: Any, factors: Sequence[str], levels: dict[str, list[str]] | None = None
) -> tuple[Section | None, dict[str, Any]]:
    """The report section for language-model agents and its tables (None, {} without any)."""
    if not len(lm_rows(rows)):
        return None, {}
    summary = lm_summary(rows)
    factor_table = by_factor(rows, factors, levels)
    deploy = deploy_table(rows)
    text = [
        *model_identity(rows),
        "Per agent: tokens in (prompt) and out (completion, reasoning included) and seconds waiting for "
        "the model, per episode (Student t over task instances); invalid actions the model wrote per step "
        "(truncated replies left out) and replies truncated at max_tokens per reply (Wilson at the "
        "effective size of a ratio of sums); tokens per success (a ratio of sums, cluster-robust delta "
        "method). 95% intervals; outage rows left out. Costs (tokens, seconds) are positive: their "
        "intervals are taken on the log scale and never go below zero. Tokens per episode are given per "
        "harness too: a harness where nothing succeeds still has a cost. 'Reply problems' counts the "
        "model's replies by kind (cut at max_tokens, truncated, context length); crashed cells (an "
        "error in the row) are a different thing, left out of every figure and listed at the end.",
        *warnings(rows, factors),
        "Which harness should I deploy this model under? The harness with the highest success, "
        "compared with each other one on the same task instances (paired Newcombe interval of the "
        "difference, Bonferroni over the comparisons with the best); harnesses it cannot be told from "
        "are a tie, and a tie is said as one.",
        *deploy_text(deploy),
    ]
    section = Section(
        "Language-model agents",
        text,
        tables=[
            ("Per agent", pretty(summary, ["agent"])),
            ("Which harness to deploy under (best first)", pretty_deploy(deploy)),
            ("By harness factor level", pretty(factor_table, ["agent", "factor", "level"])),
        ],
    )
    tables = {"lm_summary.csv": summary, "lm_by_factor.csv": factor_table, "lm_deploy.csv": deploy}
    return section, tables
