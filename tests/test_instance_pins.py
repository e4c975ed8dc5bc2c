"""Every web task's instance for seeds 0-299, pinned before the reset-cost work (issue 44).

``tests/fixtures/instance_pins.json`` holds, per task, one hash of the task-state digests
(the whole true state: page, instruction, targets) of seeds 0-299, and of the legal actions of
the first 20 seeds. A cheaper instance generator must build the very same instances. Regenerate
only when a change is *meant* to alter instances: ``HARNESS_GYM_REPIN=1 pytest
tests/test_instance_pins.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from harness_gym import TASKS
from harness_gym.core.registry import family_of

FIXTURE = Path(__file__).parent / "fixtures" / "instance_pins.json"
SEEDS = range(300)
WEB_TASKS = sorted(t for t in TASKS if family_of(t) == "web")


def instances_hash(task_id: str) -> str:
    task = TASKS[task_id]()
    h = hashlib.sha256()
    for seed in SEEDS:
        task.reset(np.random.default_rng(seed))
        h.update(task.digest().encode())
        if seed < 20:
            h.update(repr(task.legal_actions()).encode())
    return h.hexdigest()[:16]


def test_instances_match_the_pinned_ones() -> None:
    found = {task_id: instances_hash(task_id) for task_id in WEB_TASKS}
    if os.environ.get("HARNESS_GYM_REPIN"):
        FIXTURE.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(FIXTURE.read_text())
    assert sorted(pinned) == WEB_TASKS, "a web task was added or removed: repin"
    assert {t: h for t, h in found.items() if pinned[t] != h} == {}
    assert len(set(found.values())) == len(found)
