"""``harness-gym train``: train an RL baseline (SB3 or the text policy) and save it with its harness.

    harness-gym train --algo maskable_ppo --env harness_gym/ClickButton-Json-v0 --steps 20000 \\
        --seed 0 --out runs/cb-json
    harness-gym train --algo text_policy --env harness_gym/EnterText-Json-v0 \\
        --env harness_gym/EnterText-BundleYaml-v0 --grouping cross --iterations 30 --out runs/et-cross

``--algo text_policy`` trains the torch text policy (GRPO-style); every ``--env`` is one
training harness of the same task. The other algos train stable-baselines3 models on one env.
Every argument is checked before torch and stable-baselines3 are imported.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from harness_gym.cli import train_lm
from harness_gym.cli.common import (
    CommandError,
    add_trajectory_argument,
    check_family_options,
    json_object,
    make_env,
    non_negative_int,
    note_new_folders,
    output_dir,
    positive_int,
    require_env_id,
    seed_int,
)
from harness_gym.logging_backends import LogError, add_log_arguments, check_backend, check_log_dir, cli_log

HELP = "train an RL baseline (SB3 or the text policy) and save it with its harness spec"
SB3_ALGOS = ("maskable_ppo", "ppo", "dqn")
TRAIN_ALGOS = (*SB3_ALGOS, "text_policy", *train_lm.LM_ALGOS)
SFT, GRPO = train_lm.LM_ALGOS
EVAL_DIR = "eval"  # <--out>/eval: the evaluation episodes' run folder (recorded trajectories)

#: Which algos read each option that not every algo reads (by argparse ``dest``). An option
#: given with another algo is refused, never ignored: :func:`refuse_unread`.
READ_BY: dict[str, tuple[str, ...]] = {
    "steps": (*SB3_ALGOS, "text_policy", GRPO),
    "max_actions": SB3_ALGOS,
    "features_dim": SB3_ALGOS,
    "menu_dim": SB3_ALGOS,
    "n_envs": SB3_ALGOS,
    "iterations": ("text_policy",),
    "grouping": ("text_policy", GRPO),
    "trajectories": (*SB3_ALGOS, "text_policy"),
    **{dest: train_lm.LM_ALGOS for dest in train_lm.LM_OPTIONS},
    **{dest: (SFT,) for dest in train_lm.SFT_ONLY},
    **{dest: (GRPO,) for dest in train_lm.GRPO_ONLY},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``harness-gym train``."""
    parser.add_argument("--algo", choices=TRAIN_ALGOS, default="maskable_ppo")
    parser.add_argument(
        "--env",
        action="append",
        required=True,
        help="env id to train on; repeat for several training harnesses of one task (text_policy, and "
        "SB3: the parallel envs take them in turn)",
    )
    parser.add_argument("--harness", help="replace the env's harness: a preset name or a YAML path")
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=None,
        help="SB3: total env steps; text_policy: GRPO iterations (as --iterations); grpo-lm: optimizer "
        "steps; not sft-lm (default: the task's entry in harness_gym/baselines/hyperparams/)",
    )
    parser.add_argument("--seed", type=seed_int, default=0)
    parser.add_argument("--out", required=True, help="directory to write the model and its harness spec to")
    parser.add_argument("--max-actions", type=positive_int, default=32, help="SB3: size K of the action menu")
    parser.add_argument(
        "--features-dim", type=positive_int, default=2048, help="SB3: hash buckets of the observation"
    )
    parser.add_argument(
        "--menu-dim",
        type=non_negative_int,
        default=1024,
        help="SB3: hash buckets of the action menu's features (0: encode the observation alone)",
    )
    parser.add_argument(
        "--n-envs", type=positive_int, default=None, help="SB3: parallel envs (in one process; default 4)"
    )
    parser.add_argument(
        "--hyperparams",
        default="{}",
        help="JSON object of algorithm keyword arguments read over the task's tuned entry "
        "(harness_gym/baselines/hyperparams/), e.g. '{\"learning_rate\": 1e-3}' (sft-lm, grpo-lm: "
        "fields of their configs, such as lr_scheduler or warmup_steps)",
    )
    parser.add_argument(
        "--iterations",
        type=positive_int,
        default=None,
        help="text_policy: GRPO iterations (default: the task's tuned entry)",
    )
    parser.add_argument(
        "--grouping", choices=("within", "cross"), default="within", help="text_policy and grpo-lm"
    )
    parser.add_argument(
        "--threads", type=positive_int, default=1, help="torch threads (small models: 1 is fastest)"
    )
    parser.add_argument(
        "--eval-episodes", type=non_negative_int, default=100, help="evaluate on seeds 0.. after training"
    )
    add_trajectory_argument(parser, "pairs", "pairs; of the evaluation episodes, stored in <--out>/eval/")
    add_log_arguments(parser, "<--out>/logs")
    train_lm.add_arguments(parser)
    parser.set_defaults(option_defaults={a.dest: a.default for a in parser._actions if a.option_strings})


def refuse_unread(args: argparse.Namespace) -> None:
    """Refuse every option that ``--algo`` would not read (a value other than its default)."""
    defaults = getattr(args, "option_defaults", {})
    for dest, algos in READ_BY.items():
        if args.algo not in algos and getattr(args, dest) != defaults.get(dest):
            flag = "--model" if dest == "lm_model" else "--" + dest.replace("_", "-")
            raise CommandError(f"{flag} is for {', '.join(algos)}: --algo {args.algo} would ignore it")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Check every argument, train, save to ``--out``, then report the success rate on held-out seeds."""
    from harness_gym.core.presets import resolve_harness

    try:
        check_backend(args.log)
        check_log_dir(args)
    except LogError as err:
        raise CommandError(str(err)) from None
    refuse_unread(args)
    defaults = getattr(args, "option_defaults", {})
    if args.eval_episodes == 0 and args.trajectories != defaults.get("trajectories"):
        raise CommandError(
            f"--trajectories {args.trajectories} records the evaluation episodes: "
            "--eval-episodes 0 plays none"
        )
    for env_id in args.env:
        require_env_id(env_id)
    args.tuned = tuned_entry(args.algo, args.env[0])
    if args.algo in train_lm.LM_ALGOS:
        return train_lm.run(args, out)
    if args.algo == "text_policy":
        if args.steps is not None and args.iterations not in (None, args.steps):
            raise CommandError(
                f"--steps {args.steps} and --iterations {args.iterations} both set the text policy's "
                "iterations: give one"
            )
        args.iterations = args.steps or args.iterations or args.tuned.steps
    args.steps = args.tuned.steps if args.steps is None else args.steps
    args.n_envs = (args.tuned.n_envs or 4) if args.n_envs is None else args.n_envs
    if args.harness is not None:
        resolve_harness(args.harness)
        for env_id in args.env:
            check_family_options(env_id, args.harness)
    hyperparams = json_object(args.hyperparams, "--hyperparams")
    if args.algo == "text_policy":  # SB3's sb3.train reads the tuned entry itself
        hyperparams = {**args.tuned.hyperparams, **hyperparams}
    if args.algo in SB3_ALGOS and len(args.env) > 1:
        if args.harness is not None:
            raise CommandError("--harness replaces every --env's harness: with several --env give one")
        tasks = {_task_of(env_id) for env_id in args.env}
        if len(tasks) != 1:
            raise CommandError(f"every --env must be the same task, got {sorted(map(str, tasks))}")
        if args.n_envs % len(args.env):
            raise CommandError(
                f"--n-envs {args.n_envs} is not a multiple of the {len(args.env)} --env harnesses (each "
                f"parallel env keeps one): give --n-envs {len(args.env)} or {2 * len(args.env)}"
            )
    if args.algo in SB3_ALGOS:
        from harness_gym.baselines.sb3 import unknown_hyperparams

        unknown = unknown_hyperparams(args.algo, hyperparams)
        if unknown:
            raise CommandError(f"--hyperparams: {args.algo} takes no {', '.join(unknown)}")
    # the text policy's configs are built before any folder is made (a bad key or value is refused)
    configs = _text_policy_configs(args, hyperparams) if args.algo == "text_policy" else None
    output_dir(args.out)
    folder = _eval_folder(args)
    import torch

    torch.set_num_threads(max(1, args.threads))
    if configs is not None:
        return _train_text_policy(args, configs, out, folder)
    from harness_gym.baselines import sb3
    from harness_gym.wrappers.encoding import HashedFeatures

    trained = sb3.train(
        args.algo,
        args.env[0],
        args.steps,
        args.seed,
        harness=args.harness,
        also=[_harness_of(env_id) for env_id in args.env[1:]],
        max_actions=args.max_actions,
        features=HashedFeatures(
            dim=args.features_dim,
            menu_slots=args.max_actions if args.menu_dim > 0 else 0,
            menu_dim=max(args.menu_dim, 8),
        ),
        n_envs=args.n_envs,
        hyperparams=hyperparams,
        progress=True,
        log=args.log,
        log_dir=args.log_dir or Path(args.out) / "logs",
    )
    path = trained.save(args.out)
    out.write(
        f"saved {args.algo} model trained under harness {trained.harness.id} to {path} "
        f"({args.steps} steps; defaults: {trained.tuned_source})\n"
    )
    if args.eval_episodes > 0:
        rows = sb3.evaluate(trained, episodes=args.eval_episodes, progress=True, record=folder is not None)
        rate = sum(r.success for r in rows) / len(rows)
        out.write(f"success on {args.env[0]} (seeds 0..{args.eval_episodes - 1}): {100 * rate:.1f}%\n")
        _store_eval(folder, rows, args, out)
    return 0


def _eval_folder(args: argparse.Namespace) -> Path | None:
    """Where the evaluation episodes' trajectories go (``--out/eval``, a run folder that
    ``harness-gym view`` reads), checked before training; None when nothing is recorded."""
    from harness_gym.analysis.eval_run import claim
    from harness_gym.analysis.sweep.spec import SweepError

    if args.eval_episodes == 0 or not args.trajectories.records:
        return None
    try:
        note_new_folders(Path(args.out) / EVAL_DIR)
        return claim(Path(args.out) / EVAL_DIR)
    except SweepError as err:
        raise CommandError(str(err)) from None


def _store_eval(folder: Path | None, rows: list[Any], args: argparse.Namespace, out: TextIO) -> None:
    from harness_gym.analysis.eval_run import write_run

    if folder is not None:
        kept = write_run(folder, rows, args.trajectories, label=f"train {args.algo}")
        out.write(
            f"kept {kept} evaluation trajectories ({args.trajectories}) in {folder}: "
            f"harness-gym view {folder}\n"
        )


def _text_policy_configs(args: argparse.Namespace, hyperparams: dict[str, Any]) -> tuple[Any, Any]:
    """The text policy's (model, GRPO) configs from ``--hyperparams`` and the flags; a key
    neither takes, or a value either refuses, is one line."""
    from harness_gym.baselines.text_policy import TextPolicyConfig, TextPolicyGRPOConfig

    policy_keys = set(TextPolicyConfig().to_dict())
    try:
        policy_cfg = TextPolicyConfig.from_dict({k: v for k, v in hyperparams.items() if k in policy_keys})
        grpo = TextPolicyGRPOConfig(
            iterations=args.iterations,
            grouping=args.grouping,
            seed=args.seed,
            **{k: v for k, v in hyperparams.items() if k not in policy_keys},
        )
    except (TypeError, ValueError) as err:
        raise CommandError(f"--hyperparams: {err}") from None
    return policy_cfg, grpo


def _train_text_policy(
    args: argparse.Namespace, configs: tuple[Any, Any], out: TextIO, folder: Path | None = None
) -> int:
    import torch

    from harness_gym.baselines.text_policy import TextPolicy, TextPolicyGRPOTrainer, save_run, success_rate

    policy_cfg, grpo = configs
    factories = [_factory(env_id, args.harness) for env_id in args.env]
    probes = [f() for f in factories]
    task_ids = {p.unwrapped.task.task_id for p in probes}
    if len(task_ids) != 1:
        raise CommandError(f"every --env must be the same task, got {sorted(task_ids)}")
    harnesses = [p.unwrapped.harness.to_dict() for p in probes]
    torch.manual_seed(args.seed)
    policy = TextPolicy(policy_cfg)
    trainer = TextPolicyGRPOTrainer(policy, factories, grpo)
    with cli_log(args, "text_policy", f"text_policy-{args.grouping}", grpo.__dict__) as run_log:
        history = trainer.train(progress=True, log=run_log)
    path = save_run(
        policy,
        args.out,
        task_id=task_ids.pop(),
        harnesses=harnesses,
        config=grpo,
        history=history,
        tuned_source=args.tuned.source,
    )
    out.write(f"saved text policy ({args.grouping} grouping, {len(factories)} harness(es)) to {path}\n")
    if args.eval_episodes > 0 and folder is None:
        for env_id, factory in zip(args.env, factories):
            rate = success_rate(policy, factory, range(args.eval_episodes))
            out.write(f"success on {env_id} (seeds 0..{args.eval_episodes - 1}): {100 * rate:.1f}%\n")
    elif args.eval_episodes > 0:  # recorded: the same greedy episodes, one at a time
        from harness_gym.baselines.text_policy import TextPolicyAgent
        from harness_gym.rollout import run_episode

        rows = []
        for env_id, factory in zip(args.env, factories):
            env = factory()
            agent = TextPolicyAgent(policy, greedy=True, seed=args.seed)
            seeds = range(args.eval_episodes)
            played = [run_episode(env, agent, s, "text_policy", record=True) for s in seeds]
            env.close()
            rate = sum(r.success for r in played) / len(played)
            out.write(f"success on {env_id} (seeds 0..{args.eval_episodes - 1}): {100 * rate:.1f}%\n")
            rows.extend(played)
        _store_eval(folder, rows, args, out)
    return 0


def _task_of(env_id: str) -> Any:
    import gymnasium as gym

    from harness_gym.core.plugins import import_env_module

    return gym.spec(import_env_module(env_id)).kwargs.get("task")


def _harness_of(env_id: str) -> Any:
    """The harness an env id registers (its spec's ``harness``, the canonical one if none)."""
    import gymnasium as gym

    from harness_gym.core.plugins import import_env_module
    from harness_gym.core.presets import resolve_harness

    return resolve_harness(gym.spec(import_env_module(env_id)).kwargs.get("harness") or "Json")


def tuned_entry(algo: str, env_id: str) -> Any:
    """The tuned entry (:mod:`harness_gym.baselines.tuned`) of ``algo`` on the env's task:
    the file's ``default`` for a task it does not name, or an env whose task is not registered."""
    from harness_gym.baselines.tuned import HyperparamsError, tuned
    from harness_gym.core.registry import get_task

    task = _task_of(env_id)
    try:
        task_id = get_task(task).task_id if isinstance(task, str) else getattr(task, "task_id", None)
    except (KeyError, ValueError):
        task_id = None
    try:
        return tuned(algo, task_id)
    except HyperparamsError as err:
        raise CommandError(str(err)) from None


def _factory(env_id: str, harness: str | None) -> Any:
    return lambda: make_env(env_id, harness)
