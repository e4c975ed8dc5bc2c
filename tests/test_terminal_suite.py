"""The terminal suite as a whole: size, coverage, and instances that differ in content."""

from __future__ import annotations

import numpy as np
import pytest

from harness_gym.envs.terminal.sandbox_view import bwrap_problem
from harness_gym.envs.terminal.tasks import TERMINAL_TASKS

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}")


def test_suite_has_at_least_24_tasks_with_distinct_ids() -> None:
    ids = [t.task_id for t in TERMINAL_TASKS]
    assert len(ids) >= 24 and len(set(ids)) == len(ids)
    for needed in ("TermGitMergeConflict", "TermFixUnittest", "TermWordFreq", "TermExtractArchive"):
        assert needed in ids


@pytest.mark.parametrize("task", TERMINAL_TASKS, ids=lambda t: t.task_id)
def test_generator_varies_content_across_seeds(task) -> None:
    """Seeds give different files or instructions, not only different sizes (no sandbox needed)."""
    contents, instructions = set(), set()
    inst = task()
    for seed in range(8):
        inst._clear()
        inst.build(np.random.default_rng(seed))
        contents.add(
            tuple(sorted((k, v if isinstance(v, bytes) else v.encode()) for k, v in inst.files.items()))
        )
        instructions.add(inst.instruction)
        again = task()
        again.build(np.random.default_rng(seed))
        assert again.files == inst.files and again.params == inst.params  # deterministic per seed
    assert len(contents) >= 6, f"{task.task_id}: only {len(contents)} distinct instances in 8 seeds"
    inst.close()


def _processes_of(uid: int | None) -> set[int]:
    import os

    if uid is None:  # not root: sandboxes run under the caller's uid; count bwrap children
        return {int(p) for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).startswith("bwrap")}
    out = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    out.add(int(pid))
            except OSError:
                pass
    return out


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.slow
def test_200_episodes_leave_no_process_and_no_directory() -> None:
    """Every family of episode (tasks under each coding preset, git set-ups, a Harbor task with
    its verifier sandbox), each leaving a background job running: nothing survives close()."""
    import gc
    import time
    from pathlib import Path

    from harness_gym.core.task import Action
    from harness_gym.envs.terminal import CODING_PRESETS
    from harness_gym.envs.terminal.env import TerminalEnv
    from harness_gym.envs.terminal.harbor import load_harbor_task
    from harness_gym.envs.terminal.sandbox_view import sandbox_uid

    gc.collect()
    uid = sandbox_uid()
    before = _processes_of(uid)
    harbor = load_harbor_task(Path(__file__).resolve().parent.parent / "examples" / "harbor" / "hello-file")
    tasks = [*TERMINAL_TASKS, harbor]
    roots, episodes = set(), 0
    for k, task in enumerate(tasks):
        env = TerminalEnv(task, harness=CODING_PRESETS[k % len(CODING_PRESETS)])
        for seed in range(8):
            env.reset(seed=seed)
            roots.add(env.terminal_task._root)
            env.step(
                env.format_action(Action.of("run", command="sleep 300 & (yes > /dev/null &) ; echo started"))
            )
            if seed % 2:  # half of them end by the oracle (submit runs the verifier)
                while not env.unwrapped._done:
                    env.step(env.unwrapped.oracle_action())
            episodes += 1
        env.close()
    assert episodes >= 200
    deadline = time.monotonic() + 10
    while _processes_of(uid) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_of(uid) - before == set()
    assert not any(r is not None and r.exists() for r in roots)
