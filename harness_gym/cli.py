"""The ``harness-gym`` command: list what exists, play an env by hand, evaluate agents.

harness-gym list [tasks|presets|factors|envs]
harness-gym play harness_gym/EnterText-Markdown-v0 --seed 3
harness-gym eval --agent oracle --agent random --env 'harness_gym/*' --episodes 20 --seed 0
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO, TypeVar

import gymnasium as gym

import harness_gym
from harness_gym.analysis import cli_sweep
from harness_gym.analysis.agent_spec import AGENT_FORMS
from harness_gym.analysis.rollout import EpisodeResult, run_episode
from harness_gym.baselines import cli_train
from harness_gym.core.harness import EXTRA_FIELDS, LEVELS, MAX_FEW_SHOT, Harness
from harness_gym.core.presets import PRESETS
from harness_gym.core.registry import TASKS, registered_env_ids
from harness_gym.llm.cli_options import add_llm_arguments
from harness_gym.progress import progress

T = TypeVar("T")


def resolve_env_ids(patterns: Sequence[str]) -> list[str]:
    """Expand ``all`` and glob patterns over registered ids; exact ids pass through."""
    known = registered_env_ids()
    out: list[str] = []
    for pattern in patterns:
        if pattern == "all":
            matches = known
        elif any(ch in pattern for ch in "*?["):
            matches = [i for i in known if fnmatch.fnmatchcase(i, pattern)]
        else:
            if pattern not in gym.registry:
                raise SystemExit(
                    f"error: unknown env id {pattern!r}. Run `harness-gym list envs` for the ids; "
                    f"globs such as 'harness_gym/ClickButton-*' work too."
                )
            matches = [pattern]
        if not matches:
            raise SystemExit(f"error: no registered env matches {pattern!r}")
        out.extend(m for m in matches if m not in out)
    return out


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    what = args.what
    if what in ("tasks", "all"):
        out.write("Tasks:\n")
        _table(
            [["task", "max_steps", "description"]]
            + [[t.task_id, str(t.max_steps), t.description] for t in TASKS.values()],
            out,
        )
    if what in ("presets", "all"):
        out.write("\nPresets:\n")
        _table(
            [["preset", "harness_id", "non-default factors"]]
            + [[name, h.id, h.describe()] for name, h in PRESETS.items()],
            out,
        )
    if what in ("factors", "all"):
        out.write("\nFactors:\n")
        levels = {**{k: ", ".join(map(str, v)) for k, v in LEVELS.items()}}
        levels["field_order"] = "canonical, reversed, or a permutation of the task's fields"
        levels["tool_order"] = "canonical, reversed, alphabetical, or a permutation of tools"
        levels["extra_fields"] = f"any subset of {', '.join(EXTRA_FIELDS)}"
        levels["history_window"] = "0, 1, 2, ... or all"
        levels["step_budget"] = "a positive integer, or null for the task's own budget"
        levels["drop_tools"] = "canonical tool names to hide"
        levels["rename_tools"] = "canonical tool name -> shown name"
        levels["rename_args"] = "canonical argument name -> shown name"
        levels["prompt_template"] = "default, terse, verbose, or a template using {tools}"
        levels["max_action_chars"] = "longest agent output parsed (default 8192)"
        levels["few_shot"] = f"0 to {MAX_FEW_SHOT} worked examples in the system prompt"
        _table(
            [["factor", "default", "levels"]]
            + [[f, json.dumps(Harness().to_dict()[f]), levels[f]] for f in Harness.factor_names()],
            out,
        )
    if what == "envs":
        for env_id in registered_env_ids():
            out.write(env_id + "\n")
    return 0


def cmd_play(args: argparse.Namespace, out: TextIO, inp: TextIO) -> int:
    env = gym.make(args.env_id)
    base = env.unwrapped
    observation, info = env.reset(seed=args.seed)
    out.write(f"=== system prompt ===\n{base.system_prompt}\n")
    out.write(
        "Type an action as the agent would, '#N' to send legal action N, "
        "'?' to see the oracle's action, 'q' to quit.\n"
    )
    total = 0.0
    while True:
        out.write(f"\n=== observation (step {info['step']}) ===\n{observation}\n")
        out.write("--- legal actions ---\n")
        for i, text in enumerate(info["legal_actions"]):
            out.write(f"  #{i}: {text}\n")
        out.write("> ")
        out.flush()
        line = inp.readline()
        if not line or line.strip() == "q":
            break
        text = line.rstrip("\n")
        if text.strip() == "?":
            out.write(f"oracle: {base.oracle_action()}\n")
            continue
        if text.startswith("#") and text[1:].strip().isdigit():
            index = int(text[1:])
            if not 0 <= index < len(info["legal_actions"]):
                out.write(f"no legal action #{index}\n")
                continue
            text = info["legal_actions"][index]
        observation, reward, terminated, truncated, info = env.step(text)
        total += float(reward)
        if info["last_error"]:
            out.write(f"!! {info['error_kind']}: {info['last_error']}\n")
        if terminated or truncated:
            out.write(
                f"\nepisode over: return={total} success={info['success']} "
                f"steps={info['step']} invalid={info['invalid_actions']}\n"
            )
            break
    env.close()
    return 0


def cmd_eval(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.analysis.agent_spec import AgentSpecError, parse_agent
    from harness_gym.llm.cli_options import apply_llm_options
    from harness_gym.llm.rollout import Episode, run_batched
    from harness_gym.llm.spec import LLMSpecError

    env_ids = resolve_env_ids(args.env)
    if args.episodes < 1:
        raise SystemExit(f"error: --episodes must be >= 1, got {args.episodes}")
    try:
        agents = [parse_agent(a) for a in apply_llm_options(args.agent or ["oracle", "random"], args)]
    except (AgentSpecError, LLMSpecError) as err:
        raise SystemExit(f"error: {err}") from None
    seeds = [args.seed + i for i in range(args.episodes)]
    results: list[EpisodeResult] = []

    def episodes() -> Iterator[EpisodeResult]:
        for env_id in env_ids:
            for agent in agents:
                if agent.batched:  # language models: episodes in flight, requests batched
                    jobs = [Episode(lambda e=env_id: gym.make(e), agent.build, s, agent.name) for s in seeds]
                    for _, result, err in run_batched(jobs, in_flight=args.in_flight):
                        if err is not None:
                            raise err
                        assert result is not None
                        yield result
                    continue
                env = gym.make(env_id)
                built = agent.build(env)
                for seed in seeds:
                    yield run_episode(env, built, seed, agent.name)
                env.close()

    for result in progress(episodes(), total=len(env_ids) * len(agents) * len(seeds), desc="eval"):
        results.append(result)
    results.sort(key=lambda r: (r.env_id, r.agent, r.seed))
    if args.out:
        write_results(results, Path(args.out))
        out.write(f"wrote {len(results)} rows to {args.out}\n")
    write_summary(results, out)
    return 0


def write_results(results: Sequence[EpisodeResult], path: Path) -> None:
    """Write rows as JSON Lines (``.jsonl``) or CSV (``.csv``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [r.to_dict() for r in results]
    if path.suffix == ".csv":
        import csv

        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            for row in rows:
                writer.writerow({k: json.dumps(v) if isinstance(v, dict) else v for k, v in row.items()})
    else:
        with path.open("w") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")


def write_summary(results: Sequence[EpisodeResult], out: TextIO) -> None:
    """Success rate per task (rows) and preset (columns), one table per agent."""
    cells: dict[tuple[str, str, str], list[EpisodeResult]] = defaultdict(list)
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
        _table(rows, out)


def _rate(rows: list[EpisodeResult]) -> float | None:
    return sum(r.success for r in rows) / len(rows) if rows else None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.core.checker import check_harness
    from harness_gym.core.presets import resolve_harness
    from harness_gym.core.space import HarnessSpace

    tasks = sorted(TASKS) if args.task in (None, ["all"]) else args.task
    for task in tasks:
        if task not in TASKS:
            raise SystemExit(f"error: unknown task {task!r}; tasks: {sorted(TASKS)}")
    harnesses: list[Harness] = []
    for spec in args.harness or ["all"]:
        if spec == "all":
            harnesses.extend(PRESETS.values())
        elif spec.startswith(("balanced:", "covering:")):
            kind, _, path = spec.partition(":")
            space = HarnessSpace.from_yaml(path)
            harnesses.extend(space.balanced(2) if kind == "balanced" else space.covering(2))
        else:
            harnesses.append(resolve_harness(spec))
    jobs = [(t, h) for t in tasks for h in harnesses]
    failed = 0
    for task, harness in progress(jobs, total=len(jobs), desc="check", unit="pair"):
        report = check_harness(harness, task, seeds=range(args.seeds), raise_on_failure=False)
        failed += not report.ok
        if not report.ok or args.verbose:
            out.write(str(report) + "\n")
    out.write(
        f"checked {len(jobs)} (task, harness) pairs on {args.seeds} seeds each: "
        f"{len(jobs) - failed} ok, {failed} with failures\n"
    )
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness-gym", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=harness_gym.__version__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="list tasks, presets, factors or env ids")
    p.add_argument("what", nargs="?", default="all", choices=["all", "tasks", "presets", "factors", "envs"])
    p = sub.add_parser("play", help="play an env by hand in the terminal")
    p.add_argument("env_id")
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("eval", help="evaluate agents on envs and print a success table")
    p.add_argument(
        "--agent", action="append", help=f"agent spec (repeatable; default oracle and random): {AGENT_FORMS}"
    )
    p.add_argument(
        "--env",
        action="append",
        required=True,
        help="env id, glob such as 'harness_gym/ClickButton-*', or 'all' (repeatable)",
    )
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0, help="episode i uses seed SEED + i")
    p.add_argument("--out", help="write one row per episode to this .jsonl or .csv file")
    cli_train.add_model_eval_arguments(p)
    add_llm_arguments(p)
    cli_train.add_train_arguments(sub.add_parser(
        "train", help="train an RL baseline (SB3 or the text policy) and save it with its harness spec"))
    p = sub.add_parser("check", help="check harnesses keep the contract on tasks (check_harness)")
    p.add_argument("--task", action="append", help="task id (repeatable; default: all tasks)")
    p.add_argument(
        "--harness",
        action="append",
        help="preset name, YAML path, 'balanced:SPACE.yaml' (orthogonal array), 'covering:SPACE.yaml' "
        "or 'all' presets (repeatable)",
    )
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--verbose", "-v", action="store_true", help="print passing pairs too")
    cli_sweep.add_sweep_arguments(sub.add_parser("sweep", help=cli_sweep.SWEEP_HELP))
    cli_sweep.add_report_arguments(sub.add_parser("report", help=cli_sweep.REPORT_HELP))
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, inp: TextIO | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    if args.command == "list":
        return cmd_list(args, out)
    if args.command == "play":
        return cmd_play(args, out, inp or sys.stdin)
    if args.command == "eval":
        return cli_train.run_model_eval(args, out) if args.model else cmd_eval(args, out)
    if args.command == "train":
        return cli_train.run_train(args, out)
    if args.command == "check":
        return cmd_check(args, out)
    if args.command == "sweep":
        return cli_sweep.run_sweep(args, out)
    if args.command == "report":
        return cli_sweep.run_report(args, out)
    raise AssertionError(args.command)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
