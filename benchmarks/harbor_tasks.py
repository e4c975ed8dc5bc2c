"""Harbor task folders from a local path: how many load, build, pass their own solution.

    .venv/bin/python benchmarks/harbor_tasks.py FOLDER... [--build] [--sample N] [--seed S]
        [--presets Json,TerminusStyle,...] [--json OUT]

Every folder holding a ``task.toml`` at or under each FOLDER is tried (a dev set copied from
public repositories into a scratch folder; nothing here is committed). The report:

* folders tried, loaded, and rejected by reason (``UnsupportedHarborTask.kind``, with one
  example message per kind);
* of the loaded ones (all, or ``--sample N`` of them drawn with ``--seed``): those whose
  instance needs a root file system built from its Dockerfile, and with ``--build`` how many
  built (a failed build names its Dockerfile line) and the build seconds (a cached root file
  system counts its recorded build time);
* the untouched instance failing its own tests (target: 100%), and the task's own
  ``solution/solve.sh`` passing its tests under the canonical harness (``Json``) and under
  each coding preset (target: at least 50% under every one), side by side.

Targets on the issue's terms: at least 60% of the folders load; at least 50% pass their own
solution under every coding preset; the untouched instance fails in 100% of them. Tasks that
need a build are skipped from the solution columns without ``--build``.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from harness_gym.envs.terminal.env import TerminalEnv
from harness_gym.envs.terminal.harbor import find_task_folders, load_harbor_task
from harness_gym.envs.terminal.harbor_format import UnsupportedHarborTask
from harness_gym.envs.terminal.presets import CODING_PRESETS


def play_oracle(task: Any, preset: str) -> tuple[bool, str]:
    env = TerminalEnv(task, harness=preset)
    try:
        env.reset(seed=0)
        info: dict[str, Any] = {}
        for _ in range(4 * len(task.steps) + 4):
            _, _, terminated, truncated, info = env.step(env.oracle_action())
            if terminated or truncated:
                break
        return bool(info.get("success")), str(info.get("verdict", ""))[-300:]
    finally:
        env.close()


def untouched_fails(task: Any) -> tuple[bool, str]:
    env = TerminalEnv(task, harness="Json")
    try:
        env.reset(seed=0)
        ok, why = env.terminal_task.verify()
        return not ok, why[-200:]
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--build", action="store_true", help="build root file systems (slow, cached)")
    parser.add_argument("--sample", type=int, default=0, help="run only N of the loaded tasks (0: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument(
        "--presets", default=",".join(("Json", *CODING_PRESETS)), help="harnesses for the own-solution runs"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the per-task results here")
    args = parser.parse_args(argv)
    presets = list(dict.fromkeys(p for p in args.presets.split(",") if p))

    folders = [f for root in args.folders for f in find_task_folders(root)]
    loaded, rejected, examples = [], collections.Counter(), {}
    start = time.monotonic()
    for folder in folders:
        try:
            loaded.append(load_harbor_task(folder))
        except UnsupportedHarborTask as err:
            rejected[err.kind] += 1
            examples.setdefault(err.kind, str(err))
        except Exception as err:  # noqa: BLE001 - a loader bug: counted apart, never hidden
            rejected["loader-error"] += 1
            examples.setdefault("loader-error", f"{folder}: {type(err).__name__}: {err}")
    load_seconds = time.monotonic() - start
    print(f"folders tried   {len(folders):6d}")
    print(f"loaded          {len(loaded):6d}  ({_pct(len(loaded), len(folders))})   in {load_seconds:.1f} s")
    for kind, count in rejected.most_common():
        print(f"  rejected {kind:22s} {count:5d}  e.g. {examples[kind][:150]}")

    chosen = list(loaded)
    if args.sample and args.sample < len(chosen):
        chosen = random.Random(args.seed).sample(chosen, args.sample)
    needs_build = [t for t in chosen if t.build_steps]
    print(f"\nrun on {len(chosen)} loaded task(s): {len(needs_build)} need a built root file system")
    rows, build_seconds, build_failures = [], [], collections.Counter()
    for n, task in enumerate(sorted(chosen, key=lambda t: t.task_id), 1):
        row: dict[str, Any] = {
            "task": task.task_id,
            "folder": str(task.folder),
            "build": bool(task.build_steps),
        }
        if task.build_steps:
            if not args.build:
                row["skipped"] = "needs a build (--build)"
                rows.append(row)
                continue
            t0 = time.monotonic()
            try:
                built = task.build_rootfs(progress=False)
            except Exception as err:  # noqa: BLE001 - a failed build is a reported outcome
                row["build_error"] = f"{type(err).__name__}: {err}"[:400]
                build_failures[type(err).__name__] += 1
                rows.append(row)
                print(
                    f"[{n}/{len(chosen)}] {task.task_id}: build failed: {row['build_error'][:200]}",
                    flush=True,
                )
                continue
            row["build_seconds"] = built.build_seconds or round(time.monotonic() - t0, 1)
            build_seconds.append(row["build_seconds"])
        try:
            row["untouched_fails"], row["untouched_verdict"] = untouched_fails(task)
            for preset in presets:
                row[preset], row[f"{preset}_verdict"] = play_oracle(task, preset)
        except Exception as err:  # noqa: BLE001 - an instance that cannot start is reported
            row["run_error"] = f"{type(err).__name__}: {err}"[:400]
        rows.append(row)
        marks = " ".join(f"{p}={'ok' if row.get(p) else 'FAIL'}" for p in presets)
        print(
            f"[{n}/{len(chosen)}] {task.task_id}: untouched fails={row.get('untouched_fails')} {marks}",
            flush=True,
        )

    ran = [r for r in rows if "untouched_fails" in r]
    print(f"\nbuilt           {len(build_seconds):6d} of {len(needs_build)} needing a build", end="")
    print(f"  (failed: {dict(build_failures)})" if build_failures else "")
    if build_seconds:
        print(
            f"build seconds   total {sum(build_seconds):.0f}, median {statistics.median(build_seconds):.0f}, "
            f"max {max(build_seconds):.0f}"
        )
    print(f"ran             {len(ran):6d}  (errors starting: {sum('run_error' in r for r in rows)})")
    fails = sum(bool(r.get("untouched_fails")) for r in ran)
    print(f"untouched instance fails its tests: {fails}/{len(ran)} ({_pct(fails, len(ran))})  [target 100%]")
    print("own solution passes, side by side (of the tasks run; of all tried):")
    for preset in presets:
        passed = sum(bool(r.get(preset)) for r in ran)
        share, of_tried = _pct(passed, len(ran)), _pct(passed, len(folders))
        print(f"  {preset:20s} {passed:5d}/{len(ran):<5d} {share:>7s}   of tried {of_tried}")
    if args.json:
        args.json.write_text(
            json.dumps({"rejected": dict(rejected), "examples": examples, "rows": rows}, indent=1)
        )
        print(f"per-task results: {args.json}")
    return 0


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


if __name__ == "__main__":
    sys.exit(main())
