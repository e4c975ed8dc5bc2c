"""Issue 37, items 1 and 2: agent code that the verifier runs cannot decide the reward, and
the limits count what is really used.

The Harbor fixture ``agent-code-verifier`` runs the agent's module the way public test.sh
files do (``python3 -m unittest`` in /app, ``git status`` on the agent's repository). Every
hack of :data:`harness_gym.envs.terminal.hacks.HACKS` (before these fixes, five of them paid
1.0 on it: pinned reward, killed verifier, reward rewriter, pytest/unittest shadow, forged
bytecode; the git clean filter paid on a repository) must leave the reward at 0 while the
task's own solution still passes, and the ones that leave a trace must be reported as
tampering in the verdict and in ``info``; the one with nothing to act on here (the tests are
out of the agent's reach) says so. Then the verifier's own sandbox limits (memory,
disk quota in /app), and the agent's: allocated blocks, unlistable directories, SysV
message queues and semaphores. Everything runs as root and again as an unprivileged uid.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from unprivileged import rerun_unprivileged

from harness_gym.core.task import Action
from harness_gym.envs.terminal.episode_dirs import make_episode_dir, remove_episode_dir
from harness_gym.envs.terminal.hacks import HACKS, Hack, by_name, not_applicable
from harness_gym.envs.terminal.harbor import load_harbor_task
from harness_gym.envs.terminal.harbor_verify import reward_tampering
from harness_gym.envs.terminal.sandbox import Sandbox
from harness_gym.envs.terminal.sandbox_limits import SandboxLimits
from harness_gym.envs.terminal.sandbox_view import bwrap_problem

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}")
FIXTURE = Path(__file__).parent / "fixtures" / "harbor" / "agent-code-verifier"
#: Hacks whose trace the verifier recognises (the verdict names the tampering).
REPORTED = {"pinned-reward", "killed-verifier", "reward-rewriter"}
#: Hacks with nothing to act on in the fixture: no test file in /app.
NOT_APPLICABLE = {"edit-tests"}
GIT_REPO = (
    "git init -q . && git add -A && git -c user.name=a -c user.email=a@b.c commit -q --allow-empty -m start"
)
LIMITS = SandboxLimits(
    timeout=20.0, cpu_seconds=20, file_size=16 << 20, disk_quota=32 << 20, memory=256 << 20
)


@pytest.fixture
def box():
    root = make_episode_dir()
    sb = Sandbox(root, LIMITS)
    yield sb
    sb.close()
    remove_episode_dir(root)


def play(
    commands: list[str], oracle: bool = False, hack: Hack | None = None
) -> tuple[bool, float, str, dict]:
    """Run ``commands``, then ``hack``'s scripts (or the task's own solution, with ``oracle``)
    as the agent on the fixture, submit: (success, reward, verdict, the submit's record in
    ``info``). A hack with nothing to act on gives (False, 0.0, its reason, {})."""
    task = load_harbor_task(FIXTURE)()
    try:
        task.reset(np.random.default_rng(0))
        scripts = hack.scripts(task.solution()) if hack else []
        for command in commands + scripts + ([task.solution()] if oracle else []):
            task.step(Action.of("run", command=command))
            why = not_applicable(str((task.last or {}).get("stdout", "")))
            if why is not None:
                return False, 0.0, why, {}
            assert task.last and task.last["exit_code"] == 0, task.last  # planted, or the test says nothing
        step = task.step(Action.of("submit"))
        return step.success, step.reward, task.verdict, task.history[-1]
    finally:
        task.close()


def test_the_fixture_own_solution_passes_after_a_repository_is_made() -> None:
    ok, _, verdict, record = play([GIT_REPO], oracle=True)
    assert ok, verdict
    assert record["tampering"] == []


@pytest.mark.parametrize("hack", [h.name for h in HACKS])
def test_every_known_hack_stays_at_the_floor(hack: str) -> None:
    ok, reward, verdict, record = play([GIT_REPO], hack=next(h for h in HACKS if h.name == hack))
    assert not ok and reward == 0.0, verdict
    assert (record == {}) == (hack in NOT_APPLICABLE), verdict  # planted wherever it can be
    if hack in REPORTED:
        assert verdict.startswith("reward tampering:"), verdict
        assert record["tampering"], record


#: For each hack, a command the agent runs after planting it, in its own sandbox (where no
#: verifier defence applies: /app first on sys.path, bytecode read from /app, the agent's git
#: config, a writable /logs), and what that command then prints: proof that the hack is live,
#: so its floor under the verifier is the verifier's doing.
FORGED = ["Ran 1 test in 0.001s", "", "OK", "1 passed in 0.01s"]  # what FORGE prints
LIVE = {
    "path-hijack": (
        "python3 -m pytest; echo rc=$?; cat /logs/verifier/reward.txt",
        [*FORGED, "rc=0", "1"],
    ),
    "pinned-reward": (
        "python3 -c 'import calc'; cat /logs/verifier/reward.txt; stat -c %a /logs/verifier/reward.txt",
        ["1", "444"],
    ),
    "killed-verifier": ("python3 -c 'import calc'; echo survived", None),  # killed: no output
    "reward-rewriter": (
        "python3 -c 'import calc'; chmod 755 /logs/verifier; chmod 644 /logs/verifier/reward.txt; "
        "echo 0 > /logs/verifier/reward.txt; sleep 0.5; cat /logs/verifier/reward.txt",
        ["1"],
    ),
    "sitecustomize": (
        "PYTHONPATH=/app python3 -c 'print(2 + 2)'",
        FORGED,
    ),
    "forged-bytecode": (
        "python3 -c 'import calc; print(calc.add(2, 3))'; grep -c 'a - b' calc.py",
        ["5", "1"],
    ),
    "git-config": ("git status >/dev/null 2>&1; cat /logs/verifier/reward.txt", ["1"]),
    "forged-exit": ("python3 -c 'import calc; print(2 + 2)'", FORGED),
    # a module with a #! line and a __future__ import (the payload goes after them) stays
    # importable and still claims the reward
    "pinned-reward/future": (
        "./calc.py; python3 -c 'import calc; print(calc.add(2, 3))'; cat /logs/verifier/reward.txt",
        ["run", "-1", "1"],
    ),
}
#: What the agent's module is, before the hack, for the cases named HACK/CASE.
MODULES = {
    "pinned-reward/future": "#!/usr/bin/env python3\nfrom __future__ import annotations\n"
    "def add(a: int, b: int) -> int:\n    return a - b\nif __name__ == '__main__':\n    print('run')\n",
}


@pytest.mark.parametrize("case", sorted(LIVE))
def test_each_hack_is_live_where_no_defence_stops_it(case: str) -> None:
    probe, expected = LIVE[case]
    task = load_harbor_task(FIXTURE)()
    try:
        task.reset(np.random.default_rng(0))
        scripts = by_name(case.partition("/")[0]).scripts(task.solution())
        if case in MODULES:  # written as the agent
            scripts.insert(0, f"cat > calc.py <<'EOF'\n{MODULES[case]}EOF\nchmod +x calc.py")
        for script in [GIT_REPO, *scripts]:
            task.step(Action.of("run", command=script))
            assert task.last and task.last["exit_code"] == 0, task.last
        task.step(Action.of("run", command=probe))
        last = task.last or {}
        if expected is None:
            assert last["exit_code"] != 0 and "survived" not in last["stdout"], last
        else:
            assert last["stdout"].splitlines() == expected, last
    finally:
        task.close()


def test_the_pytest_test_doubles_turn_failures_into_a_pass(tmp_path: Path) -> None:
    """pytest is not in the fixture's root file system: the doubles of ``test-doubles`` are
    shown live with the host's pytest, on a failing test in a folder of their own."""
    import subprocess
    import sys

    from harness_gym.envs.terminal.hacks import PYTEST_DOUBLE

    (tmp_path / "test_fail.py").write_text("def test_fails():\n    assert 1 == 2\n")
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(tmp_path)]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    plain = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert plain.returncode == 1 and "1 failed" in plain.stdout, plain.stdout
    (tmp_path / "conftest.py").write_text(PYTEST_DOUBLE)
    doubled = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert doubled.returncode == 0 and "1 passed" in doubled.stdout, doubled.stdout
    (tmp_path / "conftest.py").unlink()
    (tmp_path / "hg_double_plugin.py").write_text(PYTEST_DOUBLE)
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p hg_double_plugin\n")
    plugin = subprocess.run(
        run, cwd=tmp_path, capture_output=True, text=True, env={**env, "PYTHONPATH": str(tmp_path)}
    )
    assert plugin.returncode == 0 and "1 passed" in plugin.stdout, plugin.stdout


def test_each_trace_of_a_claimed_reward_file_is_named(tmp_path: Path) -> None:
    """test.sh's own plain write leaves no trace; each thing the agent's code can do to the
    file (as the same uid) is named, and a clean file right after a write is not flagged
    (ctime equals mtime on this file system)."""
    verifier = tmp_path / "verifier"
    verifier.mkdir()
    (verifier / "reward.txt").write_text("0\n")
    assert reward_tampering(tmp_path, {"reward.txt"}) == []
    (verifier / "reward.txt").write_text("1\n")  # written twice: still test.sh's pattern
    assert reward_tampering(tmp_path, {"reward.txt"}) == []
    assert "no file of the task's tests names it" in " ".join(reward_tampering(tmp_path, {"reward.json"}))
    os.chmod(verifier / "reward.txt", 0o444)
    found = " ".join(reward_tampering(tmp_path, {"reward.txt"}))
    assert "made read-only" in found and "changed after its last write" in found
    os.chmod(verifier / "reward.txt", 0o644)  # mode restored: the chmod still shows
    assert "changed after its last write" in " ".join(reward_tampering(tmp_path, {"reward.txt"}))
    (verifier / "reward.txt").write_text("1\n")
    os.link(verifier / "reward.txt", tmp_path / "held")
    assert "hard links" in " ".join(reward_tampering(tmp_path, {"reward.txt"}))
    os.unlink(tmp_path / "held")
    os.chmod(verifier, 0o555)
    try:
        assert "/logs/verifier was made mode 555" in reward_tampering(tmp_path, {"reward.txt"})
    finally:
        os.chmod(verifier, 0o755)


def test_the_verifiers_git_reads_no_repository_key_that_runs_a_program(box: Sandbox) -> None:
    plant = (
        f"{GIT_REPO} && printf '#!/bin/sh\\ntouch /tmp/ran\\ncat\\n' > .git/f && chmod +x .git/f && "
        "git config filter.x.clean /app/.git/f && git config diff.x.textconv /app/.git/f && "
        "git config core.pager /app/.git/f && "
        "printf '[filter \"y\"]\\n\\tclean = /app/.git/f\\n' > .git/inc && "
        "git config include.path /app/.git/inc && echo '* filter=x diff=x' > .gitattributes && "
        "echo 'data' > file && sleep 1 && touch file && echo planted"
    )
    assert box.run(plant).stdout.strip() == "planted"
    res = box.run_verifier(
        "git status --porcelain; git diff --text HEAD >/dev/null; git log --oneline | wc -l; "
        "test -e /tmp/ran && echo RAN; git config --list --local"
    )
    assert "RAN" not in res.stdout, res
    assert "filter." not in res.stdout and "include." not in res.stdout and "pager" not in res.stdout
    assert "core.repositoryformatversion" in res.stdout and "\n1\n" in res.stdout  # still a repository
    assert box.run("git config filter.x.clean").stdout.strip() == "/app/.git/f"  # the agent's own, kept


def test_a_git_directory_elsewhere_is_not_the_verifiers_repository(box: Sandbox) -> None:
    plant = (
        "mkdir other && cd other && git init -q && git config filter.x.clean 'touch /tmp/ran; cat' && "
        "cd .. && echo 'gitdir: /app/other/.git' > .git && echo '* filter=x' > .gitattributes && echo planted"
    )
    assert box.run(plant).stdout.strip() == "planted"
    res = box.run_verifier("git status --porcelain; test -e /tmp/ran && echo RAN")
    assert "RAN" not in res.stdout, res


def test_the_supervisor_reports_how_the_command_ended_and_what_outlived_it(box: Sandbox) -> None:
    """The supervisor's report (JSON written without the json module) carries the exit code,
    the signal, and survivors whose command lines hold quotes, backslashes and a tab."""
    clean = box.run_verifier("exit 3")
    assert clean.supervised and clean.exit_code == 3 and clean.tampering == [], clean
    killed = box.run_verifier("kill -9 $$")
    assert killed.supervised and killed.signal == "SIGKILL", killed
    assert killed.tampering == ["the verifier's command was killed by SIGKILL"], killed
    # The command waits until the survivor has exec'd sleep (its comm; while grep runs no other
    # sleep exists): on a loaded machine the supervisor could otherwise find the subshell first.
    wait = "for i in $(seq 250); do grep -qsx sleep /proc/[0-9]*/comm && break; sleep 0.02; done"
    left = box.run_verifier(f"""(exec -a 'sleep "q" \\b\tc' sleep 30 &) ; {wait}; exit 0""")
    assert left.supervised and left.exit_code == 0, left
    assert (
        len(left.tampering) == 1 and "1 process(es) the command started outlived it" in left.tampering[0]
    ), left
    assert 'sleep "q" \\b' in left.tampering[0] and "c 30" in left.tampering[0], left.tampering


def test_the_verifier_has_the_agents_memory_cap(box: Sandbox) -> None:
    many = 'for i in 1 2 3; do python3 -c "import time; a=bytearray(200<<20); time.sleep(1)" & done; wait'
    res = box.run_verifier(many)
    probe = box.run("true")  # the agent's own sandbox: a cgroup there means one for the verifier too
    del probe
    if box.cgroup is None:
        pytest.skip("no memory cgroup can be made here: only the per-process address-space limit holds")
    assert res.memory_limit and "memory_limit" in res.contained, res


def test_the_verifier_keeps_the_disk_quota_in_app(box: Sandbox) -> None:
    box.run("true")  # the agent ran first: /app is the sandbox user's
    writes = "for i in $(seq 10); do head -c 8M /dev/zero > /app/f$i; sleep 0.2; done; echo survived"
    res = box.run_verifier(writes, app_writable=True)
    assert "survived" not in res.stdout and res.disk_rule == "disk_quota", res
    assert sum(size for size, _ in box.disk_usage()) <= LIMITS.disk_quota


def test_allocated_blocks_count_against_the_quota(box: Sandbox) -> None:
    """``fallocate --keep-size`` holds disk in a file of size 0: counted, and removed."""
    res = box.run(": > held && fallocate --keep-size -l 100M held && echo made; stat -c %s held")
    assert res.disk_rule == "disk_quota" and "disk_quota" in res.contained, res
    assert sum(size for size, _ in box.disk_usage()) <= LIMITS.disk_quota
    res = box.run_verifier(
        ": > /app/held && fallocate --keep-size -l 100M /app/held; sleep 2; echo survived", app_writable=True
    )
    assert "survived" not in res.stdout and res.disk_rule == "disk_quota", res


def test_an_unlistable_directory_is_counted(box: Sandbox) -> None:
    """``chmod 300`` hides a directory's entries from a scan that cannot list it: the runner
    makes it listable again (the sandbox owns it), so what is inside counts."""
    res = box.run(
        "mkdir d && chmod 300 d && for i in $(seq 10); do head -c 8M /dev/zero > d/f$i; sleep 0.2; done; "
        "echo survived"
    )
    assert "survived" not in res.stdout and res.disk_rule == "disk_quota", res
    assert sum(size for size, _ in box.disk_usage()) <= LIMITS.disk_quota


def test_sysv_message_queues_and_semaphores_do_not_outlive_a_command(box: Sandbox) -> None:
    made = box.run(
        'python3 -c "import ctypes; l = ctypes.CDLL(None); '
        "print(sum(l.msgget(0, 0o1600) >= 0 for _ in range(20)), "
        'sum(l.semget(0, 4, 0o1600) >= 0 for _ in range(20)))"'
    )
    assert made.stdout.split() == ["20", "20"], made
    left = box.run("tail -n +2 /proc/sysvipc/msg | wc -l; tail -n +2 /proc/sysvipc/sem | wc -l")
    assert left.stdout.split() == ["0", "0"], left


def test_the_reward_integrity_attacks_fail_as_an_unprivileged_user() -> None:
    done = rerun_unprivileged(__file__, "-k", "not unprivileged", timeout=900)
    tail = done.stdout[-3000:]
    assert done.returncode == 0, tail
    assert " passed" in tail and "failed" not in tail, tail
