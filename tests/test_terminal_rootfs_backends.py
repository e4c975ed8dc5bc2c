"""The execution-backend seam of terminal episodes (envs/terminal/backends.py).

No Harbor environment can run in this project's test machines (the harbor package needs
Python >= 3.12; see docs/terminal.md, "Execution backends"), so the Harbor backend is
driven here through Harbor's environment interface (``start``, ``exec``, ``upload_dir``,
``download_dir``, ``stop``: ``harbor/environments/base.py``) served by a real bubblewrap
sandbox: every command really runs; only the engine behind the interface differs.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from harness_gym.core.task import Action
from harness_gym.envs.terminal.backends import (
    BACKENDS,
    ExecutionBackend,
    HarborBackend,
    open_backend,
)
from harness_gym.envs.terminal.episode_dirs import (
    copy_tree,
    make_episode_dir,
    remove_episode_dir,
    remove_tree,
)
from harness_gym.envs.terminal.sandbox import Sandbox
from harness_gym.envs.terminal.sandbox_limits import SandboxLimits
from harness_gym.envs.terminal.sandbox_view import bwrap_problem
from harness_gym.envs.terminal.tasks import TermGitCommit, TermSortUnique

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}")


@dataclass
class ExecResult:
    """Harbor's ``harbor.environments.base.ExecResult`` fields."""

    stdout: str | None
    stderr: str | None
    return_code: int


class HarborInterfaceOverBwrap:
    """Harbor's BaseEnvironment calls served by a real bwrap Sandbox: its own episode
    directory, with writable ``/tests``, ``/logs`` and ``/solution`` folders as Harbor's
    containers have them."""

    MOUNTS = ("tests", "logs", "solution")

    def __init__(self) -> None:
        self.root = make_episode_dir()
        for name in self.MOUNTS:
            (self.root / name).mkdir()
        self.sandbox: Sandbox | None = None
        self.calls: list[str] = []

    def _host(self, path: str) -> Path:
        top, _, rest = path.strip("/").partition("/")
        if top not in ("app", *self.MOUNTS):
            raise ValueError(f"{path} is not a folder this environment holds")
        return self.root / top / rest

    async def start(self, force_build: bool) -> None:
        self.calls.append("start")
        binds = tuple((self.root / n, f"/{n}", True) for n in self.MOUNTS)
        self.sandbox = Sandbox(self.root, SandboxLimits(timeout=20.0), binds=binds)

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None) -> ExecResult:
        self.calls.append("exec")
        assert self.sandbox is not None
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in (env or {}).items())
        res = self.sandbox.run(f"{exports}cd {shlex.quote(cwd or '/app')} && {command}", timeout=timeout_sec)
        if res.timed_out:  # as Harbor's docker environment reports it
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds")
        return ExecResult(res.stdout, res.stderr, res.exit_code if res.exit_code is not None else -1)

    async def upload_dir(self, source_dir, target_dir) -> None:
        self.calls.append("upload_dir")
        target = self._host(target_dir)
        for child in Path(source_dir).iterdir():
            copy_tree(child, target / child.name)
        assert self.sandbox is not None
        self.sandbox.prepare()  # hand the files to the sandbox's user

    async def download_dir(self, source_dir, target_dir) -> None:
        self.calls.append("download_dir")
        Path(target_dir).mkdir(parents=True, exist_ok=True)
        for child in self._host(source_dir).iterdir():
            remove_tree(Path(target_dir) / child.name)
            copy_tree(child, Path(target_dir) / child.name)

    async def stop(self, delete: bool) -> None:
        self.calls.append("stop")
        if self.sandbox is not None:
            self.sandbox.close()
        remove_episode_dir(self.root)


@pytest.fixture
def harbor_env():
    made: list[HarborInterfaceOverBwrap] = []

    def make(root: Path) -> HarborInterfaceOverBwrap:
        made.append(HarborInterfaceOverBwrap())
        return made[-1]

    yield made, HarborBackend.factory(make)
    for env in made:
        if env.root.exists():
            asyncio.run(env.stop(True))


def test_bwrap_is_the_default_backend_and_a_sandbox() -> None:
    root = make_episode_dir()
    try:
        backend = open_backend("bwrap", root, SandboxLimits())
        assert isinstance(backend, Sandbox) and isinstance(backend, ExecutionBackend)
        assert backend.run("echo ok").stdout == "ok\n"
        backend.close()
    finally:
        remove_episode_dir(root)
    assert TermSortUnique.backend == "bwrap" and set(BACKENDS) == {"bwrap"}


def test_an_unknown_backend_is_an_error_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown terminal backend 'docker': use one of \['bwrap'\]"):
        open_backend("docker", tmp_path)


def test_harbor_backend_is_an_execution_backend(tmp_path: Path) -> None:
    assert isinstance(HarborBackend(object(), tmp_path), ExecutionBackend)


def test_a_task_runs_its_oracle_through_a_harbor_environment(harbor_env, monkeypatch) -> None:
    made, factory = harbor_env
    monkeypatch.setattr(TermSortUnique, "backend", staticmethod(factory))
    task = TermSortUnique()
    try:
        task.reset(np.random.default_rng(3))
        assert isinstance(task._sandbox, HarborBackend)
        res = task.step(Action.of("run", command=task.solution()))
        assert not res.terminated
        res = task.step(Action.of("submit"))
        assert res.terminated and res.success and res.reward == 1.0, task.verdict
        env = made[-1]
        assert env.calls[0] == "start" and "upload_dir" in env.calls and "download_dir" in env.calls
    finally:
        task.close()
    assert made[-1].calls[-1] == "stop" and not made[-1].root.exists()


def test_the_untouched_instance_fails_through_a_harbor_environment(harbor_env, monkeypatch) -> None:
    _, factory = harbor_env
    monkeypatch.setattr(TermGitCommit, "backend", staticmethod(factory))
    task = TermGitCommit()
    try:
        task.reset(np.random.default_rng(1))
        res = task.step(Action.of("submit"))
        assert res.terminated and not res.success and res.reward == 0.0
    finally:
        task.close()


def test_harbor_backend_commands_files_persistence_and_caps(harbor_env, tmp_path: Path) -> None:
    made, factory = harbor_env
    root = tmp_path / "episode"
    (root / "app").mkdir(parents=True)
    (root / "app" / "seed.txt").write_text("seed\n")
    backend = factory(
        root, SandboxLimits(timeout=5.0, head_bytes=100, tail_bytes=100), env={"GREETING": "hi"}
    )
    try:
        res = backend.run("cat seed.txt; echo $GREETING; pwd")
        assert (res.stdout, res.exit_code) == ("seed\nhi\n/app\n", 0)
        assert backend.run("exit 3").exit_code == 3
        # persistent: the working directory and exported variables carry over
        backend.run("mkdir -p sub && cd sub && export KEPT=yes", persistent=True)
        assert backend.run("pwd; echo $KEPT", persistent=True).stdout == "/app/sub\nyes\n"
        assert backend.run("pwd; echo ${KEPT:-none}").stdout == "/app\nnone\n"  # a fresh shell
        backend.reset_shell()
        assert backend.run("pwd", persistent=True).stdout == "/app\n"
        # output is capped as the sandbox caps it
        big = backend.run("head -c 5000 /dev/zero | tr '\\0' x")
        assert big.stdout_bytes == 5000 and big.stdout_omitted == 4800 and "bytes omitted" in big.stdout
        assert "output_capped" in big.contained
        # a timeout comes back as a result, never an exception
        slow = backend.run("sleep 30", timeout=1)
        assert slow.timed_out and slow.exit_code is None and "timed out" in slow.stderr
        # files
        assert backend.write_file("notes/a.txt", "é line\n") == {"ok": True}
        read = backend.read_file("notes/a.txt")
        assert read["ok"] and read["content"] == "é line\n"
        assert not backend.read_file("missing.txt")["ok"]
        # stop_agent brings /app back to the host copy for host-side verifiers
        backend.run("echo late > late.txt")
        backend.stop_agent()
        assert (root / "app" / "late.txt").read_text() == "late\n"
        assert (root / "app" / "notes" / "a.txt").read_text() == "é line\n"
    finally:
        backend.close()


def test_harbor_backend_verifier_uploads_binds_and_brings_back_the_writable_ones(
    harbor_env, tmp_path
) -> None:
    _, factory = harbor_env
    root = tmp_path / "episode"
    (root / "app").mkdir(parents=True)
    (root / "app" / "answer.txt").write_text("42\n")
    tests, logs = tmp_path / "tests", tmp_path / "logs"
    tests.mkdir()
    (logs / "verifier").mkdir(parents=True)
    (tests / "test.sh").write_text(
        "grep -qx 42 /app/answer.txt && echo 1 > /logs/verifier/reward.txt; "
        'echo "{\\"home\\": \\"$HOME\\", \\"git\\": \\"$GIT_CONFIG_GLOBAL\\"}" > /logs/verifier/env.json\n'
    )
    backend = factory(root, SandboxLimits(timeout=10.0))
    try:
        res = backend.run_verifier(
            "bash /tests/test.sh", timeout=10, binds=((tests, "/tests", False), (logs, "/logs", True))
        )
        assert res.exit_code == 0, res.stderr
        assert (logs / "verifier" / "reward.txt").read_text().strip() == "1"
        seen = json.loads((logs / "verifier" / "env.json").read_text())
        assert seen["git"] == "/dev/null"  # the verifier's git safety settings travel with exec
    finally:
        backend.close()


def test_from_task_dir_says_what_it_needs_without_harbor(tmp_path: Path) -> None:
    try:
        import harbor  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs the harbor package"):
            HarborBackend.from_task_dir(tmp_path, "docker", tmp_path / "trial")
    else:  # pragma: no cover - a machine with harbor installed
        pytest.skip("harbor is installed here")


def test_binds_reach_a_harbor_environment_and_follow_their_host_folder(harbor_env, tmp_path: Path) -> None:
    _, factory = harbor_env
    root, solution = tmp_path / "episode", tmp_path / "solution"
    (root / "app").mkdir(parents=True)
    solution.mkdir()
    backend = factory(root, SandboxLimits(timeout=10.0), binds=((solution, "/solution", False),))
    try:
        assert backend.run("ls -A /solution | wc -l").stdout.strip() == "0"
        (solution / "solve.sh").write_text("echo solved > /app/out.txt\n")  # the oracle uploads it
        assert backend.run("bash /solution/solve.sh && cat /app/out.txt").stdout == "solved\n"
        (solution / "solve.sh").write_text("echo second\n")
        assert backend.run("bash /solution/solve.sh").stdout == "second\n"
    finally:
        backend.close()


def test_open_backend_passes_binds_to_the_sandbox() -> None:
    root = make_episode_dir()
    extra = root / "extra"  # beside app/ and home/: reachable for the sandbox's own uid
    extra.mkdir(mode=0o755)
    (extra / "f.txt").write_text("bound\n")
    try:
        backend = open_backend("bwrap", root, SandboxLimits(), binds=((extra, "/extra", False),))
        assert backend.run("cat /extra/f.txt").stdout == "bound\n"
        backend.close()
    finally:
        remove_episode_dir(root)
