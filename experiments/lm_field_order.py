"""A real language model post-trained through one harness: does what it learned survive another?

    .venv/bin/python experiments/lm_field_order.py [--quick | --long] [--out docs] [--precision auto]

Published fact (DESIGN.md): on MiniWoB++, a post-trained model's success fell from 85.0% to
19.2% when only the order of the observation's fields was reversed. ``field_order.py``
reproduces it with small policies trained from scratch; this script does it with the embedded
language model (SmolLM2-135M-Instruct), post-trained through harness envs on CPU:

1. Supervised fine-tuning (TRL's SFTTrainer, ``harness_gym.train.sft_lm``) on oracle
   demonstrations rendered by the training harness (the canonical harness, no worked
   examples, one attempt per episode), and on the same number of demonstrations spread over a
   balanced subset of a small harness space.
2. A few GRPO steps (``harness_gym.train.grpo_lm``) from the balanced-subset SFT model, with
   ``within`` and with ``cross`` grouping.
3. Greedy evaluation of every model on the same held-out seeds under the training harness and
   one-factor changes of it, and under the space's harness points the subset never trained
   on; every row's ceiling (the oracle's success there) is measured on the same seeds.
   Differences are paired by seed (exact McNemar, Newcombe intervals).
4. Preferences: each trained model's log-odds against its reference (the untrained model for
   SFT, the SFT model for GRPO) against the exact Q-differences, on states whose best action
   is unique and on states where several actions are best.

It writes ``lm_field_order.md`` and ``lm_field_order.png`` into ``--out`` (rewritten after
every stage, so a run stopped early leaves what it measured) and prints its timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TASK = "ClickButton"
#: One attempt per episode (the oracle needs one step, so every ceiling below is measured at
#: 1.0) and no worked examples: a fine-tuned model needs none, and the prompt is a third as long.
STEP_BUDGET = 1
#: The untrained model writes no actions without worked examples; it is shown with two as well.
UNTRAINED_FEW_SHOT = 2
#: One factor changed at a time, on top of the training harness.
SINGLE_FACTOR = {
    "canonical (trained)": {},
    "field order reversed": {"field_order": "reversed"},
    "format: markdown": {"obs_format": "markdown"},
    "format: yaml": {"obs_format": "yaml"},
    "tool style: python": {"tool_style": "python"},
    "tool naming: synonyms": {"tool_naming": "synonyms"},
}
#: The space of the multi-harness runs (its balanced subset is 4 of its 8 points; yaml and
#: synonyms are outside it).
SPACE = {
    "field_order": ["canonical", "reversed"],
    "obs_format": ["json", "markdown"],
    "tool_style": ["json", "python"],
}
#: Rows every model is evaluated under (the full table: the single-harness and subset SFT models).
PAIRED_ROWS = ("canonical (trained)", "field order reversed")


@dataclass(frozen=True)
class Budget:
    eval_seeds: int  # held-out seeds of the training harness and its reversed order (every model)
    factor_seeds: int  # held-out seeds of the other rows (the first of the same seeds)
    untrained_examples: bool  # also evaluate the untrained model with worked examples
    sft_seeds: int
    epochs: float
    batch_size: int
    grpo_steps: int
    group_size: int
    preference_seeds: int


BUDGETS = {
    "quick": Budget(
        eval_seeds=4,
        factor_seeds=2,
        untrained_examples=True,
        sft_seeds=8,
        epochs=1,
        batch_size=8,
        grpo_steps=1,
        group_size=2,
        preference_seeds=2,
    ),
    "default": Budget(
        eval_seeds=100,
        factor_seeds=50,
        untrained_examples=False,
        sft_seeds=64,
        epochs=1,
        batch_size=8,
        grpo_steps=3,
        group_size=4,
        preference_seeds=20,
    ),
    "long": Budget(
        eval_seeds=300,
        factor_seeds=300,
        untrained_examples=True,
        sft_seeds=512,
        epochs=2,
        batch_size=8,
        grpo_steps=20,
        group_size=8,
        preference_seeds=60,
    ),
}
SFT_LEARNING_RATE = 1e-4
GRPO_LEARNING_RATE = 3e-6
MAX_REPLY_TOKENS = 32
TRAIN_SEED_START = 10_000
PREFERENCE_SEED_START = 20_000


def harness_of(changes: dict, few_shot: int = 0):  # noqa: ANN201
    from harness_gym.core.harness import Harness

    return Harness(few_shot=few_shot, step_budget=STEP_BUDGET).replace(**changes)


def evaluation_rows(subset: list) -> dict[str, dict]:
    """The one-factor rows, then the space's points outside the subset not among them."""
    from harness_gym.core.harness import Harness

    rows = dict(SINGLE_FACTOR)
    trained = {h.id for h in subset}
    listed = {harness_of(c).id for c in rows.values()}
    base = Harness()
    for field_order in SPACE["field_order"]:
        for obs_format in SPACE["obs_format"]:
            for tool_style in SPACE["tool_style"]:
                changes = {
                    k: v
                    for k, v in {
                        "field_order": field_order,
                        "obs_format": obs_format,
                        "tool_style": tool_style,
                    }.items()
                    if getattr(base, k) != v
                }
                h = harness_of(changes)
                if h.id not in trained and h.id not in listed:
                    rows["held out: " + ", ".join(f"{k}={v}" for k, v in changes.items())] = changes
                    listed.add(h.id)
    return rows


def ceilings(rows: dict[str, dict], budget: Budget) -> dict[str, object]:
    """The oracle's greedy success under each row's harness on the evaluation seeds."""
    from harness_gym.baselines.agents import OracleAgent
    from harness_gym.core.registry import make_env
    from harness_gym.train.lm_eval import SuccessRate

    out = {}
    for name, changes in rows.items():
        env = make_env(TASK, harness_of(changes))
        agent = OracleAgent(env)
        wins = []
        for seed in row_seeds(name, budget):
            env.reset(seed=seed)
            _, _, _, _, info = env.step(agent.act("", {}))
            wins.append(bool(info.get("success")))
        env.close()
        out[name] = SuccessRate(sum(wins), len(wins), (), tuple(wins))
    return out


def row_seeds(row: str, budget: Budget) -> range:
    """Held-out seeds of a row: all of them for the field-order pair, the first ones elsewhere."""
    return range(budget.eval_seeds if row in PAIRED_ROWS else min(budget.factor_seeds, budget.eval_seeds))


def evaluate(
    name: str, folder: Path, rows: dict[str, dict], budget: Budget, threads: int, few_shot: int = 0
) -> dict:
    from harness_gym.train.lm_eval import evaluate_folder

    table = {}
    for row, changes in rows.items():
        start = time.perf_counter()
        table[row] = evaluate_folder(
            folder,
            TASK,
            harness_of(changes, few_shot),
            row_seeds(row, budget),
            threads=threads,
            max_tokens=MAX_REPLY_TOKENS,
        )
        print(f"{name}: {row}: {table[row]} ({time.perf_counter() - start:.0f} s)", flush=True)
    return table


def sft(harnesses: list, budget: Budget, out: Path, args: argparse.Namespace):  # noqa: ANN201
    from harness_gym.train.sft_lm import SFTLMConfig, train_sft_lm

    config = SFTLMConfig(
        task=TASK,
        harnesses=harnesses,
        train_seeds=list(range(TRAIN_SEED_START, TRAIN_SEED_START + budget.sft_seeds)),
        epochs=budget.epochs,
        batch_size=budget.batch_size,
        micro_batch_size=4,
        learning_rate=SFT_LEARNING_RATE,
        precision=args.precision,
        seed=args.seed,
        threads=args.threads,
    )
    return train_sft_lm(config, out, progress=False)


def grpo(model: Path, harnesses: list, grouping: str, budget: Budget, out: Path, args: argparse.Namespace):  # noqa: ANN201
    from harness_gym.train.grpo_lm import GRPOLMConfig, train_grpo_lm
    from harness_gym.train.lm_rollout import RolloutConfig

    config = GRPOLMConfig(
        task=TASK,
        harnesses=harnesses,
        train_seeds=list(range(TRAIN_SEED_START + budget.sft_seeds, TRAIN_SEED_START + 2 * budget.sft_seeds)),
        model=str(model),
        grouping=grouping,
        group_size=budget.group_size,
        steps=budget.grpo_steps,
        learning_rate=GRPO_LEARNING_RATE,
        precision=args.precision,
        rollout=RolloutConfig(max_reply_tokens=MAX_REPLY_TOKENS),
        seed=args.seed,
        threads=args.threads,
    )
    return train_grpo_lm(config, out, progress=False)


def preferences(pairs: dict[str, tuple[Path, Path]], budget: Budget, threads: int) -> dict[str, dict]:
    """Log-odds against the reference vs exact Q-differences, by whether the best action is unique.

    States: the first step of the training harness (budget 1: one right button) and states of
    the same harness with three attempts after a random prefix (a wrong click leaves the task
    solvable, so several actions can share the best value).
    """
    import numpy as np

    from harness_gym.analysis.preferences import collect_states, recover_preferences
    from harness_gym.train.lm_scorer import LMActionScorer

    seeds = range(PREFERENCE_SEED_START, PREFERENCE_SEED_START + budget.preference_seeds)
    harness = harness_of({})
    states = collect_states(TASK, harness, seeds, max_prefix=0) + collect_states(
        TASK, harness.replace(step_budget=3), seeds, max_prefix=1
    )
    unique = [s for s in states if int(np.sum(s.q == s.q.max())) == 1]
    tied = [s for s in states if int(np.sum(s.q == s.q.max())) > 1]
    out: dict[str, dict] = {}
    for name, (folder, reference) in pairs.items():
        policy = LMActionScorer(folder, TASK, harness, threads=threads)
        ref = LMActionScorer(reference, TASK, harness, threads=threads)
        out[name] = {
            label: recover_preferences(policy, ref, group, beta=1.0) if group else None
            for label, group in (("unique best action", unique), ("several best actions", tied))
        }
        policy.close()
        ref.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a smoke run (minutes; numbers meaningless)")
    size.add_argument(
        "--long", action="store_true", help="more seeds, demonstrations and steps (hours on CPU)"
    )
    parser.add_argument("--out", default="docs", help="where to write lm_field_order.md/.png")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (set explicitly)")
    parser.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16"),
        default="auto",
        help="training precision (auto: bf16 if the CPU has it)",
    )
    parser.add_argument(
        "--trained",
        help="a folder written by `harness-gym train --algo sft-lm`: skip training, evaluate it under its "
        "harness, each order reversed alone and both, and one-factor changes",
    )
    parser.add_argument("--eval-seeds", type=int, default=100, help="--trained: seeds of the order rows")
    parser.add_argument("--factor-seeds", type=int, default=50, help="--trained: seeds of the other rows")
    parser.add_argument(
        "--curve", action="append", default=[], help="--trained: NAME=FOLDER_OR_LOG, a learning curve to plot"
    )
    args = parser.parse_args()
    if args.trained:
        reversal_main(args)
        return
    budget = BUDGETS["quick" if args.quick else "long" if args.long else "default"]
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    import torch

    torch.set_num_threads(args.threads)
    from harness_gym.analysis.sweep.spec import select_harnesses
    from harness_gym.core.space import HarnessSpace
    from harness_gym.llm.embedded import embedded_model_path
    from harness_gym.train.precision import resolve_precision

    args.precision = resolve_precision(args.precision)
    base = Path(embedded_model_path())
    work = Path(tempfile.mkdtemp(prefix="lm-field-order-"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    space = HarnessSpace(SPACE, base=harness_of({}))
    points, _, _, _ = select_harnesses(space, "balanced")
    subset = [p.harness for p in points]
    rows = evaluation_rows(subset)
    paired = {k: rows[k] for k in PAIRED_ROWS}
    state = {
        "tables": {},
        "runs": {},
        "recovery": {},
        "stages": {},
        "cpu": {},
        "ceilings": ceilings(rows, budget),
        "subset": subset,
        "rows": rows,
        "load": [load_start],
    }

    cpu = {"last": time.process_time()}

    def stage(name: str, since: float) -> None:
        now = time.process_time()
        state["stages"][name] = time.perf_counter() - since
        state["cpu"][name] = now - cpu["last"]
        cpu["last"] = now
        state["load"].append(os.getloadavg()[0])
        write(out, state, budget, args, (time.perf_counter() - started) / 60, done=False)

    t = time.perf_counter()
    if budget.untrained_examples:
        state["tables"]["untrained, 2 worked examples"] = evaluate(
            "untrained (2 examples)", base, paired, budget, args.threads, UNTRAINED_FEW_SHOT
        )
    state["tables"]["untrained"] = evaluate("untrained", base, paired, budget, args.threads)
    stage("evaluate untrained", t)
    t = time.perf_counter()
    state["runs"]["SFT, single harness"] = sft([harness_of({})], budget, work / "sft-single", args)
    stage("SFT, single harness", t)
    t = time.perf_counter()
    state["tables"]["SFT, single harness"] = evaluate(
        "SFT single", work / "sft-single", rows, budget, args.threads
    )
    stage("evaluate SFT, single harness", t)
    t = time.perf_counter()
    state["runs"]["SFT, balanced subset"] = sft(subset, budget, work / "sft-subset", args)
    stage("SFT, balanced subset", t)
    t = time.perf_counter()
    state["tables"]["SFT, balanced subset"] = evaluate(
        "SFT subset", work / "sft-subset", rows, budget, args.threads
    )
    stage("evaluate SFT, balanced subset", t)
    for grouping in ("within", "cross"):
        name = f"SFT subset + GRPO {grouping}"
        t = time.perf_counter()
        state["runs"][name] = grpo(
            work / "sft-subset", subset, grouping, budget, work / f"grpo-{grouping}", args
        )
        stage(name, t)
        t = time.perf_counter()
        state["tables"][name] = evaluate(name, work / f"grpo-{grouping}", paired, budget, args.threads)
        stage(f"evaluate {name}", t)
    t = time.perf_counter()
    state["recovery"] = preferences(
        {
            "SFT single vs untrained": (work / "sft-single", base),
            "GRPO within vs SFT subset": (work / "grpo-within", work / "sft-subset"),
            "GRPO cross vs SFT subset": (work / "grpo-cross", work / "sft-subset"),
        },
        budget,
        args.threads,
    )
    stage("preferences", t)
    minutes = (time.perf_counter() - started) / 60
    write(out, state, budget, args, minutes, done=True)
    shutil.rmtree(work, ignore_errors=True)
    cpu_minutes = sum(state["cpu"].values()) / 60
    print(
        f"CPU time {cpu_minutes:.1f} min: {cpu_minutes / args.threads:.1f} min on {args.threads} idle cores"
    )
    print(
        f"run time {minutes:.1f} minutes; load average {state['load'][0]:.1f} at start, "
        f"{state['load'][-1]:.1f} at end"
    )
    for name, seconds in state["stages"].items():
        print(f"  {name}: {seconds:.0f} s ({state['cpu'][name]:.0f} CPU s)")
    print(f"wrote {out / 'lm_field_order.md'}", flush=True)


def write(
    out: Path, state: dict, budget: Budget, args: argparse.Namespace, minutes: float, done: bool
) -> None:
    plot(state, out / "lm_field_order.png")
    (out / "lm_field_order.md").write_text(report(state, budget, args, minutes, done), "utf-8")


def plot(state: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    tables = state["tables"]
    rows = list(state["rows"])
    fig, ax = plt.subplots(figsize=(12, 4.8))
    width = 0.8 / max(1, len(tables))
    for k, (name, table) in enumerate(tables.items()):
        x = np.array([i for i, r in enumerate(rows) if r in table]) + k * width
        got = [table[r] for r in rows if r in table]
        means = np.array([g.mean for g in got])
        low = np.array([g.interval[0] for g in got])
        high = np.array([g.interval[1] for g in got])
        ax.bar(x, 100 * means, width, label=name, yerr=[100 * (means - low), 100 * (high - means)], capsize=2)
    ax.axhline(100, color="black", lw=0.8, ls="--", label="ceiling (oracle, every row)")
    ax.set_xticks(np.arange(len(rows)) + 0.4 - width / 2)
    ax.set_xticklabels(rows, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("greedy success on held-out seeds (%)")
    ax.set_title(f"SmolLM2-135M-Instruct on {TASK}: SFT then GRPO through harnesses, evaluated by harness")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _pct(low: float, high: float) -> str:
    return f"[{100 * low:+.0f}, {100 * high:+.0f}]"


def paired_line(label: str, a, b) -> str:  # noqa: ANN001
    """One paired comparison of two evaluations on the same seeds."""
    from harness_gym.core.intervals import paired_binary

    n = min(len(a.outcomes), len(b.outcomes))  # the seeds both were evaluated on
    first, second = [int(x) for x in a.outcomes[:n]], [int(x) for x in b.outcomes[:n]]
    p = paired_binary(first, second)
    return (
        f"| {label} | {sum(first)}/{n} | {sum(second)}/{n} | {p.only_a} | {p.only_b} | "
        f"{100 * p.difference:+.1f} pp {_pct(p.low, p.high)} | {p.p_value:.3g} |"
    )


PAIRED_HEADER = [
    "| comparison | first | second | solved by the first only | by the second only | difference | p |",
    "|---|---|---|---|---|---|---|",
]


def report(state: dict, budget: Budget, args: argparse.Namespace, minutes: float, done: bool) -> str:
    tables, runs, rows = state["tables"], state["runs"], state["rows"]
    names = list(tables)
    flag = " --quick" if args.quick else " --long" if args.long else ""
    subset_ids = {h.id for h in state["subset"]}
    lines = [
        "# The field-order experiment with a real language model",
        "",
        "Regenerate (the run time of the run shown is at the end of the page):",
        "",
        "```sh",
        f".venv/bin/python experiments/lm_field_order.py{flag} --out docs",
        "```",
        "",
        f"Model: the embedded SmolLM2-135M-Instruct. Task `{TASK}`, one attempt per episode. "
        f"Training harness: the canonical harness without worked examples. SFT: TRL's SFTTrainer "
        f"(`harness_gym.train.sft_lm`), full fine-tuning in {args.precision}, {budget.sft_seeds} oracle "
        f"demonstrations (training seeds {TRAIN_SEED_START}..), {budget.epochs:g} epoch(s), batches of "
        f"{budget.batch_size}, learning rate {SFT_LEARNING_RATE}, loss on the agent's tokens only. GRPO: "
        f"{budget.grpo_steps} steps of one group of {budget.group_size} from the balanced-subset SFT "
        f"model, learning rate {GRPO_LEARNING_RATE}, beta 0. Evaluation: greedy, seeds "
        f"0..{budget.eval_seeds - 1} (never trained on) under the training harness and its reversed "
        f"order, seeds 0..{min(budget.factor_seeds, budget.eval_seeds) - 1} under the other rows "
        "(comparisons pair the seeds both rows share), through the path of `harness-gym eval "
        "--agent hf:FOLDER`. 95% Wilson intervals in brackets; paired differences with Newcombe "
        "intervals and exact McNemar p.",
        "",
        "![success by evaluation harness](lm_field_order.png)",
        "",
        "## Success by evaluation harness",
        "",
        "`ceiling`: the oracle's success through that harness on the same seeds, so what a model "
        "loses below it is mismatch. `(in subset)`: a harness the balanced-subset runs trained on.",
        "",
        "| evaluation harness | ceiling | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for row, changes in rows.items():
        mark = " (in subset)" if harness_of(changes).id in subset_ids else ""
        cells = [str(tables[n][row]) if row in tables[n] else "" for n in names]
        lines.append(f"| {row}{mark} | {state['ceilings'][row]} | " + " | ".join(cells) + " |")
    lines += ["", "## Field order, paired by seed", "", *PAIRED_HEADER]
    for name, table in tables.items():
        if all(r in table for r in PAIRED_ROWS):
            lines.append(
                paired_line(f"{name}: canonical vs reversed", table[PAIRED_ROWS[0]], table[PAIRED_ROWS[1]])
            )
    single, multi = tables.get("SFT, single harness"), tables.get("SFT, balanced subset")
    if single:
        lines += ["", "## Each one-factor change against the training harness (SFT, single harness)", ""]
        lines += PAIRED_HEADER
        for row in rows:
            if row != PAIRED_ROWS[0] and row in single:
                lines.append(paired_line(f"canonical vs {row}", single[PAIRED_ROWS[0]], single[row]))
    if single and multi:
        lines += [
            "",
            "## Single harness against balanced subset, on every evaluation harness",
            "",
            *PAIRED_HEADER,
        ]
        for row, changes in rows.items():
            mark = "in subset" if harness_of(changes).id in subset_ids else "held out"
            lines.append(paired_line(f"{row} ({mark}): single vs subset", single[row], multi[row]))
    within, cross = tables.get("SFT subset + GRPO within"), tables.get("SFT subset + GRPO cross")
    if within and cross:
        lines += ["", "## GRPO grouping: within against cross", "", *PAIRED_HEADER]
        for row in PAIRED_ROWS:
            lines.append(paired_line(f"{row}: within vs cross", within[row], cross[row]))
            lines.append(paired_line(f"{row}: within vs its SFT start", within[row], multi[row]))
    lines += [
        "",
        "## Training runs",
        "",
        "Balanced subset of the space "
        + json.dumps(SPACE)
        + ": "
        + ", ".join(f"`{h.id}`" for h in state["subset"])
        + ". SFT on the subset: training seed i demonstrated under subset harness i mod 4 (as many "
        "demonstrations as the single-harness run). GRPO `within`: a group is one seed under one "
        "harness; `cross`: one seed under all four.",
        "",
        "| run | seconds | steps | seconds per step | rows / tokens (SFT) or env share (GRPO) "
        "| first loss or reward | last |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        t = run.timings
        hist = run.history
        n = max(1, len(hist))
        if "rows" in t:  # an SFT run
            what = f"{t['rows']} rows, {t['tokens']} tokens ({t['trained_tokens']} in the loss)"
            key = "loss"
        else:
            what = f"env {100 * t['env_seconds'] / max(t['train_seconds'], 1e-9):.3f}%"
            key = "reward"
        values = [h.get(key, float("nan")) for h in hist] or [float("nan")]
        lines.append(
            f"| {name} | {t['train_seconds']:.0f} | {len(hist)} | {t['train_seconds'] / n:.1f} | {what} | "
            f"{values[0]:.3f} | {values[-1]:.3f} |"
        )
    lines += [
        "",
        "## Preferences",
        "",
        "Each trained model's log-odds between two legal actions (as the harness writes them), "
        "minus its reference's, against the exact Q-difference of the two (KL-regularized control "
        "predicts (Q(a) - Q(b)) / beta; correlations do not depend on beta). States: the training "
        f"harness's first step on {budget.preference_seeds} seeds (one right button: a unique best "
        "action) and the same harness with three attempts after a random prefix (a wrong click leaves "
        "the task solvable, so several actions share the best value).",
        "",
        "| model vs reference | states | pairs | Pearson | Spearman | sign agreement |",
        "|---|---|---|---|---|---|",
    ]
    for name, groups in state["recovery"].items():
        for label, rec in groups.items():
            if rec is None:
                lines.append(f"| {name} | {label} | 0 | | | |")
                continue
            lines.append(
                f"| {name} | {label} | {rec.n_pairs} | {rec.pearson:.3f} | {rec.spearman:.3f} "
                f"| {100 * rec.sign_agreement:.1f}% |"
            )
    lines += [
        "",
        "## Against the published result",
        "",
        "The published model (a post-trained LLM on MiniWoB++) fell from 85.0% to 19.2% when only "
        "the field order was reversed. Here the same question is asked of a 135M model post-trained "
        "through one harness: the paired field-order table is the test (a trained model whose "
        "seeds are solved under canonical order only, with a small p). Every row's ceiling is "
        "measured, so each drop is mismatch.",
    ]
    load = state["load"]
    status = "" if done else " (unfinished: the tables hold what was measured so far)"
    stages = "; ".join(f"{k} {v:.0f} s ({state['cpu'][k]:.0f} CPU s)" for k, v in state["stages"].items())
    cpu_minutes = sum(state["cpu"].values()) / 60
    lines += [
        "",
        f"Run time: {minutes:.1f} minutes{status} with {args.threads} torch threads; load average "
        f"{load[0]:.1f} at start, {max(load):.1f} at most, {load[-1]:.1f} at the end (above the "
        f"thread count, the machine was shared and times are longer than on idle cores). CPU time "
        f"{cpu_minutes:.1f} minutes, {cpu_minutes / args.threads:.1f} minutes of wall time on "
        f"{args.threads} idle cores. Stages: {stages}.",
        "",
    ]
    return "\n".join(lines)


# -- the reversal of a model trained by ``harness-gym train --algo sft-lm`` ------------------------


def reversal_rows(trained) -> dict[str, object]:  # noqa: ANN001
    """The trained harness, each order reversed alone and both, then one-factor changes of it."""
    flip = {"canonical": "reversed", "reversed": "canonical"}
    element = {"element_order": flip[trained.element_order]}
    fields = {"field_order": "reversed" if trained.field_order == "canonical" else "canonical"}
    changes = {
        "trained harness": {},
        f"element order {element['element_order']}": element,
        f"field order {fields['field_order']}": fields,
        "both orders changed": {**element, **fields},
        "format: markdown": {"obs_format": "markdown"},
        "format: yaml": {"obs_format": "yaml"},
        "tool style: python": {"tool_style": "python"},
        "tool naming: synonyms": {"tool_naming": "synonyms"},
    }
    return {name: trained.replace(**c) for name, c in changes.items()}


def read_curve(source: str) -> list[tuple[int, int, int]]:
    """(step, successes, episodes) of a learning curve: a training folder's record, or the log of
    a run stopped before it saved one (its ``step N: held-out greedy success`` lines)."""
    import re

    path = Path(source)
    record = path / "harness_gym_training.json"
    if record.is_file():
        history = json.loads(record.read_text("utf-8"))["history"]
        return [(h["step"], h["held_out"], h["episodes"]) for h in history if "held_out" in h]
    points = []
    for m in re.finditer(
        r"step (\d+): held-out greedy success ([\d.]+)%", path.read_text("utf-8", "replace")
    ):
        points.append((int(m[1]), round(float(m[2]) * 30 / 100), 30))
    return points


def reversal_main(args: argparse.Namespace) -> None:
    """Evaluate ``--trained`` under its harness and each change; write the report and the curves."""
    import torch

    from harness_gym.core.harness import Harness

    torch.set_num_threads(args.threads)
    started, load = time.perf_counter(), [os.getloadavg()[0]]
    folder = Path(args.trained)
    trained = Harness.from_yaml(folder / "harness.yaml")
    rows = reversal_rows(trained)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables, ceilings_, seconds = {}, {}, {}
    from harness_gym.baselines.agents import OracleAgent
    from harness_gym.core.registry import make_env
    from harness_gym.train.lm_eval import SuccessRate, evaluate_folder

    paired = list(rows)[:4]
    curves = {name: read_curve(src) for name, src in (c.split("=", 1) for c in args.curve)}
    for name, harness in rows.items():
        seeds = range(args.eval_seeds if name in paired else args.factor_seeds)
        env = make_env(TASK, harness)
        wins = []
        for seed in seeds:
            env.reset(seed=seed)
            wins.append(bool(env.step(OracleAgent(env).act("", {}))[4]["success"]))
        ceilings_[name] = SuccessRate(sum(wins), len(wins), (), tuple(wins))
        t = time.perf_counter()
        tables[name] = evaluate_folder(
            folder, TASK, harness, seeds, threads=args.threads, max_tokens=MAX_REPLY_TOKENS
        )
        seconds[name] = time.perf_counter() - t
        load.append(os.getloadavg()[0])
        print(f"{name}: {tables[name]} ({seconds[name]:.0f} s)", flush=True)
        minutes = (time.perf_counter() - started) / 60
        text = reversal_report(args, folder, trained, rows, tables, ceilings_, curves, seconds, load, minutes)
        (out / "lm_field_order.md").write_text(text, "utf-8")
        plot_curves(curves, out / "lm_field_order.png")
    print(f"wrote {out / 'lm_field_order.md'} ({(time.perf_counter() - started) / 60:.1f} min)")


def plot_curves(curves: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness_gym.analysis.stats import wilson

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, points in curves.items():
        steps = [p[0] for p in points]
        means = [100 * p[1] / p[2] for p in points]
        low = [m - 100 * wilson(p[1], p[2])[0] for m, p in zip(means, points, strict=True)]
        high = [100 * wilson(p[1], p[2])[1] - m for m, p in zip(means, points, strict=True)]
        ax.errorbar(steps, means, yerr=[low, high], marker="o", capsize=2, label=name)
    ax.axhline(80, color="grey", lw=0.8, ls=":", label="80% target")
    ax.set_xlabel("optimizer step (8 demonstrations each)")
    ax.set_ylabel("greedy success, 30 validation seeds (%)")
    ax.set_title(f"SmolLM2-135M SFT on {TASK}, the package's full prompt, by element order")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def reversal_report(  # noqa: PLR0913
    args,
    folder,
    trained,
    rows,
    tables,
    ceilings_,
    curves,
    seconds,
    load,
    minutes,  # noqa: ANN001
) -> str:
    record = json.loads((Path(folder) / "harness_gym_training.json").read_text("utf-8"))
    t, config = record["timings"], record["config"]
    names = list(rows)
    lines = [
        "# The field-order experiment with a real language model",
        "",
        "Regenerate (train first; the run time of the run shown is at the end of the page):",
        "",
        "```sh",
        "harness-gym train --algo sft-lm --env harness_gym/ClickButton-JsonElementsReversed-v0 \\",
        "    --precision bf16 --threads 1 --micro-batch 8 --eval-every 10 --stop-at 0.9 \\",
        "    --train-seeds 1600 --out runs/sft-text-first",
        f".venv/bin/python experiments/lm_field_order.py --trained {folder} --eval-seeds {args.eval_seeds} "
        f"--factor-seeds {args.factor_seeds} --threads {args.threads} \\",
        "    " + " ".join(f"--curve {shlex.quote(c)}" for c in args.curve) + " --out docs",
        "```",
        "",
        f"Model: the embedded SmolLM2-135M-Instruct, fine-tuned by `harness-gym train --algo sft-lm` (TRL's "
        f"SFTTrainer, full fine-tuning, {t['precision']}) under harness `{trained.describe()}` "
        "(the package's "
        f"full prompt: system prompt, nested page; task `{TASK}`, its own step budget): lr "
        f"{config['learning_rate']}, {config['warmup_steps']} warm-up steps, {config['lr_scheduler']} decay, "
        f"batches of {config['batch_size']}; stopped by `--stop-at {config['stop_at']}` after "
        f"{t['steps']} steps "
        f"({t['steps'] * config['batch_size']} demonstrations), {t['train_seconds']:.0f} s of training on 1 "
        "torch thread of a shared, heavily loaded 2-core machine (load average 4-22 during the run). "
        "Evaluation: "
        f"greedy generation (not scoring), seeds 0..{args.eval_seeds - 1} (never trained on; the "
        f"learning curve used validation seeds 5000..5029) for the first four rows, "
        f"0..{args.factor_seeds - 1} for the others, "
        "through the path of `harness-gym eval --agent hf:FOLDER`. 95% Wilson intervals; paired differences "
        "with Newcombe intervals and exact McNemar p. `ceiling`: the oracle through the same harness on the "
        "same seeds, so every drop is mismatch.",
        "",
        "## Success by evaluation harness",
        "",
        "| evaluation harness | ceiling | trained model | seconds |",
        "|---|---|---|---|",
    ]
    for name in names:
        if name in tables:
            lines.append(f"| {name} | {ceilings_[name]} | {tables[name]} | {seconds[name]:.0f} |")
    lines += ["", "## Each change against the trained harness, paired by seed", "", *PAIRED_HEADER]
    for name in names[1:]:
        if name in tables:
            lines.append(paired_line(f"trained vs {name}", tables[names[0]], tables[name]))
    lines += [
        "",
        "## Learning curves",
        "",
        "![held-out success by step](lm_field_order.png)",
        "",
        "Greedy success on 30 validation seeds every 10 optimizer steps, measured during training "
        "(`--eval-every 10`); each run on 1 torch thread beside the other, the machine shared.",
        "",
        "| run | "
        + " | ".join(f"step {s}" for s in sorted({p[0] for c in curves.values() for p in c}))
        + " |",
    ]
    all_steps = sorted({p[0] for c in curves.values() for p in c})
    lines.append("|---|" + "---|" * len(all_steps))
    for name, points in curves.items():
        got = {p[0]: f"{p[1]}/{p[2]}" for p in points}
        lines.append(f"| {name} | " + " | ".join(got.get(s, "") for s in all_steps) + " |")
    lines += [
        "",
        f"Run time of this evaluation: {minutes:.1f} minutes with {args.threads} torch thread(s); load "
        f"average {load[0]:.1f} at start, {max(load):.1f} at most, {load[-1]:.1f} at the end (the machine "
        "was shared; "
        "times on idle cores are shorter).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
