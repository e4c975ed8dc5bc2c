"""Harbor tasks whose environment is built from the Dockerfile (real builds: slow).

``tests/fixtures/harbor-build/`` holds a task that needs Debian and PyPI packages and a
``WORKDIR`` outside ``/app``; ``$HARNESS_GYM_HARBOR_DEV`` may name a folder of public Harbor
tasks (the dev set; never committed), of which three that need a build are built and run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness_gym.envs.terminal.env import TerminalEnv
from harness_gym.envs.terminal.harbor import find_task_folders, load_harbor_task
from harness_gym.envs.terminal.harbor_format import UnsupportedHarborTask
from harness_gym.envs.terminal.sandbox_view import bwrap_problem

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}"),
]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "harbor-build"


def _oracle_and_untouched(task) -> tuple[bool, bool, str]:
    env = TerminalEnv(task, harness="TerminusStyle")
    try:
        env.reset(seed=0)
        untouched, _ = env.terminal_task.verify()
        env.reset(seed=0)
        info: dict = {}
        for _ in range(8):
            _, _, terminated, truncated, info = env.step(env.oracle_action())
            if terminated or truncated:
                break
        return untouched, bool(info.get("success")), str(info.get("verdict", ""))
    finally:
        env.close()


def test_a_task_needing_packages_builds_and_its_oracle_passes() -> None:
    task = load_harbor_task(FIXTURES / "apt-pip-jq")
    assert task.build_steps and "apt-get" in task.plan.needs_build[0]
    built = task.build_rootfs()
    assert (built.path / "usr" / "bin" / "jq").exists() and (built.app / "data.json").is_file()
    assert os.path.islink(built.path / "workspace")  # WORKDIR /workspace is /app in episodes
    untouched, success, verdict = _oracle_and_untouched(task)
    assert not untouched and success, verdict


def test_three_public_tasks_build_and_pass_their_own_solution() -> None:
    dev = os.environ.get("HARNESS_GYM_HARBOR_DEV")
    if not dev or not Path(dev).is_dir():
        pytest.skip("set HARNESS_GYM_HARBOR_DEV to a folder of public Harbor tasks (the dev set)")
    passed = []
    for folder in find_task_folders(dev):
        try:
            task = load_harbor_task(folder)
        except UnsupportedHarborTask:
            continue
        if not task.build_steps or task.steps[0].solution is None:
            continue
        untouched, success, _ = _oracle_and_untouched(task)
        if success and not untouched:
            passed.append(folder.name)
        if len(passed) == 3:
            break
    assert len(passed) == 3, passed
