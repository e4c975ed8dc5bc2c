"""The ``train`` and model ``eval`` subcommands of ``harness-gym`` (wired in by ``harness_gym.cli``).

    harness-gym train --algo maskable_ppo --env harness_gym/ClickButton-Json-v0 --steps 20000 \\
        --seed 0 --out runs/cb-json
    harness-gym eval --model runs/cb-json --env harness_gym/ClickButton-JsonReversed-v0 --episodes 200
    harness-gym train --algo text_policy --env harness_gym/EnterText-Json-v0 \\
        --env harness_gym/EnterText-Yaml-v0 --grouping cross --iterations 30 --out runs/et-cross

``--algo text_policy`` trains the torch text policy (GRPO-style); every ``--env`` is one
training harness of the same task. The other algos train stable-baselines3 models on one env.
torch and stable-baselines3 are imported only when these commands run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from harness_gym.progress import progress

TRAIN_ALGOS = ("maskable_ppo", "ppo", "dqn", "text_policy")


# -- train ------------------------------------------------------------------------------------


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``harness-gym train``."""
    parser.add_argument("--algo", choices=TRAIN_ALGOS, default="maskable_ppo")
    parser.add_argument(
        "--env",
        action="append",
        required=True,
        help="env id to train on (text_policy: repeat for several training harnesses of one task)",
    )
    parser.add_argument("--harness", help="replace the env's harness: a preset name or a YAML path")
    parser.add_argument("--steps", type=int, default=20_000, help="SB3: total env steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="directory to write the model and its harness spec to")
    parser.add_argument("--max-actions", type=int, default=32, help="SB3: size K of the action menu")
    parser.add_argument("--features-dim", type=int, default=2048, help="SB3: hash buckets of the observation")
    parser.add_argument(
        "--menu-dim",
        type=int,
        default=1024,
        help="SB3: hash buckets of the action menu's features (0: encode the observation alone)",
    )
    parser.add_argument("--n-envs", type=int, default=4, help="SB3: parallel envs (in one process)")
    parser.add_argument(
        "--hyperparams",
        default="{}",
        help="JSON object of algorithm keyword arguments, e.g. '{\"learning_rate\": 1e-3}'",
    )
    parser.add_argument("--iterations", type=int, default=30, help="text_policy: GRPO iterations")
    parser.add_argument("--grouping", choices=("within", "cross"), default="within", help="text_policy")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (small models: 1 is fastest)")
    parser.add_argument("--eval-episodes", type=int, default=100, help="evaluate on seeds 0.. after training")


def run_train(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Train, save to ``--out``, then report the success rate on held-out seeds."""
    out = out or sys.stdout
    import torch

    torch.set_num_threads(max(1, args.threads))
    hyperparams = _json_object(args.hyperparams, "--hyperparams")
    if args.algo == "text_policy":
        return _train_text_policy(args, hyperparams, out)
    if len(args.env) != 1:
        raise SystemExit(f"error: --algo {args.algo} trains on one --env, got {len(args.env)}")
    from harness_gym.baselines import sb3
    from harness_gym.wrappers.encoding import HashedFeatures

    trained = sb3.train(
        args.algo,
        args.env[0],
        args.steps,
        args.seed,
        harness=args.harness,
        max_actions=args.max_actions,
        features=HashedFeatures(
            dim=args.features_dim,
            menu_slots=args.max_actions if args.menu_dim > 0 else 0,
            menu_dim=max(args.menu_dim, 8),
        ),
        n_envs=args.n_envs,
        hyperparams=hyperparams,
        progress=True,
    )
    path = trained.save(args.out)
    out.write(f"saved {args.algo} model trained under harness {trained.harness.id} to {path}\n")
    if args.eval_episodes > 0:
        rows = sb3.evaluate(trained, episodes=args.eval_episodes, progress=True)
        rate = sum(r.success for r in rows) / len(rows)
        out.write(f"success on {args.env[0]} (seeds 0..{args.eval_episodes - 1}): {100 * rate:.1f}%\n")
    return 0


def _train_text_policy(args: argparse.Namespace, hyperparams: dict[str, Any], out: TextIO) -> int:
    import torch

    from harness_gym.baselines.text_policy import (
        GRPOConfig,
        GRPOTrainer,
        TextPolicy,
        TextPolicyConfig,
        save_run,
        success_rate,
    )

    policy_keys = set(TextPolicyConfig().to_dict())
    policy_cfg = TextPolicyConfig.from_dict({k: v for k, v in hyperparams.items() if k in policy_keys})
    grpo = GRPOConfig(
        iterations=args.iterations,
        grouping=args.grouping,
        seed=args.seed,
        **{k: v for k, v in hyperparams.items() if k not in policy_keys},
    )
    factories = [_factory(env_id, args.harness) for env_id in args.env]
    probes = [f() for f in factories]
    task_ids = {p.unwrapped.task.task_id for p in probes}
    if len(task_ids) != 1:
        raise SystemExit(f"error: every --env must be the same task, got {sorted(task_ids)}")
    harnesses = [p.unwrapped.harness.to_dict() for p in probes]
    torch.manual_seed(args.seed)
    policy = TextPolicy(policy_cfg)
    trainer = GRPOTrainer(policy, factories, grpo)
    history = trainer.train(progress=True)
    path = save_run(
        policy, args.out, task_id=task_ids.pop(), harnesses=harnesses, config=grpo, history=history
    )
    out.write(f"saved text policy ({args.grouping} grouping, {len(factories)} harness(es)) to {path}\n")
    if args.eval_episodes > 0:
        for env_id, factory in zip(args.env, factories):
            rate = success_rate(policy, factory, range(args.eval_episodes))
            out.write(f"success on {env_id} (seeds 0..{args.eval_episodes - 1}): {100 * rate:.1f}%\n")
    return 0


def _make_env(env_id: str, harness: str | None) -> Any:
    """``gym.make(env_id)``, with its harness replaced when ``harness`` is given."""
    import gymnasium as gym

    return gym.make(env_id) if harness is None else gym.make(env_id, harness=harness)


def _factory(env_id: str, harness: str | None) -> Any:
    return lambda: _make_env(env_id, harness)


# -- eval --model -------------------------------------------------------------------------------


def add_model_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Options ``harness-gym eval`` needs for ``--model`` (the existing ``eval`` parser has
    ``--env``, ``--episodes``, ``--seed`` and ``--out`` already)."""
    parser.add_argument("--model", help="a directory written by `harness-gym train`: evaluate that model")
    parser.add_argument(
        "--harness", help="with --model: replace the env's harness (preset name or YAML path)"
    )
    parser.add_argument("--stochastic", action="store_true", help="with --model: sample instead of greedy")


def run_model_eval(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Evaluate a saved model on every env matched by ``--env`` (globs allowed); print a table."""
    out = out or sys.stdout
    from harness_gym.cli import resolve_env_ids, write_results

    model_dir = Path(args.model)
    run_file = model_dir / "run.json"
    if not run_file.exists():
        raise SystemExit(
            f"error: {model_dir} is not a model directory (no run.json); train one with `harness-gym train`"
        )
    run = json.loads(run_file.read_text())
    env_ids = resolve_env_ids(args.env)
    episodes, seed = args.episodes, args.seed
    harness = getattr(args, "harness", None)
    greedy = not getattr(args, "stochastic", False)
    rows: list[Any] = []
    if run["algo"] == "text_policy":
        from harness_gym.analysis.rollout import run_episode
        from harness_gym.baselines.text_policy import TextPolicy, TextPolicyAgent

        policy = TextPolicy.load(model_dir / "policy.pt")
        trained_on = ", ".join(sorted({_harness_id(h) for h in run["harnesses"]}))
        for env_id in env_ids:
            env = _make_env(env_id, harness)
            agent = TextPolicyAgent(policy, greedy=greedy, seed=seed)
            for s in progress(range(seed, seed + episodes), episodes, env_id):
                rows.append(run_episode(env, agent, s, "text_policy"))
            env.close()
    else:
        from harness_gym.baselines import sb3

        trained = sb3.load(model_dir)
        trained_on = trained.harness.id
        for env_id in env_ids:
            rows.extend(
                sb3.evaluate(
                    trained,
                    env_id,
                    harness=harness,
                    episodes=episodes,
                    seed=seed,
                    deterministic=greedy,
                    progress=True,
                )
            )
    out.write(f"model {model_dir} ({run['algo']}, task {run['task_id']}, trained under {trained_on})\n")
    _summary(rows, out)
    if getattr(args, "out", None):
        write_results(rows, Path(args.out))
        out.write(f"wrote {len(rows)} rows to {args.out}\n")
    return 0


def _summary(rows: Sequence[Any], out: TextIO) -> None:
    table: dict[tuple[str, str], list[Any]] = {}
    for r in rows:
        table.setdefault((r.env_id, r.harness_id), []).append(r)
    lines = [["env", "harness_id", "episodes", "success", "mean_return", "invalid/ep"]]
    for (env_id, harness_id), rs in table.items():
        n = len(rs)
        lines.append(
            [
                env_id,
                harness_id,
                str(n),
                f"{100 * sum(r.success for r in rs) / n:.1f}%",
                f"{sum(r.episode_return for r in rs) / n:.3f}",
                f"{sum(r.invalid_actions for r in rs) / n:.2f}",
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for i, line in enumerate(lines):
        out.write("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() + "\n")
        if i == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def _harness_id(spec: dict[str, Any]) -> str:
    from harness_gym.core.harness import Harness

    return Harness.from_dict(spec).id


def _json_object(text: str, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise SystemExit(f"error: {flag} must be a JSON object: {err}") from None
    if not isinstance(value, dict):
        raise SystemExit(f"error: {flag} must be a JSON object, got {type(value).__name__}")
    return value
