"""Issue 25, item 5: the host loop survives whatever the agent leaves behind.

A 1,100-deep directory (and one deeper than PATH_MAX), a FIFO, directories without write or
search permission, episode directories of a killed harness, a symlinked ``/logs/verifier``
and a Harbor task folder whose ``tests/`` pulls in host files: each is fed to the real
sandbox, and every step answers, ``snapshot``/``restore`` work or fail with a clear error,
``close()`` leaves nothing behind and no host file reaches the verdict. The file runs as
root and, through ``runuser``, again as an unprivileged user.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from unprivileged import rerun_unprivileged

from harness_gym.core.task import Action
from harness_gym.envs.terminal import episode_dirs
from harness_gym.envs.terminal.env import TerminalEnv
from harness_gym.envs.terminal.episode_dirs import (
    OWNER_FILE,
    make_episode_dir,
    remove_episode_dir,
    remove_stale_episode_dirs,
)
from harness_gym.envs.terminal.harbor import load_harbor_task
from harness_gym.envs.terminal.harbor_format import UnsupportedHarborTask
from harness_gym.envs.terminal.sandbox_view import bwrap_problem
from harness_gym.envs.terminal.tasks import TermSortUnique

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}")

DEEP = (
    "cd /app && python3 -c \"import os\nfor _ in range({n}): os.mkdir('d'); os.chdir('d')\n"
    "open('leaf.txt', 'w').write('deep')\""
)


def run(task, command: str):
    return task.step(Action.of("run", command=command))


def fresh_task():
    task = TermSortUnique()
    task.reset(np.random.default_rng(0))
    return task


@pytest.mark.parametrize(
    "depth", [1100, pytest.param(2500, marks=pytest.mark.slow)]
)  # 2,500 levels: a path longer than PATH_MAX (slow: deep trees cost seconds on overlayfs)
def test_a_deep_directory_leaves_every_step_and_close_working(depth: int) -> None:
    env = TerminalEnv(TermSortUnique)
    env.reset(seed=0)
    root = env.terminal_task._root
    step = lambda cmd: env.step(env.format_action(Action.of("run", command=cmd)))  # noqa: E731
    _, _, _, _, info = step(DEEP.format(n=depth))
    assert info["command"]["exit_code"] == 0, info["command"]
    _, _, _, _, info = step("echo still here")
    assert info["command"]["exit_code"] == 0 and "host_error" not in info["command"]
    _, reward, terminated, _, info = env.step(env.format_action(Action.of("submit")))
    assert terminated and reward == 0.0 and info["verdict"]
    env.close()
    assert not root.exists(), "close() left the episode directory"


def test_a_host_error_in_a_step_is_reported_not_raised(monkeypatch) -> None:
    """Fault injection: whatever a host-side walk meets, the step answers with the error."""
    task = fresh_task()
    try:

        def broken(*args, **kwargs):
            raise RecursionError("maximum recursion depth exceeded")

        # The disk quota is enforced in the runner now (h25a); the host side of a step is run().
        monkeypatch.setattr(task._sandbox, "run", broken)
        step = run(task, "echo hi")
        assert not step.terminated and task.history[-1]["host_error"].startswith("RecursionError")
        assert "host error" in task.last["stderr"]
    finally:
        task.close()


def test_a_fifo_is_snapshotted_and_restored_as_a_fifo() -> None:
    task = fresh_task()
    try:
        run(task, "cd /app && mkfifo pipe && (setsid sh -c 'echo x > pipe' &) ; echo before > mark.txt")
        snap = task.snapshot()
        run(task, "cd /app && rm -f pipe mark.txt && echo after > other.txt")
        task.restore(snap)
        assert stat.S_ISFIFO(os.lstat(task.app / "pipe").st_mode)
        assert (task.app / "mark.txt").read_text() == "before\n" and not (task.app / "other.txt").exists()
        run(task, "test -p /app/pipe && cat /app/mark.txt")
        assert task.last["exit_code"] == 0 and task.last["stdout"] == "before\n"
    finally:
        root = task._root
        task.close()
    assert not root.exists()


@pytest.mark.slow
def test_a_deep_tree_and_a_symlink_out_are_snapshotted_without_following() -> None:
    task = fresh_task()
    try:
        run(task, DEEP.format(n=1100) + " && ln -s / /app/host_root")
        snap = task.snapshot()
        assert os.path.islink(snap[1] / "app" / "host_root"), "the symlink is copied as a symlink"
        run(task, "rm -rf /app/d")
        task.restore(snap)
        run(task, "ls /app/d/d/d >/dev/null && echo ok")
        assert task.last["stdout"] == "ok\n"
    finally:
        root = task._root
        task.close()
    assert not root.exists()


@pytest.mark.parametrize("mode", ["555", "000", "0"])
def test_directories_without_permissions_are_removed_on_close(mode: str) -> None:
    task = fresh_task()
    root = task._root
    run(
        task,
        f"cd /app && mkdir -p locked/inner && echo x > locked/inner/f && mkfifo locked/p "
        f"&& chmod {mode} locked/inner locked && chmod 555 /app",
    )
    assert task.last["exit_code"] == 0, task.last
    task.close()
    assert not root.exists(), f"a chmod {mode} directory survived close()"


def test_snapshot_restore_with_a_read_only_directory() -> None:
    task = fresh_task()
    try:
        run(task, "cd /app && mkdir ro && echo x > ro/f && chmod 555 ro")
        snap = task.snapshot()
        run(task, "echo y > /app/words.txt")
        task.restore(snap)
        assert stat.S_IMODE(os.lstat(task.app / "ro").st_mode) == 0o555
        assert (task.app / "ro" / "f").read_text() == "x\n"
        assert (task.app / "words.txt").read_text() != "y\n"
    finally:
        root = task._root
        task.close()
    assert not root.exists()


def test_episode_dirs_of_a_killed_harness_are_cleaned_up(tmp_path) -> None:
    """A child makes an episode directory (locked like an agent leaves it) and is SIGKILLed;
    the next episode directory made here removes it, and keeps the ones of live processes."""
    code = (
        "import os, signal, sys\n"
        "from harness_gym.envs.terminal.episode_dirs import make_episode_dir\n"
        "root = make_episode_dir()\n"
        "os.makedirs(root / 'app' / 'a' / 'b')\n"
        "os.chmod(root / 'app' / 'a', 0o555)\n"
        "print(root, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == -9, done.stderr
    stale = Path(done.stdout.strip())
    assert stale.is_dir() and (stale / OWNER_FILE).is_file()
    mine = make_episode_dir()  # cleans up first
    try:
        assert not stale.exists(), "the killed harness's episode directory is still there"
        assert mine.is_dir() and (mine / OWNER_FILE).read_text().split()[0] == str(os.getpid())
        assert str(mine) not in remove_stale_episode_dirs(), "a live process's directory was removed"
        assert mine.is_dir()
    finally:
        remove_episode_dir(mine)
    assert not mine.exists()


def test_an_owner_file_being_written_is_never_taken_for_a_stale_one() -> None:
    """Two processes (pytest-xdist workers, a vector env) make episode directories side by
    side: one caught between creating its owner file and writing it must keep its directory
    (a read of the empty file once removed a live episode directory under another worker)."""
    root = Path(tempfile.mkdtemp(prefix=episode_dirs.EPISODE_PREFIX, dir=episode_dirs.episode_base()))
    try:
        (root / OWNER_FILE).write_text("")  # created, not yet written
        assert str(root) not in remove_stale_episode_dirs()
        assert root.is_dir()
        made = make_episode_dir()
        assert not (made / (OWNER_FILE + ".partial")).exists() and (made / OWNER_FILE).read_text()
        remove_episode_dir(made)
    finally:
        remove_episode_dir(root)


def test_a_directory_without_owner_file_or_of_another_name_is_left_alone() -> None:
    other = Path(tempfile.mkdtemp(prefix="hg-term-"))  # no owner file: not ours to judge
    unrelated = Path(tempfile.mkdtemp(prefix="not-hg-"))
    try:
        remove_stale_episode_dirs()
        assert other.is_dir() and unrelated.is_dir()
    finally:
        remove_episode_dir(other)
        remove_episode_dir(unrelated)


def harbor_folder(tmp_path: Path, test_sh: str, name: str = "probe") -> Path:
    folder = tmp_path / name
    (folder / "tests").mkdir(parents=True)
    (folder / "environment").mkdir()
    (folder / "instruction.md").write_text("Do nothing.\n")
    (folder / "task.toml").write_text('version = "1.0"\n')
    (folder / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    (folder / "tests" / "test.sh").write_text(test_sh)
    return folder


def host_secret(tmp_path: Path) -> Path:
    """A host directory (outside every sandbox) holding a reward of 1 and a secret."""
    secret = Path(tempfile.mkdtemp(prefix="hg-host-secret-"))
    os.chmod(secret, 0o755)
    (secret / "reward.txt").write_text("1\n")
    (secret / "secret.txt").write_text("HOST-SECRET-4711\n")
    os.chmod(secret / "reward.txt", 0o644)
    os.chmod(secret / "secret.txt", 0o644)
    return secret


def submit(task_cls) -> tuple[float, str]:
    env = TerminalEnv(task_cls)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(env.format_action(Action.of("submit")))
    env.close()
    assert terminated
    return float(reward), info["verdict"]


@pytest.mark.parametrize("what", ["logs_verifier", "reward_file"])
def test_the_reward_reader_never_follows_a_symlink_onto_the_host(tmp_path, what: str) -> None:
    secret = host_secret(tmp_path)
    try:
        if what == "logs_verifier":
            script = f"#!/bin/bash\nrm -rf /logs/verifier\nln -s {secret} /logs/verifier\n"
        else:
            script = (
                f"#!/bin/bash\nmkdir -p /logs/verifier\nln -s {secret}/reward.txt /logs/verifier/reward.txt\n"
            )
        reward, verdict = submit(load_harbor_task(harbor_folder(tmp_path, script)))
        assert reward == 0.0 and ("symlink" in verdict or "no /logs/verifier/reward" in verdict), verdict
    finally:
        remove_episode_dir(secret)


def test_a_fifo_reward_file_does_not_hang_the_reader(tmp_path) -> None:
    script = "#!/bin/bash\nmkdir -p /logs/verifier\nmkfifo /logs/verifier/reward.txt\n"
    reward, verdict = submit(load_harbor_task(harbor_folder(tmp_path, script)))
    assert reward == 0.0 and "reward" in verdict


@pytest.mark.parametrize("where", ["tests/leak.txt", "tests/sub", "instruction.md"])
def test_a_task_folder_with_symlinks_is_rejected_at_load(tmp_path, where: str) -> None:
    secret = host_secret(tmp_path)
    try:
        folder = harbor_folder(tmp_path, "#!/bin/bash\ncat /tests/leak.txt /tests/sub/secret.txt\n")
        target = folder / where
        if target.exists():
            target.unlink()
        os.symlink(secret / "secret.txt" if where.endswith((".txt", ".md")) else secret, target)
        with pytest.raises(UnsupportedHarborTask, match="symlink"):
            load_harbor_task(folder)
    finally:
        remove_episode_dir(secret)


def test_a_symlink_added_to_tests_after_loading_never_reaches_the_verdict(tmp_path) -> None:
    secret = host_secret(tmp_path)
    try:
        folder = harbor_folder(
            tmp_path, "#!/bin/bash\ncat /tests/leak.txt\necho 1 > /logs/verifier/reward.txt\n"
        )
        task_cls = load_harbor_task(folder)
        os.symlink(secret / "secret.txt", folder / "tests" / "leak.txt")
        reward, verdict = submit(task_cls)
        assert reward == 0.0 and "symlink" in verdict and "HOST-SECRET" not in verdict, verdict
    finally:
        remove_episode_dir(secret)


def test_this_file_passes_as_an_unprivileged_user() -> None:
    done = rerun_unprivileged(__file__, "-k", "not unprivileged")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    tail = done.stdout[-300:]
    assert " passed" in tail and "failed" not in tail and "skipped" not in tail, done.stdout[-2000:]
