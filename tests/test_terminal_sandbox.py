"""Containment of the terminal sandbox: every bad-input case of issue 13, fed through an env.

Each case checks that the command is contained, bounded in time, recorded in ``info``, that
the env keeps working afterwards, and that after ``close()`` no process of the episode is left.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from harness_gym.envs.terminal.env import TerminalEnv
from harness_gym.envs.terminal.sandbox_limits import SandboxLimits
from harness_gym.envs.terminal.sandbox_view import bwrap_problem, sandbox_uid
from harness_gym.envs.terminal.tasks import TermSortUnique

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}")


class FastLimits(TermSortUnique):
    limits = SandboxLimits(timeout=2.0, cpu_seconds=2, file_size=8 << 20, disk_quota=32 << 20)


def run(env: TerminalEnv, command: str) -> tuple[str, dict, float]:
    start = time.monotonic()
    obs, _, _, _, info = env.step(json.dumps({"name": "run", "arguments": {"command": command}}))
    return obs, info, time.monotonic() - start


@pytest.fixture(autouse=True)
def _baseline() -> None:
    """Processes of sandboxes that other tests in this process left to the garbage collector
    (e.g. envs check_harness builds) are not this test's: only new ones count."""
    gc.collect()
    BASELINE.clear()
    BASELINE.update(_sandbox_processes())


BASELINE: set[int] = set()


def sandbox_processes(wait: float = 5.0) -> list[int]:
    """New processes of the sandbox uid, waiting up to ``wait`` s for killed ones to be gone."""
    deadline = time.monotonic() + wait
    while True:
        found = [p for p in _sandbox_processes() if p not in BASELINE]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _sandbox_processes() -> list[int]:
    uid = sandbox_uid()
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if uid is not None and p.stat().st_uid == uid:
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def assert_works(env: TerminalEnv) -> None:
    obs, info, _ = run(env, "echo still-$((40 + 2))")
    assert "still-42" in obs and info["command"]["exit_code"] == 0


CASES = {
    "fork_bomb": (
        ":(){ :|:& };:",
        lambda c: "timeout" in c["contained"] or "processes_killed" in c["contained"],
    ),
    "yes_big_file": (
        "yes > big_file",
        lambda c: c["signal"] == "SIGXFSZ" or c["exit_code"] == 128 + 25 or c["timed_out"],
    ),
    "infinite_loop": ("while :; do :; done", lambda c: c["timed_out"]),
    "sleep_1000": ("sleep 1000", lambda c: c["timed_out"]),
    # Counted to the last byte, or (on a loaded machine) cut by the timeout: bounded either way.
    "100mb_line": (
        "head -c 100000000 /dev/zero | tr '\\0' a",
        lambda c: c["stdout_bytes"] == 100_000_000 or "timeout" in c["contained"],
    ),
    "binary_output": ("printf '\\xff\\xfe\\x00abc\\x80'", lambda c: c["binary"]),
    "background": ("sleep 1000 & sleep 1000 & echo started", lambda c: c["killed_processes"] >= 2),
    "never_reads_stdin": ("cat; read x; echo done-$?", lambda c: c["exit_code"] == 0 and not c["timed_out"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_containment_case(name: str) -> None:
    command, contained = CASES[name]
    env = TerminalEnv(FastLimits)
    env.reset(seed=0)
    obs, info, seconds = run(env, command)
    assert seconds < 15, f"{name} took {seconds:.1f}s"
    assert contained(info["command"]), info["command"]
    assert len(obs) < 20_000
    if name == "yes_big_file":
        size = (env.terminal_task.app / "big_file").stat().st_size
        assert size <= 8 << 20
    if name == "background":
        assert not [p for p in _sandbox_processes() if "sleep" in _cmdline(p)]
    assert_works(env)
    env.close()
    left = sandbox_processes()
    assert left == [], [_cmdline(p) for p in left]


def test_exit_code_of_a_command_that_closes_its_output_before_exiting() -> None:
    """The runner stops reading when the output closes; the command's own exit status must
    still be the one recorded (reaping strays once took it, and reported 0)."""
    env = TerminalEnv(FastLimits)
    env.reset(seed=0)
    _, info, _ = run(env, "exec >&- 2>&-; sleep 0.3; exit 7")
    assert info["command"]["exit_code"] == 7 and not info["command"]["timed_out"], info["command"]
    env.close()


def test_persistent_shell_timeout_restarts_and_keeps_working() -> None:
    env = TerminalEnv(FastLimits, terminal={"shell": "persistent"})
    env.reset(seed=0)
    run(env, "cd /tmp && X=7")
    obs, info, _ = run(env, "echo $X; pwd")
    assert "7" in obs and info["command"]["cwd"] == "/tmp"
    obs, info, seconds = run(env, "sleep 1000")
    assert info["command"]["timed_out"] and info["command"]["shell_restarted"] and seconds < 15
    obs, info, _ = run(env, "echo [$X]; pwd")
    assert "[]" in obs and info["command"]["cwd"] == "/app"
    env.close()
    assert sandbox_processes() == []


def test_rm_rf_root_only_touches_the_episode() -> None:
    env = TerminalEnv(FastLimits)
    env.reset(seed=0)
    _, info, seconds = run(env, "rm -rf --no-preserve-root / 2>/dev/null; ls /usr/bin | wc -l")
    assert seconds < 15 and Path("/usr/bin/bash").exists()
    assert Path(__file__).exists()
    assert_works(env)
    env.close()


def test_host_files_are_invisible_and_read_only() -> None:
    env = TerminalEnv(FastLimits)
    env.reset(seed=0)
    obs, info, _ = run(env, f"ls /root; ls /work; cat {Path(__file__).resolve()}; echo $PATH; env")
    assert "test_rm_rf_root" not in obs and "No such file" in obs
    assert "VIRTUAL_ENV" not in obs and "PYTEST" not in obs  # no host variable leaks in
    marker = f"hg-escape-{os.getpid()}"
    obs, info, _ = run(env, f"touch /usr/{marker} /etc/{marker} /{marker} /opt/{marker}; echo rc=$?")
    for base in ("/usr", "/etc", "/", "/opt"):
        assert not Path(base, marker).exists()
    assert "rc=1" in obs
    env.close()


def test_host_loopback_is_unreachable() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(5)
    port = server.getsockname()[1]
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(_accept(server)), daemon=True)
    thread.start()
    env = TerminalEnv(FastLimits)
    env.reset(seed=0)
    probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=1)"
    obs, info, _ = run(env, f'python3 -c "{probe}"; echo rc=$?')
    assert "rc=1" in obs
    thread.join(6)
    assert accepted == [None]
    env.close()
    server.close()


def _accept(server: socket.socket) -> object:
    try:
        return server.accept()
    except OSError:
        return None


def test_empty_and_huge_commands_never_raise() -> None:
    env = TerminalEnv(FastLimits, harness={"max_action_chars": 2 << 20})
    env.reset(seed=0)
    _, _, _, _, info = env.step("")
    assert info["error_kind"] == "empty"
    _, _, _, _, info = env.step(json.dumps({"name": "run", "arguments": {"command": "   "}}))
    assert info["error_kind"] == "illegal_action"
    big = "echo " + "x" * (1 << 19)  # far beyond one exec argument (128 kB)
    obs, info, seconds = run(env, big)
    assert info["command"]["stdout_bytes"] == (1 << 19) + 1 and seconds < 15
    assert_works(env)
    env.close()
    small = TerminalEnv(FastLimits)
    small.reset(seed=0)
    _, _, _, _, info = small.step(json.dumps({"name": "run", "arguments": {"command": big}}))
    assert info["error_kind"] == "too_long"
    small.close()
    assert sandbox_processes() == []


def test_many_episodes_leave_nothing_behind() -> None:
    env = TerminalEnv(FastLimits)
    roots = set()
    for seed in range(30):
        env.reset(seed=seed)
        roots.add(env.terminal_task._root)
        run(env, "sleep 100 & echo x")
    env.close()
    assert sandbox_processes() == []
    assert not any(r is not None and r.exists() for r in roots)
