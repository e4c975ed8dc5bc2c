"""Issue 37, item 3: the Harbor loader's defects. A Dockerfile ``RUN`` that creates
``/logs`` resets (Harbor's containers have a writable ``/logs``); a multi-step folder whose
task.toml lists no ``[[steps]]`` is reported as such (not as "missing instruction.md"); a
test.sh that installs packages when it runs is refused at load with the line; a FIFO the
agent leaves at the runner's temporary paths does not stall the next command (as root and as
an unprivileged uid)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from unprivileged import rerun_unprivileged

from harness_gym.core.task import Action
from harness_gym.envs.terminal.episode_dirs import make_episode_dir, remove_episode_dir
from harness_gym.envs.terminal.harbor import load_harbor_task
from harness_gym.envs.terminal.harbor_format import UnsupportedHarborTask, verify_time_install
from harness_gym.envs.terminal.sandbox import Sandbox
from harness_gym.envs.terminal.sandbox_limits import SandboxLimits
from harness_gym.envs.terminal.sandbox_view import bwrap_problem

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "harbor"
needs_bwrap = pytest.mark.skipif(
    bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}"
)


def copy_example(tmp_path: Path, name: str = "hello-file") -> Path:
    folder = tmp_path / name
    shutil.copytree(EXAMPLES / name, folder)
    return folder


@needs_bwrap
def test_a_run_that_creates_logs_resets_and_the_oracle_passes(tmp_path: Path) -> None:
    folder = copy_example(tmp_path)
    (folder / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm\nWORKDIR /app\n"
        "RUN mkdir -p /logs/agent /logs/verifier && echo 1 > /logs/verifier/reward.txt\n"
    )
    task = load_harbor_task(folder)()
    try:
        task.reset(np.random.default_rng(0))
        assert not task.step(Action.of("submit")).success, task.verdict  # its /logs is not the verifier's
    finally:
        task.close()
    task = load_harbor_task(folder)()
    try:
        task.reset(np.random.default_rng(0))
        task.step(Action.of("run", command=task.solution()))
        assert task.step(Action.of("submit")).success, task.verdict
    finally:
        task.close()


def test_a_multi_step_folder_without_steps_entries_is_named_as_such(tmp_path: Path) -> None:
    folder = copy_example(tmp_path)
    (folder / "instruction.md").unlink()
    (folder / "steps" / "one").mkdir(parents=True)
    (folder / "steps" / "one" / "instruction.md").write_text("Step one.\n")
    with pytest.raises(UnsupportedHarborTask) as err:
        load_harbor_task(folder)
    assert err.value.kind == "bad-toml"
    assert "multi-step" in str(err.value) and "[[steps]]" in str(err.value)
    assert "missing instruction.md" not in str(err.value)


@pytest.mark.parametrize(
    "line",
    [
        "uvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py",
        "pip install pytest==8.4.1",
        "python3 -m pip install -q requests",
        "apt-get update && apt-get install -y curl",
        "cd /app && uv run pytest",
        "sudo npm install left-pad",
    ],
)
def test_a_test_script_that_installs_packages_is_refused_at_load(tmp_path: Path, line: str) -> None:
    folder = copy_example(tmp_path)
    script = folder / "tests" / "test.sh"
    script.write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n" + line + "\necho 1 > /logs/verifier/reward.txt\n"
    )
    with pytest.raises(UnsupportedHarborTask) as err:
        load_harbor_task(folder)
    assert err.value.kind == "verify-time-install"
    assert "line 3" in str(err.value) and "offline" in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        "# pip install pytest\necho 'run pip install yourself'",
        "pip list && python3 -m pytest /tests",
        "if PYTHONPATH=/app python3 /tests/t.py; then echo 1; fi",
        "uv --version",
    ],
)
def test_scripts_that_only_mention_or_query_a_package_tool_load(text: str) -> None:
    assert verify_time_install(text) is None


@needs_bwrap
def test_a_fifo_at_the_runners_temporary_paths_does_not_stall_the_next_command() -> None:
    root = make_episode_dir()
    box = Sandbox(root, SandboxLimits(timeout=8.0))
    try:
        planted = box.run(
            "mkfifo /tmp/.hg-runner-cmd /tmp/.hg-runner-script && echo planted", persistent=True
        )
        assert planted.stdout == "planted\n", planted
        res = box.run("echo next", persistent=True)
        assert res.stdout == "next\n" and not res.timed_out and not res.sandbox_restarted, res
        assert box.run("mkfifo /tmp/.hg-runner-script; echo made").stdout == "made\n"
        long = box.run("true " + "x" * 70000 + "; echo long")  # past one exec argument: a script file
        assert long.stdout == "long\n" and not long.timed_out and not long.sandbox_restarted, long
    finally:
        box.close()
        remove_episode_dir(root)


def test_the_loader_fixes_hold_as_an_unprivileged_user() -> None:
    done = rerun_unprivileged(__file__, "-k", "not unprivileged", timeout=600)
    tail = done.stdout[-3000:]
    assert done.returncode == 0, tail
    assert " passed" in tail and "failed" not in tail, tail
