"""``harness-gym eval``: evaluate agents on envs and print a success table; with ``--model``,
evaluate a model saved by ``harness-gym train``.

    harness-gym eval --agent oracle --agent random --env 'harness_gym/*' --episodes 20 --seed 0
    harness-gym eval --model runs/cb-json --env harness_gym/ClickButton-JsonReversed-v0 --episodes 200
"""

from __future__ import annotations

import argparse
import zipfile
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from harness_gym.analysis.agent_spec import AGENT_FORMS
from harness_gym.cli.common import (
    CommandError,
    add_trajectory_argument,
    make_env,
    note_new_folders,
    output_file,
    positive_int,
    read_json_object,
    refuse_ignored,
    remember_defaults,
    resolve_env_ids,
    seed_int,
    table,
    write_results,
)
from harness_gym.llm.cli_options import DEFAULT_IN_FLIGHT, LLM_OPTIONS, add_llm_arguments

HELP = "evaluate agents on envs and print a success table"
TRAJECTORIES_DEFAULT = (
    "pairs with --out (stored in the run folder named like FILE without its suffix: "
    "runs/ev.jsonl -> runs/ev/), none without --out"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent", action="append", help=f"agent spec (repeatable; default oracle and random): {AGENT_FORMS}"
    )
    parser.add_argument(
        "--env",
        action="append",
        required=True,
        help="env id, glob such as 'harness_gym/ClickButton-*', or 'all' (repeatable)",
    )
    parser.add_argument("--episodes", type=positive_int, default=10, help="episodes per (env, agent)")
    parser.add_argument("--seed", type=seed_int, default=0, help="episode i uses seed SEED + i")
    parser.add_argument("--out", help="write one row per episode to this .jsonl or .csv file")
    add_trajectory_argument(parser, None, TRAJECTORIES_DEFAULT)
    add_model_eval_arguments(parser)
    add_llm_arguments(parser)
    remember_defaults(parser)


def add_model_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Options ``harness-gym eval`` needs for ``--model``."""
    parser.add_argument("--model", help="a directory written by `harness-gym train`: evaluate that model")
    parser.add_argument(
        "--harness",
        help="replace every env's harness (preset name or YAML path), for --agent or --model",
    )
    parser.add_argument("--stochastic", action="store_true", help="with --model: sample instead of greedy")


def trajectory_policy(args: argparse.Namespace) -> Any:
    """The ``--trajectories`` policy eval runs with: as given, else ``pairs`` with ``--out``
    (a researcher who keeps the rows can open the episodes behind them) and ``none`` without
    (eval then writes no file at all). A recording policy without ``--out`` is refused: the
    trajectories are stored beside the rows."""
    from harness_gym.rows.trajectories import DEFAULT_POLICY, TrajectoryPolicy

    given = args.trajectories
    if given is None:
        return TrajectoryPolicy.parse(DEFAULT_POLICY if args.out else "none")
    if given.records and not args.out:
        raise CommandError(
            f"--trajectories {given} stores the trajectories beside the rows: give --out FILE "
            "(they go to the folder FILE names without its suffix), or drop --trajectories"
        )
    return given


def claim_run_folder(args: argparse.Namespace, policy: Any) -> Path | None:
    """The run folder the trajectories go to (checked before any episode runs), or None."""
    from harness_gym.analysis.eval_run import claim, run_folder
    from harness_gym.analysis.sweep.spec import SweepError

    if not policy.records:
        return None
    try:
        folder = run_folder(args.out)
        note_new_folders(folder)
        return claim(folder)
    except SweepError as err:
        raise CommandError(str(err)) from None


def write_run_folder(folder: Path | None, results: Sequence[Any], policy: Any, out: TextIO) -> None:
    """Store the recorded trajectories (and the rows, as a sweep's) in ``folder``."""
    from harness_gym.analysis.eval_run import write_run

    if folder is None:
        return
    kept = write_run(folder, results, policy)
    out.write(
        f"kept {kept} trajectories ({policy}) in {folder}: harness-gym view {folder}, "
        f"or harness-gym export --run {folder} --format atif\n"
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.model:
        refuse_ignored(args, ["agent", *LLM_OPTIONS], "--model evaluates the saved model, not --agent specs")
        return run_model_eval(args, out)
    return run_agents(args, out)


def run_agents(args: argparse.Namespace, out: TextIO) -> int:
    """Evaluate ``--agent`` specs (default oracle and random) on every ``--env`` (under
    ``--harness`` when given)."""
    from harness_gym.analysis.agent_spec import parse_agent
    from harness_gym.analysis.sweep.cell import outage_error
    from harness_gym.llm.cli_options import apply_llm_options
    from harness_gym.progress import progress
    from harness_gym.rollout import Episode, EpisodeResult, run_batched, run_episode

    env_ids = resolve_env_ids(args.env)
    if args.stochastic:
        raise CommandError("--stochastic applies to --model only")

    def make(env_id: str) -> Any:
        return make_env(env_id, args.harness)

    make(env_ids[0]).close()  # a bad --harness is one error line, before anything runs
    agents = [parse_agent(a) for a in apply_llm_options(args.agent or ["oracle", "random"], args)]
    out_path = output_file(args.out) if args.out else None
    policy = trajectory_policy(args)
    folder = claim_run_folder(args, policy)
    record = policy.records
    seeds = [args.seed + i for i in range(args.episodes)]
    results: list[EpisodeResult] = []
    # The first env's agents are built before the progress bar starts, so that a user's
    # factory that raises is one error line (and nothing has run).
    first: dict[int, tuple[Any, Any]] = {}
    for k, agent in enumerate(agents):
        if not agent.batched:
            env = make(env_ids[0])
            first[k] = (env, agent.build(env))

    def episodes() -> Iterator[EpisodeResult]:
        for env_id in env_ids:
            for k, agent in enumerate(agents):
                if agent.batched:  # language models: episodes in flight, requests batched
                    jobs = [
                        Episode(lambda e=env_id: make(e), agent.build, s, agent.name, record=record)
                        for s in seeds
                    ]
                    for _, result, err in run_batched(jobs, in_flight=args.in_flight or DEFAULT_IN_FLIGHT):
                        if err is not None:
                            raise err
                        assert result is not None
                        result.error = outage_error(result.extra)  # an outage, not a failure
                        yield result
                    continue
                env, built = first.pop(k) if env_id == env_ids[0] and k in first else (None, None)
                if env is None:
                    env = make(env_id)
                    built = agent.build(env)
                for seed in seeds:
                    yield run_episode(env, built, seed, agent.name, record=record)
                env.close()

    for result in progress(episodes(), total=len(env_ids) * len(agents) * len(seeds), desc="eval"):
        results.append(result)
    results.sort(key=lambda r: (r.env_id, r.agent, r.seed))
    if out_path is not None:
        write_results(results, out_path)
        out.write(f"wrote {len(results)} rows to {args.out}\n")
    write_run_folder(folder, results, policy, out)
    lost = [r for r in results if r.error is not None]
    write_summary([r for r in results if r.error is None], out)
    if lost:
        # One line, and a failing exit: an outage is not a 0% success rate.
        raise CommandError(
            f"{len(lost)} of {len(results)} episodes lost model replies and are left out of the "
            f"success rates: {lost[0].error}; check the server (URL, model name, timeout) and run again"
        )
    return 0


def write_summary(results: Sequence[Any], out: TextIO) -> None:
    """Success rate per task (rows) and preset (columns), one table per agent."""
    cells: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for r in results:
        preset = r.env_id.rsplit("/", 1)[-1].removesuffix("-v0").split("-", 1)[-1]
        cells[(r.agent, r.task_id, preset)].append(r)
    for agent in dict.fromkeys(r.agent for r in results):
        tasks = list(dict.fromkeys(k[1] for k in cells if k[0] == agent))
        presets = list(dict.fromkeys(k[2] for k in cells if k[0] == agent))
        out.write(
            f"\nSuccess rate, agent={agent} (episodes per cell: "
            f"{len(next(v for k, v in cells.items() if k[0] == agent))})\n"
        )
        rows = [["task", *presets, "mean"]]
        for task in tasks:
            rates = [_rate(cells.get((agent, task, p), [])) for p in presets]
            known = [x for x in rates if x is not None]
            rows.append([task, *[_pct(x) for x in rates], _pct(sum(known) / len(known))])
        table(rows, out)


def _rate(rows: list[Any]) -> float | None:
    return sum(r.success for r in rows) / len(rows) if rows else None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


# -- eval --model -------------------------------------------------------------------------------

RUN_KEYS = {"text_policy": ("algo", "task_id", "harnesses"), "": ("algo", "task_id", "harness")}


def read_run(model_dir: Path) -> dict[str, Any]:
    """The ``run.json`` of a model folder, checked enough that loading cannot trip over it."""
    from harness_gym.core.harness import Harness

    run_file = model_dir / "run.json"
    if not run_file.is_file():
        raise CommandError(
            f"{model_dir} is not a model directory (no run.json); train one with `harness-gym train`"
        )
    run = read_json_object(run_file, "model metadata")
    needed = RUN_KEYS["text_policy" if run.get("algo") == "text_policy" else ""]
    missing = [k for k in needed if k not in run]
    if missing:
        raise CommandError(f"model metadata {run_file} is corrupt: missing {missing}")
    specs = run["harnesses"] if run["algo"] == "text_policy" else [run["harness"]]
    if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
        raise CommandError(f"model metadata {run_file} is corrupt: harness specs are not mappings")
    try:
        for spec in specs:
            Harness.from_dict(spec)
    except (TypeError, ValueError) as err:
        raise CommandError(f"model metadata {run_file} is corrupt: {err}") from None
    return run


def run_model_eval(args: argparse.Namespace, out: TextIO) -> int:
    """Evaluate a saved model on every env matched by ``--env`` (globs allowed); print a table."""
    from harness_gym.core.presets import resolve_harness
    from harness_gym.progress import progress

    model_dir = Path(args.model)
    run = read_run(model_dir)
    env_ids = resolve_env_ids(args.env)
    harness = getattr(args, "harness", None)
    if harness is not None:
        resolve_harness(harness)  # a bad preset or YAML file fails before the model loads
    out_path = output_file(args.out) if getattr(args, "out", None) else None
    kept = trajectory_policy(args)  # (``policy`` is the text policy below)
    folder = claim_run_folder(args, kept)
    episodes, seed = args.episodes, args.seed
    greedy = not getattr(args, "stochastic", False)
    rows: list[Any] = []
    if run["algo"] == "text_policy":
        from harness_gym.baselines.text_policy import TextPolicy, TextPolicyAgent
        from harness_gym.rollout import run_episode

        policy = _load(model_dir, lambda: TextPolicy.load(model_dir / "policy.pt"))
        trained_on = ", ".join(sorted({_harness_id(h) for h in run["harnesses"]}))
        for env_id in env_ids:
            env = make_env(env_id, harness)
            agent = TextPolicyAgent(policy, greedy=greedy, seed=seed)
            for s in progress(range(seed, seed + episodes), episodes, env_id):
                rows.append(run_episode(env, agent, s, "text_policy", record=kept.records))
            env.close()
    else:
        from harness_gym.baselines import sb3

        trained = _load(model_dir, lambda: sb3.load(model_dir))
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
                    record=kept.records,
                )
            )
    out.write(f"model {model_dir} ({run['algo']}, task {run['task_id']}, trained under {trained_on})\n")
    _model_summary(rows, out)
    if out_path is not None:
        write_results(rows, out_path)
        out.write(f"wrote {len(rows)} rows to {args.out}\n")
    write_run_folder(folder, rows, kept, out)
    return 0


def _load(model_dir: Path, load: Any) -> Any:
    """Load a saved model; damaged metadata or weights are one clear error."""
    try:
        return load()
    except FileNotFoundError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError, EOFError, zipfile.BadZipFile) as err:
        kind = type(err).__name__
        raise CommandError(f"saved model {model_dir} is corrupt ({kind}: {err})") from None


def _model_summary(rows: Sequence[Any], out: TextIO) -> None:
    cells: dict[tuple[str, str], list[Any]] = {}
    for r in rows:
        cells.setdefault((r.env_id, r.harness_id), []).append(r)
    lines = [["env", "harness_id", "episodes", "success", "mean_return", "invalid/ep"]]
    for (env_id, harness_id), rs in cells.items():
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
    table(lines, out)


def _harness_id(spec: dict[str, Any]) -> str:
    from harness_gym.core.harness import Harness

    return Harness.from_dict(spec).id
