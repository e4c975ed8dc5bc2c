"""A real language model trained through one harness: does what it learned survive another?

    .venv/bin/python experiments/lm_field_order.py [--quick | --long] [--out docs]

Published fact (DESIGN.md): on MiniWoB++, a post-trained model's success fell from 85.0% to
19.2% when only the order of the observation's fields was reversed. ``field_order.py``
reproduces it with small policies trained from scratch; this script does it with the embedded
language model (SmolLM2-135M-Instruct), trained with TRL's GRPO through harness envs, on CPU:

1. Evaluate the untrained model greedily on held-out seeds under the training harness (the
   canonical harness with two worked examples) and under one-factor changes of it.
2. Train it with GRPO under the training harness only, and evaluate the same table.
3. Train it through a balanced subset of a small harness space, with ``within`` and with
   ``cross`` grouping, and evaluate the same table (some of its rows are levels the subset
   never trained on).
4. Preference recovery: on states with exact action values, correlate the model's log-odds
   between actions with the harness's exact Q-differences, before and after training.

It writes ``lm_field_order.md`` and ``lm_field_order.png`` into ``--out``. Every number comes
from seeded runs; the intervals are 95% Wilson intervals over evaluation seeds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TASK = "ClickButton"
#: The training harness: canonical, plus two worked examples (without them this model does
#: not write actions at all; see docs/llm-agents.md) and one attempt per episode (the task
#: needs one step, so the ceiling stays 1.0; every episode then costs one model call, which
#: is what fits the default budget). Both are held fixed in every row below.
FEW_SHOT = 2
STEP_BUDGET = 1
#: One factor changed at a time, on top of the training harness.
SINGLE_FACTOR = {
    "canonical (trained)": {},
    "field order reversed": {"field_order": "reversed"},
    "format: markdown": {"obs_format": "markdown"},
    "format: yaml": {"obs_format": "yaml"},
    "tool style: python": {"tool_style": "python"},
    "tool naming: synonyms": {"tool_naming": "synonyms"},
}
#: The space of the multi-harness runs (its balanced subset is 4 harnesses; yaml and synonyms
#: are never trained on).
SPACE = {
    "field_order": ["canonical", "reversed"],
    "obs_format": ["json", "markdown"],
    "tool_style": ["json", "python"],
}


@dataclass(frozen=True)
class Budget:
    eval_seeds: int
    steps: int
    group_size: int
    groups_per_step: int
    train_seeds: int
    preference_seeds: int


BUDGETS = {
    "quick": Budget(
        eval_seeds=4, steps=2, group_size=2, groups_per_step=1, train_seeds=4, preference_seeds=3
    ),
    "default": Budget(
        eval_seeds=16, steps=6, group_size=4, groups_per_step=1, train_seeds=24, preference_seeds=10
    ),
    "long": Budget(
        eval_seeds=100, steps=60, group_size=8, groups_per_step=2, train_seeds=400, preference_seeds=40
    ),
}
LEARNING_RATE = 3e-5
MAX_REPLY_TOKENS = 32
TRAIN_SEED_START = 10_000
PREFERENCE_SEED_START = 20_000


def harness_of(changes: dict):  # noqa: ANN201
    from harness_gym.core.harness import Harness

    return Harness(few_shot=FEW_SHOT, step_budget=STEP_BUDGET).replace(**changes)


def evaluate_table(name: str, folder: Path, seeds: range, threads: int) -> dict[str, object]:
    from harness_gym.train.lm_eval import evaluate_folder

    table = {}
    for row, changes in SINGLE_FACTOR.items():
        harness = harness_of(changes)
        table[row] = evaluate_folder(
            folder, TASK, harness, seeds, threads=threads, max_tokens=MAX_REPLY_TOKENS
        )
        print(f"{name}: {row}: {table[row]}", flush=True)
    return table


def train(harnesses: list, grouping: str, budget: Budget, out: Path, seed: int, threads: int):  # noqa: ANN201
    from harness_gym.train.grpo_lm import GRPOLMConfig, train_grpo_lm
    from harness_gym.train.lm_rollout import RolloutConfig

    config = GRPOLMConfig(
        task=TASK,
        harnesses=harnesses,
        train_seeds=list(range(TRAIN_SEED_START, TRAIN_SEED_START + budget.train_seeds)),
        grouping=grouping,
        group_size=budget.group_size,
        groups_per_step=budget.groups_per_step,
        steps=budget.steps,
        learning_rate=LEARNING_RATE,
        rollout=RolloutConfig(max_reply_tokens=MAX_REPLY_TOKENS),
        seed=seed,
        threads=threads,
    )
    return train_grpo_lm(config, out, progress=False)


def preferences(folders: dict[str, Path], budget: Budget, threads: int) -> dict[str, object]:
    """Recovery of the exact Q-differences from each model's log-odds (against uniform)."""
    from harness_gym.analysis.preferences import UniformPolicy, collect_states, recover_preferences
    from harness_gym.train.lm_scorer import LMActionScorer

    harness = harness_of({})
    seeds = range(PREFERENCE_SEED_START, PREFERENCE_SEED_START + budget.preference_seeds)
    states = collect_states(TASK, harness, seeds, max_prefix=0)
    out = {}
    for name, folder in folders.items():
        scorer = LMActionScorer(folder, TASK, harness, threads=threads)
        out[name] = recover_preferences(scorer, UniformPolicy(), states, beta=1.0)
        scorer.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a smoke run (minutes; numbers meaningless)")
    size.add_argument("--long", action="store_true", help="more seeds and steps (hours on CPU)")
    parser.add_argument("--out", default="docs", help="where to write lm_field_order.md/.png")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args()
    budget = BUDGETS["quick" if args.quick else "long" if args.long else "default"]
    started = time.perf_counter()

    from harness_gym.analysis.sweep_spec import select_harnesses
    from harness_gym.core.space import HarnessSpace
    from harness_gym.llm.embedded import embedded_model_path

    base = Path(embedded_model_path())
    work = Path(tempfile.mkdtemp(prefix="lm-field-order-"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = range(budget.eval_seeds)
    space = HarnessSpace(SPACE, base=harness_of({}))
    points, _, _, _ = select_harnesses(space, "balanced")
    subset = [p.harness for p in points]
    tables: dict[str, dict] = {}
    runs: dict[str, object] = {}
    recovery: dict[str, object] = {}

    def write(done: bool = False) -> None:
        """Write what is measured so far (a long run leaves a readable page at every stage)."""
        minutes = (time.perf_counter() - started) / 60
        plot(tables, out / "lm_field_order.png")
        text = report(tables, runs, subset, recovery, budget, args, minutes, done)
        (out / "lm_field_order.md").write_text(text, "utf-8")

    tables["untrained"] = evaluate_table("untrained", base, seeds, args.threads)
    write()
    runs["single harness"] = train(
        [harness_of({})], "within", budget, work / "single", args.seed, args.threads
    )
    print(f"single harness: trained in {runs['single harness'].timings['train_seconds']:.0f} s", flush=True)
    tables["single harness"] = evaluate_table(
        "single harness", runs["single harness"].path, seeds, args.threads
    )
    write()
    recovery.update(
        preferences({"untrained": base, "single harness": runs["single harness"].path}, budget, args.threads)
    )
    write()
    for grouping in ("within", "cross"):
        name = f"balanced subset, {grouping}"
        runs[name] = train(subset, grouping, budget, work / grouping, args.seed, args.threads)
        print(f"{name}: trained in {runs[name].timings['train_seconds']:.0f} s", flush=True)
        tables[name] = evaluate_table(name, runs[name].path, seeds, args.threads)
        write()
    write(done=True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {out / 'lm_field_order.md'}", flush=True)


def plot(tables: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = list(SINGLE_FACTOR)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(tables)
    for k, (name, table) in enumerate(tables.items()):
        means = np.array([table[r].mean for r in rows])
        low = np.array([table[r].interval[0] for r in rows])
        high = np.array([table[r].interval[1] for r in rows])
        x = np.arange(len(rows)) + k * width
        ax.bar(x, 100 * means, width, label=name, yerr=[100 * (means - low), 100 * (high - means)], capsize=2)
    ax.set_xticks(np.arange(len(rows)) + 0.4 - width / 2)
    ax.set_xticklabels(rows, rotation=25, ha="right")
    ax.set_ylabel("greedy success on held-out seeds (%)")
    ax.set_title(f"SmolLM2-135M-Instruct on {TASK}: GRPO through harnesses, evaluated one factor at a time")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def paired_rows(tables: dict[str, dict]) -> list[str]:
    """Canonical against reversed order, seed by seed, for every model evaluated."""
    from harness_gym.analysis.stats import mcnemar_exact

    rows = []
    for name, table in tables.items():
        canonical, reversed_ = table["canonical (trained)"], table["field order reversed"]
        pairs = list(zip(canonical.outcomes, reversed_.outcomes, strict=True))
        first = sum(a and not b for a, b in pairs)
        second = sum(b and not a for a, b in pairs)
        rows.append(
            f"| {name} | {canonical.successes}/{canonical.episodes} | {reversed_.successes}/"
            f"{reversed_.episodes} | {first} | {second} | {mcnemar_exact(first, second):.2f} |"
        )
    return rows


def report(tables, runs, subset, recovery, budget: Budget, args, minutes: float, done: bool) -> str:  # noqa: ANN001
    names = list(tables)
    flag = " --quick" if args.quick else " --long" if args.long else ""
    lines = [
        "# The field-order experiment with a real language model",
        "",
        "Regenerate (the run time of the run shown is at the end of the page):",
        "",
        "```sh",
        f".venv/bin/python experiments/lm_field_order.py{flag} --out docs",
        "```",
        "",
        f"Model: the embedded SmolLM2-135M-Instruct, trained with TRL's GRPO "
        f"(`harness_gym.train`, full fine-tuning, fp32 on CPU, learning rate {LEARNING_RATE}, "
        f"{budget.steps} steps of {budget.groups_per_step} groups x {budget.group_size} episodes, "
        f"beta 0, seed {args.seed}). Task `{TASK}` under the canonical harness with {FEW_SHOT} "
        f"worked examples and a step budget of {STEP_BUDGET} (one attempt; the oracle needs one "
        f"step, so the ceiling is 1.0 in every row); training seeds {TRAIN_SEED_START}.., "
        "evaluation greedy on seeds "
        f"0..{budget.eval_seeds - 1} (never trained on), through the same path as "
        "`harness-gym eval --agent hf:FOLDER`. 95% Wilson intervals in brackets.",
        "",
        "![success by evaluation harness](lm_field_order.png)",
        "",
        "## One factor at a time",
        "",
        "| evaluation harness | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for row in SINGLE_FACTOR:
        lines.append(f"| {row} | " + " | ".join(str(tables[n][row]) for n in names) + " |")
    lines += [
        "",
        "The oracle succeeds on every seed under every row (each change is pure presentation; the "
        "harness checker asserts it), so whatever a model loses between rows is mismatch, not ceiling.",
        "",
        "## Field order, paired by seed",
        "",
        "Every row is evaluated on the same seeds, so the canonical and reversed rows pair up: "
        "seeds solved under one order only are the evidence for an order effect (exact McNemar "
        "test: each such seed is a fair coin if order does not matter).",
        "",
        "| model | canonical | reversed | solved under canonical only | under reversed only | p |",
        "|---|---|---|---|---|---|",
        *paired_rows(tables),
        "",
        "## Training runs",
        "",
        "Balanced subset of the space "
        + json.dumps(SPACE)
        + f" (with {FEW_SHOT} worked examples): "
        + ", ".join(f"`{h.id}`" for h in subset)
        + ". `within`: a GRPO group is one seed under one harness; `cross`: one seed under all four.",
        "",
        "Sampled success: the share of the training episodes (sampled at temperature 1) that "
        "succeeded, at the first step, the last step and over all steps.",
        "",
        "| run | seconds | seconds per step | env share of step time | sampled success, first step"
        " | last step | all steps |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        t = run.timings
        hist = run.history
        share = t["env_seconds"] / t["train_seconds"] if t["train_seconds"] else 0.0
        key = "rewards/episode_return/mean"  # success of the sampled training episodes
        values = [h.get(key, float("nan")) for h in hist] or [float("nan")]
        lines.append(
            f"| {name} | {t['train_seconds']:.0f} | {t['train_seconds'] / max(1, len(hist)):.1f} | "
            f"{100 * share:.3f}% | {values[0]:.2f} | {values[-1]:.2f} | {sum(values) / len(values):.2f} |"
        )
    lines += [
        "",
        "## Preference recovery",
        "",
        f"States: {budget.preference_seeds} seeds of `{TASK}` (the first step) under the training "
        "harness; exact Q-values by search. Implied differences are the model's log-odds between "
        "two legal actions (as the harness writes them), against a uniform reference.",
        "",
        "| model | pairs | Pearson | Spearman | sign agreement |",
        "|---|---|---|---|---|",
    ]
    for name, rec in recovery.items():
        lines.append(
            f"| {name} | {rec.n_pairs} | {rec.pearson:.3f} | {rec.spearman:.3f} "
            f"| {100 * rec.sign_agreement:.1f}% |"
        )
    lines += [
        "",
        "## Against the published result",
        "",
        "The published model (a post-trained LLM on MiniWoB++) fell from 85.0% to 19.2% when only "
        "the field order was reversed. This run differs in what can move the numbers: a 135M model "
        "whose untrained success is near zero and varies by presentation before any training (the "
        "untrained column), a few GRPO steps on CPU rather than a full post-training run, and one "
        "task of the package's own suite with 16 evaluation seeds, so only differences larger "
        "than the intervals mean anything. The published effect would show here as a trained "
        "model whose seeds are solved under canonical order only (the paired table, with a small "
        "p) while the untrained model's are not; equal columns mean the run did not train long "
        "enough to learn the harness (use `--long`).",
    ]
    status = "" if done else " (unfinished: the tables hold what was measured so far)"
    lines += ["", f"Run time: {minutes:.1f} minutes{status}.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
