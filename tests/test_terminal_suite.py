"""The terminal suite as a whole: size, coverage, and instances that differ in content."""

from __future__ import annotations

import numpy as np
import pytest

from harness_gym.envs.terminal.sandbox import bwrap_problem
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
