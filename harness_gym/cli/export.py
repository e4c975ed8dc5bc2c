"""``harness-gym export``: episodes as the chat transcripts the harness renders, for SFT.

    harness-gym export --env 'harness_gym/ClickButton-*' --episodes 20 --out demos.jsonl
    harness-gym export --env harness_gym/EnterText-v0 --harness JsonNative --unit step --out demos.parquet
    harness-gym export --env harness_gym/ClickButton-Json-v0 --agent llm --format hf --out demos_ds
    harness-gym export --run runs/demo --format atif --out trajectories.atif.jsonl
    harness-gym export --run runs/demo --out transcripts.jsonl   # the run's recorded trajectories

With ``--run``, nothing is played: the run folder's recorded trajectories
(:mod:`harness_gym.rows.trajectories`) are written as chat rows or, ``--format atif``, as one
ATIF object a line (:mod:`harness_gym.integrations.trajectory_export`).

Rows are written only once every episode has been played; a bad argument writes nothing.
See :mod:`harness_gym.integrations.export` for the columns.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from harness_gym.analysis.agent_spec import AGENT_FORMS
from harness_gym.cli.common import (
    CommandError,
    make_env,
    output_dir,
    output_file,
    positive_int,
    refuse_ignored,
    remember_defaults,
    resolve_env_ids,
    seed_int,
)
from harness_gym.llm.cli_options import LLM_OPTIONS, add_llm_arguments

HELP = "write episodes as chat transcripts (JSONL / Parquet / datasets folder) for SFT"

SUFFIXES = {".jsonl": "jsonl", ".parquet": "parquet"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", action="append", help="env id, glob or 'all' (repeatable)")
    parser.add_argument("--run", help="a run folder: export its recorded trajectories instead of playing")
    parser.add_argument(
        "--agent", action="append", help=f"agent spec (repeatable; default oracle): {AGENT_FORMS}"
    )
    parser.add_argument("--harness", help="replace each env's harness (preset name, YAML path or JSON spec)")
    parser.add_argument("--episodes", type=positive_int, default=10, help="episodes per (env, agent)")
    parser.add_argument("--seed", type=seed_int, default=0, help="episode i uses seed SEED + i")
    parser.add_argument(
        "--unit", choices=("episode", "step"), default="episode", help="one row per episode or per step"
    )
    parser.add_argument(
        "--format",
        choices=("jsonl", "parquet", "hf", "atif"),
        help="jsonl, parquet, hf (a datasets folder) or atif (with --run); default from --out's suffix",
    )
    parser.add_argument("--out", required=True, help="file (.jsonl / .parquet) or folder (--format hf)")
    add_llm_arguments(parser, in_flight=False)  # episodes are played one at a time
    remember_defaults(parser)


def output_format(out: str, fmt: str | None) -> str:
    """The format to write, from ``--format`` or ``--out``'s suffix (a mismatch is an error)."""
    suffix = Path(out).suffix.lower()
    guessed = SUFFIXES.get(suffix)
    if fmt is None:
        if guessed is None:
            raise CommandError(
                f"--out {out}: cannot tell the format from {suffix or 'no suffix'!r}; "
                "end it in .jsonl or .parquet, or pass --format hf for a datasets folder"
            )
        return guessed
    if fmt == "hf" and guessed is not None:
        raise CommandError(f"--format hf writes a folder, but --out {out} ends in {suffix}")
    if fmt != "hf" and guessed not in (None, fmt):
        raise CommandError(f"--format {fmt} does not match --out {out} (a {guessed} file)")
    return fmt


def run(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.analysis.agent_spec import parse_agent
    from harness_gym.integrations.export import episode_rows, record_episodes, write_rows
    from harness_gym.llm.cli_options import apply_llm_options
    from harness_gym.progress import progress_bar

    if args.run is not None:
        return run_from_trajectories(args, out)
    if not args.env:
        raise CommandError("give --env (episodes to play) or --run (a run folder's recorded trajectories)")
    if args.format == "atif":
        raise CommandError("--format atif exports recorded trajectories: give --run RUN_DIR")
    fmt = output_format(args.out, args.format)
    out_path = output_dir(args.out) if fmt == "hf" else output_file(args.out)
    if fmt == "hf" and out_path.is_dir() and any(out_path.iterdir()):
        raise CommandError(f"--out {args.out} is a folder that is not empty; give a new folder")
    if fmt != "jsonl":
        _require_datasets()
    env_ids = resolve_env_ids(args.env)
    agents = [parse_agent(a) for a in apply_llm_options(args.agent or ["oracle"], args)]
    envs = {env_id: make_env(env_id, args.harness) for env_id in env_ids}  # bad --harness: here
    seeds = [args.seed + i for i in range(args.episodes)]
    rows: list[dict[str, Any]] = []
    bar = progress_bar(len(env_ids) * len(agents) * len(seeds), desc="export")
    try:
        for env in envs.values():
            for agent in agents:
                built = agent.build(env)
                for episode in record_episodes(env, built, seeds, agent.name):
                    rows.extend(episode_rows(env, episode, args.unit))
                    if bar is not None:
                        bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        for env in envs.values():
            env.close()
    write_rows(rows, out_path, fmt)
    out.write(f"wrote {len(rows)} rows ({args.unit}s) to {args.out}\n")
    return 0


def run_from_trajectories(args: argparse.Namespace, out: TextIO) -> int:
    """``export --run DIR``: the run's recorded trajectories as chat rows or ATIF (JSON Lines)."""
    from harness_gym.analysis.sweep import read_meta
    from harness_gym.integrations.trajectory_export import export_trajectories

    if args.env:
        raise CommandError("--run exports a run's recorded trajectories; it takes no --env")
    played = ["agent", "harness", "episodes", "seed", *(o for o in LLM_OPTIONS if o != "in_flight")]
    refuse_ignored(args, played, "--run exports recorded trajectories and plays no episode")
    if args.format not in (None, "jsonl", "atif"):
        raise CommandError(
            f"--run writes JSON Lines (chat rows, or --format atif), not --format {args.format}"
        )
    read_meta(args.run)
    path = output_file(args.out)
    fmt = "atif" if args.format == "atif" else "chat"
    if fmt == "atif":
        refuse_ignored(args, ["unit"], "--format atif writes one trajectory a line, not chat rows per --unit")
    n = export_trajectories(args.run, path, fmt, args.unit)
    if n == 0:
        out.write(f"{args.run} has no recorded trajectories (sweep with --trajectories)\n")
    out.write(f"wrote {n} {'ATIF trajectories' if fmt == 'atif' else 'chat rows'} to {args.out}\n")
    return 0


def _require_datasets() -> None:
    try:
        import datasets  # noqa: F401
    except ImportError:
        raise CommandError(
            "Parquet and datasets folders need the 'datasets' package: pip install 'harness-gym[train]'"
        ) from None
