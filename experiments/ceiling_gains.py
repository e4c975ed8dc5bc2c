"""Harnesses worth retraining under: a fixed-model comparison rejects some that win after retraining.

    .venv/bin/python experiments/ceiling_gains.py [--task ClickCheckboxes|ChooseList]
        [--quick | --long] [--retrain-from base|shrink-perturb|scratch] [--workers 2] [--out docs]

Published claim (DESIGN.md): every new harness that a fixed-model comparison rejects but that
raises the ceiling outperforms the original agent after further training under it, and the
ceiling and mismatch measured beforehand predict these gains. This script tests it on the
package's own web task, on CPU:

1. Train MaskablePPO (the package's SB3 adapter) under a base harness that caps the ceiling
   below 1, one policy per seed (:data:`SETUPS`): ``ClickCheckboxes`` with a 2-step budget (a
   page with two boxes to tick needs 3), or ``ChooseList`` with a 1-step budget (only pages
   whose list already shows the item can be submitted at once); ``invalid_action=end``, no
   history.
2. Before any retraining, for each candidate harness of the factor space (some raise the
   ceiling, some only change the presentation, some lower the ceiling) measure: its exact
   ceiling (``harness_gym.analysis.ceiling``), the base policy's deployed success under it (the
   fixed-model comparison; "rejected" when below the base policy's success under the base
   harness) and its mismatch (ceiling - deployed), paired per episode seed.
3. Retrain each seed's base policy under each candidate for the same number of steps, and, as
   the control, continue it under the base harness for that budget (``--retrain-from``: continue
   it as it is, after shrink and perturb, or train a fresh policy instead: continuing a
   converged policy can stall where a fresh one learns, docs/choosing-a-harness.md).
4. Report, paired by seed: the realized gain (retrained success under the candidate minus the
   original agent's success under the base harness) with a 95% interval over training seeds;
   how many rejected-but-higher-ceiling candidates beat the original; and how four predictors
   computed in step 2 rank the realized gains (Spearman with a Fisher-z interval over
   candidates, and each predictor's top-1 pick).

The mismatch forecast used by "ceiling - forecast": training changes only the mismatch (the
KL-regularized view), so a policy retrained to convergence under a candidate is forecast to
reach the same share of the candidate's ceiling as the base policy reached of the base
ceiling: forecast mismatch = ceiling x (base mismatch / base ceiling), predicted success =
ceiling x (base success / base ceiling). The fixed-model comparison is ceiling minus the
*current* mismatch; this predictor replaces the current mismatch (which retraining removes) by
the one training leaves. It writes ``ceiling_gains.md`` and ``ceiling_gains.png`` into ``--out``
(``ceiling_gains_<task>.md`` / ``.png`` for a task other than ClickCheckboxes).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness_gym import Harness


@dataclass(frozen=True)
class Setup:
    """A task, the base harness that caps its ceiling, and candidate changes of that base."""

    task: str
    base: Harness
    #: Why the base harness caps the ceiling (printed beside it).
    cap: str
    #: Candidates, each a change of ``base``. The quick run takes the first QUICK of them.
    candidates: dict[str, dict[str, Any]]
    #: What ``--long`` adds.
    long_extra: dict[str, dict[str, Any]]

    @property
    def env_id(self) -> str:
        return f"harness_gym/{self.task}-v0"

    def stem(self, recipe: str = "base") -> str:
        """The output files' name: ``ceiling_gains`` for the first setup, else with the task, and
        with the retraining recipe when it is not the default's."""
        name = "ceiling_gains" if self.task == DEFAULT_TASK else f"ceiling_gains_{self.task.lower()}"
        return name if recipe == "base" else f"{name}_{recipe.replace('-', '_')}"


DEFAULT_TASK = "ClickCheckboxes"
SETUPS: dict[str, Setup] = {
    # The recipe stalls here (0.15 of a 0.47 ceiling after 100k steps): a test of the claim
    # only where retraining converges, which it does not (docs/ceiling_gains.md).
    "ClickCheckboxes": Setup(
        "ClickCheckboxes",
        Harness(step_budget=2, invalid_action="end", history_window=0),
        "a page with two boxes to tick needs 3 steps",
        {
            "budget 4, fields reversed": {"step_budget": 4, "field_order": "reversed"},
            "markdown": {"obs_format": "markdown"},
            "budget 4": {"step_budget": 4},
            "budget 1": {"step_budget": 1},
            "budget 3, markdown": {"step_budget": 3, "obs_format": "markdown"},
            "budget 3": {"step_budget": 3},
            "fields reversed": {"field_order": "reversed"},
            "budget 6, tool style python": {"step_budget": 6, "tool_style": "python"},
            "budget 4, history 2, invalid=feedback": {
                "step_budget": 4,
                "history_window": 2,
                "invalid_action": "feedback",
            },
            "tool style python": {"tool_style": "python"},
            "budget 1, fields reversed": {"step_budget": 1, "field_order": "reversed"},
            "budget 3, extra fields step+last_error": {
                "step_budget": 3,
                "extra_fields": ("step", "last_error"),
            },
        },
        {
            "budget 5, yaml": {"step_budget": 5, "obs_format": "yaml"},
            "xml": {"obs_format": "xml"},
            "budget 3, tool naming opaque": {"step_budget": 3, "tool_naming": "opaque"},
            "budget 4, tool order reversed": {"step_budget": 4, "tool_order": "reversed"},
        },
    ),
    # MaskablePPO learns this task (0.67 after 100k steps under a 2-step budget, ceiling 1.0).
    "ChooseList": Setup(
        "ChooseList",
        Harness(step_budget=1, invalid_action="end", history_window=0),
        "only a list that already shows the item can be submitted in one step",
        {
            "budget 2, fields reversed": {"step_budget": 2, "field_order": "reversed"},
            "markdown": {"obs_format": "markdown"},
            "budget 2": {"step_budget": 2},
            "budget 2, markdown": {"step_budget": 2, "obs_format": "markdown"},
            "fields reversed": {"field_order": "reversed"},
            "budget 3, tool style python": {"step_budget": 3, "tool_style": "python"},
            "tool style python": {"tool_style": "python"},
            "budget 2, extra fields step+last_error": {
                "step_budget": 2,
                "extra_fields": ("step", "last_error"),
            },
        },
        {
            "budget 3, yaml": {"step_budget": 3, "obs_format": "yaml"},
            "xml": {"obs_format": "xml"},
        },
    ),
}
CONTROL = "control: continue under base"
QUICK = 4
EVAL_SEED0 = 1_000_000  # evaluation episodes; training draws its own
PREDICTORS = {
    "fixed-model comparison": "fixed",
    "ceiling alone": "ceiling",
    "mismatch alone (lower first)": "neg_mismatch",
    "ceiling - mismatch forecast": "forecast",
}


# -- jobs (each runs in a worker process) --------------------------------------------------------


def _train_base(task: str, seed: int, steps: int, folder: str) -> str:
    import torch

    from harness_gym.baselines import sb3

    torch.set_num_threads(1)
    setup = SETUPS[task]
    trained = sb3.train("maskable_ppo", setup.env_id, steps=steps, seed=seed, harness=setup.base, n_envs=4)
    return str(trained.save(Path(folder) / f"base-{seed}"))


#: How a candidate's policy is trained: each recipe's label in the page, and the control's.
RECIPES = {
    "base": ("continue the base policy", "control: continue under base"),
    "shrink-perturb": (
        "continue the base policy after shrink and perturb (theta <- 0.4 theta + 0.1 theta_fresh)",
        "control: shrink-perturb under base",
    ),
    "scratch": ("train a fresh policy (its own seed)", "control: fresh policy under base"),
}


def _retrain(
    task: str,
    base_dir: str,
    harness: dict[str, Any],
    steps: int,
    seed: int,
    n_eval: int,
    recipe: str = "base",
) -> list[float]:
    """Train a policy under ``harness`` for ``steps`` by ``recipe``; its successes under ``harness``.

    ``base`` continues the base policy (the claim's "further training"); ``shrink-perturb``
    first moves its weights toward a fresh initialization (Ash & Adams 2020, the usual remedy for
    a warm-started network that has lost plasticity); ``scratch`` trains a fresh policy under
    the candidate (seeded apart from the base policy, so the control is an independent replicate
    of the base's training): what the candidate lets the recipe learn.
    """
    import torch
    from stable_baselines3.common.env_util import make_vec_env

    from harness_gym.baselines import sb3

    torch.set_num_threads(1)
    target = Harness.from_dict(harness)
    if recipe == "scratch":
        fresh = sb3.train(
            "maskable_ppo", SETUPS[task].env_id, steps=steps, seed=seed, harness=target, n_envs=4
        )
        return _successes(task, fresh, target, n_eval)
    torch.manual_seed(seed)
    trained = sb3.load(base_dir)
    if recipe == "shrink-perturb":
        shrink_and_perturb(trained.model)

    def factory():
        return sb3.adapt(
            sb3.make_harness_env(SETUPS[task].env_id, target), trained.max_actions, trained.features
        )

    venv = make_vec_env(factory, n_envs=4, seed=seed + 7_919)
    trained.model.set_env(venv)
    trained.model.set_random_seed(seed + 7_919)
    trained.model.learn(total_timesteps=int(steps), reset_num_timesteps=True)
    venv.close()
    return _successes(task, trained, target, n_eval)


def shrink_and_perturb(model: Any, shrink: float = 0.4, perturb: float = 0.1) -> None:
    """Move an SB3 model's policy weights toward a fresh initialization, in place.

    theta <- shrink x theta + perturb x theta_fresh, theta_fresh drawn as the policy's own
    initializer draws it (from torch's current generator). Ash & Adams 2020 ("On Warm-Starting
    Neural Network Training"): a warm-started network that stopped learning learns again.
    """
    import torch

    fresh = type(model.policy)(
        model.observation_space, model.action_space, model.lr_schedule, **model.policy_kwargs
    )
    with torch.no_grad():
        for weight, fresh_weight in zip(model.policy.parameters(), fresh.parameters(), strict=True):
            weight.mul_(shrink).add_(perturb * fresh_weight)


def _evaluate(task: str, base_dir: str, harness: dict[str, Any], n_eval: int) -> list[float]:
    import torch

    from harness_gym.baselines import sb3

    torch.set_num_threads(1)
    return _successes(task, sb3.load(base_dir), Harness.from_dict(harness), n_eval)


def _successes(task: str, trained: Any, harness: Harness, n_eval: int) -> list[float]:
    from harness_gym.baselines import sb3

    rows = sb3.evaluate(trained, SETUPS[task].env_id, harness=harness, episodes=n_eval, seed=EVAL_SEED0)
    return [float(r.success) for r in rows]


def _ceilings(task: str, harness: dict[str, Any], n_eval: int) -> list[float]:
    from harness_gym.analysis.ceiling import ceiling

    est = ceiling(task, Harness.from_dict(harness), range(EVAL_SEED0, EVAL_SEED0 + n_eval), node_limit=20_000)
    if not est.exact:
        raise RuntimeError(f"the ceiling search of {harness} stopped at its node limit: raise it")
    return est.values


# -- statistics ----------------------------------------------------------------------------------


def seed_interval(per_seed: list[float]) -> tuple[float, float, float]:
    """Mean over training seeds and its 95% Student-t interval (the seed is the unit)."""
    from harness_gym.analysis.stats import t975

    x = np.asarray(per_seed, float)
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan, math.nan
    half = t975(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return mean, mean - half, mean + half


def positive_int(text: str) -> int:
    """An argparse type: a count of at least 1 (0 would silently mean the mode's default)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"needs a whole number of at least 1, got {text!r}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a smoke run (small budgets, 4 candidates)")
    size.add_argument("--long", action="store_true", help="more candidates, seeds and steps")
    parser.add_argument("--task", default=DEFAULT_TASK, choices=list(SETUPS), help="task and base harness")
    parser.add_argument("--out", default="docs", help="folder for ceiling_gains.md and ceiling_gains.png")
    parser.add_argument("--workers", type=positive_int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--seeds", type=positive_int, default=None, help="training seeds (default 4; quick 2; long 8)"
    )
    parser.add_argument("--candidates", type=positive_int, default=None, help="the first N candidates only")
    parser.add_argument(
        "--retrain-steps",
        type=positive_int,
        default=None,
        help="steps under each candidate (default 40,000; quick 6,000; long 80,000; with "
        "--retrain-from scratch the base's steps)",
    )
    parser.add_argument(
        "--retrain-from",
        default="base",
        choices=list(RECIPES),
        help="base: continue the base policy (default); shrink-perturb: continue it after moving its "
        "weights toward a fresh initialization; scratch: a fresh policy under each candidate",
    )
    parser.add_argument(
        "--from-results",
        type=Path,
        default=None,
        metavar="JSON",
        help="re-render the page and plot from a run's saved measurements (<page>.json), no training",
    )
    args = parser.parse_args()
    if args.from_results is not None:
        given = [
            a
            for a in vars(args)
            if a not in ("from_results", "out") and getattr(args, a) != parser.get_default(a)
        ]
        if given:
            flags = ", ".join("--" + g.replace("_", "-") for g in given)
            parser.error(f"--from-results re-renders a finished run; drop {flags}")
        try:
            record = json.loads(args.from_results.read_text())
        except (OSError, ValueError) as exc:
            parser.error(f"--from-results: cannot read {args.from_results}: {exc}")
        missing = [k for k in RECORD_KEYS if not isinstance(record, dict) or k not in record]
        if missing:
            parser.error(f"--from-results: {args.from_results} is not a saved run (no {', '.join(missing)})")
        render(record, Path(args.out))
        return
    start = time.perf_counter()
    mode = "quick" if args.quick else "long" if args.long else "default"
    n_seeds = args.seeds or {"quick": 2, "default": 4, "long": 8}[mode]
    base_steps = {"quick": 12_000, "default": 100_000, "long": 200_000}[mode]
    retrain_steps = args.retrain_steps or (
        base_steps  # a fresh policy gets the base policy's budget
        if args.retrain_from == "scratch"
        else {"quick": 6_000, "default": 40_000, "long": 80_000}[mode]
    )
    n_eval = {"quick": 100, "default": 300, "long": 500}[mode]
    setup, task = SETUPS[args.task], args.task
    names = list(setup.candidates)[: args.candidates or (QUICK if args.quick else None)]
    candidates = {n: setup.candidates[n] for n in names}
    if args.long and args.candidates is None:
        candidates.update(setup.long_extra)
    specs = {name: setup.base.replace(**change).to_dict() for name, change in candidates.items()}
    base_spec = setup.base.to_dict()
    seeds = list(range(n_seeds))
    log: list[str] = []

    def say(line: str) -> None:
        log.append(line)
        print(line, flush=True)

    with tempfile.TemporaryDirectory() as folder, ProcessPoolExecutor(args.workers) as pool:
        ceil_jobs = {
            n: pool.submit(_ceilings, task, s, n_eval) for n, s in [("base", base_spec), *specs.items()]
        }
        trains = [pool.submit(_train_base, task, seed, base_steps, folder) for seed in seeds]
        base_dirs = {seed: job.result() for seed, job in zip(seeds, trains)}
        say(f"trained {n_seeds} base policies ({base_steps:,} steps each)")
        ceilings = {n: np.asarray(j.result()) for n, j in ceil_jobs.items()}
        before_jobs = {
            (n, s): pool.submit(_evaluate, task, base_dirs[s], spec, n_eval)
            for n, spec in [("base", base_spec), *specs.items()]
            for s in seeds
        }
        after_jobs = {
            (n, s): pool.submit(
                _retrain, task, base_dirs[s], spec, retrain_steps, 1_000 + s, n_eval, args.retrain_from
            )
            for n, spec in [(CONTROL, base_spec), *specs.items()]
            for s in seeds
        }
        before = {k: np.asarray(j.result()) for k, j in before_jobs.items()}
        for (n, s), j in after_jobs.items():
            label = RECIPES[args.retrain_from][1] if n == CONTROL else n
            say(f"retrained seed {s} under {label}: success {np.mean(j.result()):.3f}")
        after = {k: np.asarray(j.result()) for k, j in after_jobs.items()}

    minutes = (time.perf_counter() - start) / 60
    settings = {
        "mode": mode,
        "task": task,
        "seeds": n_seeds,
        "base_steps": base_steps,
        "retrain_steps": retrain_steps,
        "n_eval": n_eval,
        "workers": args.workers,
        "candidates": args.candidates,
        "retrain_flag": args.retrain_steps,
        "recipe": args.retrain_from,
        "minutes": minutes,
        "out": args.out,
    }
    record = {
        "settings": settings,
        "specs": specs,
        "seeds": seeds,
        "log": log,
        "ceilings": {n: v.tolist() for n, v in ceilings.items()},
        "before": {f"{n}|{s}": v.tolist() for (n, s), v in before.items()},
        "after": {f"{n}|{s}": v.tolist() for (n, s), v in after.items()},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    saved = out / f"{setup.stem(args.retrain_from)}.json"
    saved.write_text(json.dumps(record))  # before the analysis: a failure there loses no training
    print(f"saved the measurements to {saved}", flush=True)
    render(record, out)


RECORD_KEYS = ("settings", "specs", "seeds", "log", "ceilings", "before", "after")


def render(record: dict[str, Any], out: Path) -> None:
    """The page and the plot from a run's saved measurements (``--from-results`` re-renders)."""

    def keyed(table: dict[str, list[float]]) -> dict[tuple[str, int], np.ndarray]:
        return {(k.rsplit("|", 1)[0], int(k.rsplit("|", 1)[1])): np.asarray(v) for k, v in table.items()}

    settings = record["settings"]
    ceilings = {n: np.asarray(v) for n, v in record["ceilings"].items()}
    results = analyse(
        record["specs"], ceilings, keyed(record["before"]), keyed(record["after"]), record["seeds"]
    )
    write_outputs(out, results, settings, record["log"], SETUPS[settings["task"]])


def analyse(
    specs: dict[str, dict[str, Any]],
    ceilings: dict[str, np.ndarray],
    before: dict[tuple[str, int], np.ndarray],
    after: dict[tuple[str, int], np.ndarray],
    seeds: list[int],
) -> dict[str, Any]:
    """Per-candidate measurements before and after, predictors and their rank agreement."""
    from harness_gym.analysis.reference import spearman_interval

    base_ceiling = float(ceilings["base"].mean())
    base_success = float(np.mean([before[("base", s)].mean() for s in seeds]))
    share = base_success / base_ceiling if base_ceiling > 0 else 0.0
    rows: dict[str, dict[str, Any]] = {}
    for name in [CONTROL, *specs]:
        ceil = ceilings["base" if name == CONTROL else name]
        key = "base" if name == CONTROL else name
        deployed = [float(before[(key, s)].mean()) for s in seeds]
        gains = [float(after[(name, s)].mean() - before[("base", s)].mean()) for s in seeds]
        over_control = [float(after[(name, s)].mean() - after[(CONTROL, s)].mean()) for s in seeds]
        mean_deployed = float(np.mean(deployed))
        c = float(ceil.mean())
        fixed = [d - float(before[("base", s)].mean()) for d, s in zip(deployed, seeds)]
        rows[name] = {
            "ceiling": c,
            "deployed": seed_interval(deployed),
            "fixed": float(np.mean(fixed)),
            "fixed_ci": seed_interval(fixed),
            "mismatch": c - mean_deployed,
            "forecast_gain": c * share - base_success,
            "after": seed_interval([float(after[(name, s)].mean()) for s in seeds]),
            "gain": seed_interval(gains),
            "over_control": seed_interval(over_control),
            "wins": sum(g > 0 for g in gains),
            "rejected": name != CONTROL and float(np.mean(fixed)) < 0 and seed_interval(fixed)[2] < 0,
            "higher_ceiling": c > base_ceiling,
        }
    names = list(specs)
    realized = np.array([rows[n]["gain"][0] for n in names])
    scores = {
        "fixed": np.array([rows[n]["fixed"] for n in names]),
        "ceiling": np.array([rows[n]["ceiling"] for n in names]),
        "neg_mismatch": -np.array([rows[n]["mismatch"] for n in names]),
        "forecast": np.array([rows[n]["forecast_gain"] for n in names]),
    }
    agreement = {}
    for label, key in PREDICTORS.items():
        rho, low, high = spearman_interval(scores[key], realized)
        top = names[int(np.argmax(scores[key]))]
        tied = [n for n, v in zip(names, scores[key]) if v == scores[key].max()]
        agreement[label] = {
            "spearman": (rho, low, high),
            "top": tied,
            "top_gain": float(np.mean([rows[n]["gain"][0] for n in tied])),
            "single": top,
        }
    forecast_error = float(np.mean(np.abs(scores["forecast"] - realized)))
    return {
        "rows": rows,
        "names": names,
        "specs": specs,
        "base_ceiling": base_ceiling,
        "base_success": base_success,
        "share": share,
        "agreement": agreement,
        "best": names[int(np.argmax(realized))],
        "best_gain": float(realized.max()),
        "forecast_error": forecast_error,
        "seeds": seeds,
    }


def _ci(t: tuple[float, float, float], digits: int = 2, signed: bool = False) -> str:
    mean, low, high = t
    f = f"{{:{'+' if signed else ''}.{digits}f}}"
    if low != low:
        return f.format(mean)
    return f"{f.format(mean)} [{f.format(low)}, {f.format(high)}]"


def _rank_cell(spearman: tuple[float, float, float]) -> str:
    """A Spearman cell; none where the candidates cannot be ranked (one, or all tied)."""
    if spearman[0] != spearman[0]:
        return "none: needs 2+ candidates that differ on both sides"
    return _ci(spearman, signed=True)


def write_outputs(
    out: Path, res: dict[str, Any], settings: dict[str, Any], log: list[str], setup: Setup
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    rows, names = res["rows"], res["names"]
    recipe = settings["recipe"]
    stem = setup.stem(recipe)
    how, control_label = RECIPES[recipe]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5.2), gridspec_kw={"width_ratios": [2.2, 1]})
    x = np.arange(len(names))
    ax1.bar(x - 0.2, [rows[n]["fixed"] for n in names], 0.4, label="fixed-model comparison (before)")
    gains = [rows[n]["gain"] for n in names]
    err = np.array([[g[0] - g[1], g[2] - g[0]] if g[1] == g[1] else [0, 0] for g in gains]).T
    ax1.bar(x + 0.2, [g[0] for g in gains], 0.4, yerr=err, capsize=3, label="realized gain after retraining")
    ax1.scatter(
        x,
        [rows[n]["ceiling"] - res["base_ceiling"] for n in names],
        color="k",
        marker="_",
        s=300,
        zorder=3,
        label="ceiling - base ceiling",
    )
    ax1.axhline(0, color="grey", lw=0.8)
    ax1.set_xticks(x, names, rotation=35, ha="right", fontsize=8)
    ax1.set_ylabel("success vs the original agent under the base harness")
    ax1.set_title(f"{setup.task}: MaskablePPO trained under the base harness, per candidate")
    ax1.legend(fontsize=8)
    for label, key, marker in (
        ("fixed-model comparison", "fixed", "o"),
        ("ceiling - mismatch forecast", "forecast_gain", "s"),
    ):
        ax2.scatter(
            [rows[n][key] for n in names], [rows[n]["gain"][0] for n in names], marker=marker, label=label
        )
    lim = [-1, 1]
    ax2.plot(lim, lim, color="grey", lw=0.8, ls="--")
    ax2.set_xlabel("predicted gain (before retraining)")
    ax2.set_ylabel("realized gain")
    ax2.set_title("prediction vs realization")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=110)
    plt.close(fig)

    s = settings
    quick = s["mode"] == "quick"
    steps = s["seeds"] * (s["base_steps"] + (len(names) + 1) * s["retrain_steps"])
    rate = steps / (60 * s["minutes"] * s["workers"])
    pairing = (
        "each seed's fresh policy is compared with the base policy of the same seed index, which "
        "shares nothing with it but the index: the differences are unpaired draws, ordered"
        if recipe == "scratch"
        else "paired: each seed's retrained policy is compared with its own base policy"
    )
    flag = {"quick": " --quick", "long": " --long", "default": ""}[s["mode"]]
    if setup.task != DEFAULT_TASK:
        flag = f" --task {setup.task}" + flag
    if s["seeds"] != {"quick": 2, "default": 4, "long": 8}[s["mode"]]:
        flag += f" --seeds {s['seeds']}"
    if s["candidates"] is not None:
        flag += f" --candidates {s['candidates']}"
    if s.get("retrain_flag"):
        flag += f" --retrain-steps {s['retrain_flag']}"
    if recipe != "base":
        flag += f" --retrain-from {recipe}"
    rejected_up = [n for n in names if rows[n]["rejected"] and rows[n]["higher_ceiling"]]
    beat = [n for n in rejected_up if rows[n]["gain"][1] > 0]
    beat_mean = [n for n in rejected_up if rows[n]["gain"][0] > 0]
    lines = [
        "# Harnesses worth retraining under: ceiling and mismatch predict the gains",
        "",
        f"Regenerate ({s['minutes']:.0f} minutes with {s['workers']} workers: {steps:,} MaskablePPO "
        f"training steps, {rate:.0f} per worker-second over the whole run, evaluation and exact "
        "ceilings included):",
        "",
        "```sh",
        f".venv/bin/python experiments/ceiling_gains.py{flag} --out {shlex.quote(s.get('out', 'docs'))}",
        "```",
        "",
        f"Task `{setup.task}`. Base harness: `{setup.base.describe()}` (exact ceiling "
        f"{res['base_ceiling']:.2f}: {setup.cap}). MaskablePPO through "
        f"`harness_gym.baselines.sb3`, {s['seeds']} training seeds, {s['base_steps']:,} steps under the base "
        f"harness; then, under each candidate (or, as the control, under the base harness again), "
        f"{s['retrain_steps']:,} steps to {how} (`--retrain-from {recipe}`). Every success rate is "
        f"greedy, on the same {s['n_eval']} evaluation "
        f"episodes (seeds {EVAL_SEED0:,} on) for every policy and harness; intervals are 95% Student t "
        f"over training seeds (the seed is the unit; {pairing}). Ceilings are exact "
        "(`harness_gym.analysis.ceiling`, search finished on every episode)."
        + (" **Quick smoke run: small budgets, not the reported figures.**" if quick else ""),
        "",
        f"![ceiling gains]({stem}.png)",
        "",
        "## Before retraining, and after",
        "",
        f"The original agent reaches {res['base_success']:.3f} under the base harness "
        f'({100 * res["share"]:.0f}% of its ceiling). "Rejected": the fixed-model comparison\'s '
        "interval lies below 0 (the base policy does worse under the candidate than under the base).",
        "",
        "| candidate | ceiling | base policy deployed (before) | fixed-model delta | mismatch before "
        "| rejected | after retraining | realized gain | vs control | seeds won |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in [CONTROL, *names]:
        r = rows[n]
        lines.append(
            f"| {control_label if n == CONTROL else n} | {r['ceiling']:.2f} | {_ci(r['deployed'])} "
            f"| {_ci(r['fixed_ci'], signed=True)} "
            f"| {r['mismatch']:.2f} | {'yes' if r['rejected'] else 'no'} | {_ci(r['after'])} "
            f"| {_ci(r['gain'], signed=True)} | {_ci(r['over_control'], signed=True)} "
            f"| {r['wins']}/{len(res['seeds'])} |"
        )
    lines += [
        "",
        "## The claim: rejected harnesses with a higher ceiling win after retraining",
        "",
        f"Rejected by the fixed-model comparison and with a higher ceiling: {len(rejected_up)} "
        f"({', '.join(rejected_up) or 'none'}). Their realized gain over the original agent is above 0 "
        f"in mean for {len(beat_mean)} of {len(rejected_up)}, and with the interval above 0 for "
        f"{len(beat)} of {len(rejected_up)}.",
        "",
        "## Which predictor, computed before retraining, ranks the realized gains",
        "",
        "Spearman's rank correlation between each predictor and the realized mean gain over the "
        f"{len(names)} candidates, with a 95% Fisher-z interval over candidates (Bonett & Wright's "
        "variance; `harness_gym.analysis.reference.spearman_interval`); top-1: the candidate each "
        "predictor ranks first (ties listed) and its "
        f"realized gain. The best realized gain: {res['best']} ({res['best_gain']:+.2f}).",
        "",
        "| predictor | Spearman with the realized gain | top-1 pick | its realized gain |",
        "|---|---|---|---|",
    ]
    for label, a in res["agreement"].items():
        lines.append(
            f"| {label} | {_rank_cell(a['spearman'])} | {', '.join(a['top'])} | {a['top_gain']:+.2f} |"
        )
    lines += [
        "",
        "The mismatch forecast: training changes only the mismatch (KL-regularized control: the "
        "trained policy is the reference tilted by the harness's action values), so a policy "
        "retrained under a candidate is forecast to keep the share of the ceiling the same recipe "
        f"reached under the base harness ({100 * res['share']:.0f}%): predicted gain = ceiling x "
        f"{res['share']:.2f} - {res['base_success']:.2f}. Its ranking is the ceiling's (a monotone "
        "map of it); what it adds is the size of the gain: mean absolute error "
        f"{res['forecast_error']:.2f} against the realized gains. The fixed-model comparison is "
        "ceiling minus the *current* mismatch, which retraining removes.",
        "",
        "## Candidates",
        "",
        "| candidate | harness |",
        "|---|---|",
        *[f"| {n} | `{Harness.from_dict(res['specs'][n]).describe()}` |" for n in names],
        "",
        f"Run time: {s['minutes']:.1f} minutes.",
        "",
        "<details><summary>log</summary>",
        "",
        "```",
        *log,
        "```",
        "",
        "</details>",
        "",
    ]
    (out / f"{stem}.md").write_text("\n".join(lines))
    print(f"wrote {out / (stem + '.md')} and {out / (stem + '.png')} in {s['minutes']:.1f} min")


if __name__ == "__main__":
    main()
