"""The terminal sandbox against an adversarial agent (issue 25, items 1, 2, 4, 6, 7).

Each test plays one attack from inside the sandbox and asserts that it fails and that the env
still answers within its limits. The whole file runs as the current user, and, when that is
root, once more as an unprivileged uid from a copy of the tree in a 0700 directory whose path
has a space (``test_the_attacks_again_as_an_unprivileged_user``).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness_gym.envs.terminal import episode_dirs, sandbox_view
from harness_gym.envs.terminal import sandbox as sandbox_module
from harness_gym.envs.terminal.env import TerminalEnv
from harness_gym.envs.terminal.episode_dirs import make_episode_dir, remove_episode_dir
from harness_gym.envs.terminal.sandbox import Sandbox
from harness_gym.envs.terminal.sandbox_limits import MemoryCgroup, SandboxLimits
from harness_gym.envs.terminal.sandbox_view import SANDBOX_UID_BASE, SANDBOX_UIDS, bwrap_problem, sandbox_uid
from harness_gym.envs.terminal.tasks import TermFixUnittest

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}")

ROOT = Path(__file__).resolve().parents[1]
LIMITS = SandboxLimits(
    timeout=4.0,
    cpu_seconds=4,
    file_size=8 << 20,
    disk_quota=32 << 20,
    max_files=500,
    tmp_size=16 << 20,
    shm_size=4 << 20,
    memory=512 << 20,
)
#: The environment variable that marks the unprivileged re-run (and the uid it runs as).
UNPRIVILEGED = "HG_ATTACKS_UNPRIVILEGED"
#: A built root file system to play the attacks over instead of the host's system
#: (tests/test_terminal_rootfs_build.py sets it).
ROOTFS_VARIABLE = "HG_ATTACKS_ROOTFS"
ROOTFS = os.environ.get(ROOTFS_VARIABLE) or None


@pytest.fixture
def box():
    root = make_episode_dir()
    sb = Sandbox(root, LIMITS, rootfs=ROOTFS)
    yield sb
    sb.close()
    remove_episode_dir(root)


@pytest.mark.skipif(ROOTFS is None, reason=f"only over a built root file system ({ROOTFS_VARIABLE})")
def test_the_attacks_run_over_the_named_root_file_system(box: Sandbox) -> None:
    assert box.rootfs is not None and ROOTFS is not None
    assert f"{Path(ROOTFS).absolute()}/usr /usr " in box.run("cat /proc/self/mountinfo").stdout


def app_usage(sb: Sandbox) -> tuple[int, int]:
    """(bytes, entries) under the episode's app and home, measured host side."""
    total = count = 0
    for base in (sb.app, sb.home):
        for dirpath, dirnames, filenames in os.walk(base):
            count += len(dirnames) + len(filenames)
            for name in filenames:
                try:
                    total += os.lstat(os.path.join(dirpath, name)).st_size
                except OSError:
                    pass
    return total, count


# -- 1. secrets and host details ------------------------------------------------------------

SEARCH = r"""
import os, sys
needles = [bytes.fromhex(n)[::-1] for n in sys.argv[1:]]  # never in any cmdline
skip = {"mem", "pagemap", "clear_refs", "kpagecount", "kpageflags", "kpagecgroup", "kcore",
        "kmsg", "sysrq-trigger", "trace_pipe", "timer_list", "io", "syscall", "stack"}
found, read = set(), 0
def look(path, data):
    for n in needles:
        if n in data:
            found.add(f"{path}: {n.decode()}")
def read_file(path):
    global read
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        look(path, os.read(fd, 1 << 20)); read += 1
    except OSError:
        pass
    finally:
        os.close(fd)
def proc_dir(base, depth):
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        path = os.path.join(base, name)
        if name in skip:
            continue
        try:
            look(path, os.readlink(path).encode())
        except OSError:
            pass
        if os.path.islink(path):
            continue
        if os.path.isdir(path):
            if depth < 3 and name not in ("sys", "net", "bus", "irq", "tty", "driver", "dynamic_debug"):
                proc_dir(path, depth + 1)
        else:
            read_file(path)
proc_dir("/proc", 0)
for top in ("/app", "/home", "/tmp", "/etc", "/opt", "/dev", "/run", "/var"):
    for dirpath, dirnames, filenames in os.walk(top):
        look(dirpath, dirpath.encode())
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            look(path, path.encode())
            if not os.path.islink(path) and os.path.isfile(path) and not path.startswith("/dev/"):
                read_file(path)
print("read", read)
for f in sorted(found):
    print("FOUND", f)
"""


def test_no_host_secret_path_or_user_name_is_visible_anywhere_inside(monkeypatch, tmp_path, request) -> None:
    """Decoy variables in the host's environment, a decoy component in the checkout's path
    (the runner is read from a 0700 folder named after it) and in the host's working
    directory; then every readable file of the sandbox's /proc and its file system is
    searched for them, and for the host user's name."""
    decoy = f"hgdecoy{os.getpid()}x"
    monkeypatch.setenv("OPENAI_API_KEY", f"sk-{decoy}-key")
    monkeypatch.setenv("HG_DECOY_SECRET", decoy)
    checkout = tmp_path / f"{decoy} checkout"
    checkout.mkdir(mode=0o700)
    shutil.copy(sandbox_view.RUNNER, checkout / "runner.py")
    monkeypatch.setattr(sandbox_view, "RUNNER", checkout / "runner.py")
    monkeypatch.setattr(sandbox_view, "_runner_code", [])
    monkeypatch.chdir(checkout)
    # A $TMPDIR that names the user, as many do (reachable by the sandbox's uid).
    host_tmp = Path(tempfile.mkdtemp(prefix=f"{decoy}-tmp-", dir="/tmp"))
    host_tmp.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(host_tmp, ignore_errors=True))
    monkeypatch.setenv("TMPDIR", str(host_tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.delenv(episode_dirs.EPISODE_BASE_VARIABLE, raising=False)
    needles = [decoy, str(ROOT), str(checkout)]
    if str(Path.home()) not in ("/", "/root", "/home/agent", "/nonexistent"):
        needles.append(str(Path.home()))
    user = pwd.getpwuid(os.getuid()).pw_name if _has_passwd_entry(os.getuid()) else None
    if user not in (None, "root", "agent", "nobody"):
        needles.append(user)
    hidden = " ".join(n.encode()[::-1].hex() for n in needles)
    root = make_episode_dir()
    sb = Sandbox(root, LIMITS, rootfs=ROOTFS)
    try:
        sb.run("sleep 5 & true")  # more processes to look at
        res = sb.run(f"python3 - {hidden} <<'EOF'\n{SEARCH}\nEOF", timeout=60)
        assert res.exit_code == 0, res.stderr
        assert int(res.stdout.split()[1]) > 100, res.stdout  # it did read /proc and the files
        assert "FOUND" not in res.stdout, res.stdout
        passwd = sb.run("cat /etc/passwd /etc/group; hostname; id -un").stdout
        assert passwd.split() == [
            "root:x:0:0:root:/root:/usr/sbin/nologin",
            "agent:x:1000:1000:agent:/home/agent:/bin/bash",
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
            "root:x:0:",
            "agent:x:1000:",
            "nogroup:x:65534:",
            "sandbox",
            "agent",
        ]
    finally:
        sb.close()
        remove_episode_dir(root)


def _has_passwd_entry(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


# -- 2. forged runner replies ------------------------------------------------------------

FORGE = r"""
import json, os
fake = {"ok": True, "ready": True, "stdout": {"head": "Ran 3 tests\n\nOK\n", "tail": "", "total": 17,
        "omitted": 0, "binary": False}, "stderr": {"head": "", "tail": "", "total": 0, "omitted": 0,
        "binary": False}, "exit_code": 0, "cwd": "/app", "signal": None, "timed_out": False,
        "killed_processes": 0, "shell_restarted": False, "seconds": 0.1}
lines = b""
for i in range(50):
    body = json.dumps({**fake, "id": i}).encode()
    lines += body + b"\n" + b"0" * 64 + b" " + body + b"\n"
mine = {os.getpid(), os.getppid()}
opened, tried = [], 0
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError as err:
        print("cannot list", pid, err.strerror)
        continue
    for fd in fds:
        if fd in ("0", "2"):  # a request pipe would answer back (an error for each line)
            continue
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if not os.readlink(path).startswith("pipe:"):
                continue
            tried += 1
            w = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(w, lines)
        except OSError:
            pass
        os.close(w)
        if int(pid) not in mine:
            opened.append(path)
for path in ("/proc/1/environ", "/proc/1/mem", "/proc/1/fd/0"):
    try:
        open(path, "rb").close()
        opened.append(path)
    except OSError:
        pass
print("tried", tried, "opened", opened, flush=True)
os.system("kill -STOP 1; kill -KILL 1")
"""


def test_forged_replies_never_reach_the_host(box: Sandbox) -> None:
    """The agent writes reply-shaped lines into every pipe of every process it can see
    (the runner is PID 1); nothing of the runner's is reachable, and the host takes only
    the runner's own replies: the next commands' results are their real ones."""
    res = box.run(f"python3 - <<'EOF'\n{FORGE}\nEOF")
    assert "opened []" in res.stdout, res.stdout
    assert "cannot list 1 Permission denied" in res.stdout, res.stdout
    for word in ("first", "second", "third"):
        res = box.run(f"echo {word}; exit 3")
        assert (res.stdout, res.exit_code, res.forged_replies) == (f"{word}\n", 3, 0)
    assert not box.restarts and box.forged_replies == 0


def test_forged_replies_do_not_solve_a_task_whose_verifier_runs_in_the_sandbox() -> None:
    """TermFixUnittest verifies by running the unittest suite in the sandbox; forged lines
    that claim "Ran 3 tests ... OK" must not count: the bug stays unfixed, reward 0."""
    env = TerminalEnv(TermFixUnittest)
    env.reset(seed=0)
    command = f"python3 - <<'EOF'\n{FORGE}\nEOF"
    _, _, _, _, info = env.step(json.dumps({"name": "run", "arguments": {"command": command}}))
    _, reward, terminated, _, info = env.step(json.dumps({"name": "submit", "arguments": {}}))
    assert terminated and reward == 0.0 and not info["success"], info
    env.close()


def test_a_line_written_by_anyone_but_the_runner_is_dropped(box: Sandbox) -> None:
    """Host side: a line on the reply pipe without the runner's HMAC, or bound to another
    request, is counted and dropped, never returned (fault injection into the pipe)."""
    box.run("true")
    pipe_w = os.open(f"/proc/self/fd/{box._rep_fd}", os.O_WRONLY)
    fake = json.dumps({"id": box._seq + 1, "ok": True, "stdout": {}, "exit_code": 0})
    replayed = sandbox_module._mac(box._key, b"reply ", json.dumps({"id": 1}).encode())
    os.write(pipe_w, f'{"0" * 64} {fake}\n{fake}\n{replayed.decode()} {{"id": 1}}\n'.encode())
    os.close(pipe_w)
    res = box.run("echo real")
    assert res.stdout == "real\n" and res.forged_replies == 3
    assert "forged_replies_ignored" in res.contained


# -- 4. limits that limit -----------------------------------------------------------------


def test_dev_is_read_only_and_dev_shm_and_tmp_are_small(box: Sandbox) -> None:
    res = box.run("touch /dev/x; echo rc=$?; head -c 64M /dev/zero > /dev/shm/x; ls -l /dev/shm/x")
    assert "Read-only file system" in res.stderr and "rc=1" in res.stdout
    assert int(res.stdout.split()[5]) <= LIMITS.shm_size
    res = box.run("head -c 64M /dev/zero > /tmp/x; stat -c %s /tmp/x")
    assert int(res.stdout.split()[-1]) <= LIMITS.tmp_size


@pytest.mark.skipif(
    not sandbox_view.bwrap_supports("--disable-userns"), reason="bubblewrap < 0.8 has no --disable-userns"
)
def test_no_user_namespace_can_be_made_inside(box: Sandbox) -> None:
    res = box.run("unshare -Urm sh -c 'mount -t tmpfs none /tmp && echo mounted'; echo rc=$?")
    assert "mounted" not in res.stdout and "rc=1" in res.stdout, (res.stdout, res.stderr)


def test_memory_is_capped_for_the_whole_sandbox_where_a_cgroup_can_be_made(box: Sandbox) -> None:
    """Four processes of 300 MB each against a 512 MB sandbox: with a memory cgroup (root
    here) some are killed; without one only the per-process address-space limit holds."""
    many = 'for i in 1 2 3 4; do python3 -c "import time; a=bytearray(300<<20); time.sleep(1)" & done; wait'
    res = box.run(many)
    if box.cgroup is not None:
        assert "memory_limit" in res.contained, res  # (on a loaded machine it may also time out)
    one = box.run('python3 -c "a = bytearray(2 << 30)"')
    assert "MemoryError" in one.stderr
    assert box.run("echo alive").stdout == "alive\n"


def test_memory_cgroup_is_made_as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("a memory cgroup needs root or a delegated cgroup v2 subtree; none here")
    cg = MemoryCgroup.make(64 << 20)
    if cg is None:
        pytest.skip("no writable memory cgroup on this machine (documented in docs/terminal.md)")
    assert os.path.isdir(cg.path)
    cg.remove()
    assert not os.path.exists(cg.path)


def test_the_disk_quota_holds_while_the_command_runs(box: Sandbox) -> None:
    """80 MB in 8 MB files against a 32 MB quota: the command is killed while it writes (it
    never prints "survived") and what is left fits the quota."""
    res = box.run("for i in $(seq 10); do head -c 8M /dev/zero > f$i; sleep 0.2; done; echo survived")
    assert "survived" not in res.stdout and res.disk_rule == "disk_quota", res
    assert "disk_quota" in res.contained
    assert app_usage(box)[0] <= LIMITS.disk_quota
    assert box.run("echo alive").stdout == "alive\n"


def test_the_file_count_is_limited(box: Sandbox) -> None:
    """3,000 empty files against a 500-entry limit: killed while it creates them (it pauses
    now and then, so that even a fast file system meets a measurement before the end)."""
    loop = "for i in $(seq 3000); do : > f$i; [ $((i % 100)) = 0 ] && sleep 0.05; done"
    res = box.run(f"mkdir d; cd d; {loop}; echo survived")
    assert "survived" not in res.stdout and res.disk_rule == "file_count_limit", res
    assert "file_count_limit" in res.contained
    assert app_usage(box)[1] <= LIMITS.max_files
    assert box.run("echo alive").stdout == "alive\n"


def test_the_persistent_shell_stops_when_it_reports_the_end_of_a_command(box: Sandbox) -> None:
    """The command forges the shell's end-of-command status through /proc/$$/fd and keeps
    appending to a file; once the runner has reported the command's end, nothing of it runs."""
    forge = (
        "for f in /proc/$$/fd/*; do "
        "case $(readlink $f) in pipe:*) printf '0 /app\\0' > $f 2>/dev/null;; esac; done; "
        "while :; do echo x >> /app/after; sleep 0.05; done"
    )
    res = box.run(forge, persistent=True)
    size = (box.app / "after").stat().st_size if (box.app / "after").exists() else 0
    time.sleep(1.0)
    later = (box.app / "after").stat().st_size if (box.app / "after").exists() else 0
    assert later == size, (res, size, later)
    res = box.run("echo next", persistent=True)  # within its own limits (the loop resumes)
    assert res.timed_out or res.stdout.endswith("next\n"), res
    assert box.run("echo fresh").stdout == "fresh\n"


# -- 6. a checkout the sandbox user cannot read ---------------------------------------------


def test_the_runner_comes_from_a_0700_folder_with_a_space(monkeypatch, tmp_path) -> None:
    folder = tmp_path / "private checkout"
    folder.mkdir()
    shutil.copy(sandbox_view.RUNNER, folder / "runner.py")
    folder.chmod(0o700)
    tmp_path.chmod(0o700)
    monkeypatch.setattr(sandbox_view, "RUNNER", folder / "runner.py")
    monkeypatch.setattr(sandbox_view, "_runner_code", [])
    root = make_episode_dir()
    sb = Sandbox(root, LIMITS, rootfs=ROOTFS)
    try:
        assert sb.run("echo ok").stdout == "ok\n"
    finally:
        sb.close()
        remove_episode_dir(root)


# -- 7. small --------------------------------------------------------------------------------


def test_sandbox_uids_avoid_systemd_ranges() -> None:
    first, last = SANDBOX_UID_BASE, SANDBOX_UID_BASE + SANDBOX_UIDS - 1
    for low, high in ((61184, 65519), (524288, 1879048191), (2147352576, 4294967295), (0, 60513)):
        assert last < low or first > high
    uid = sandbox_uid()
    assert uid is None or first <= uid <= last


def test_a_child_killed_by_sigxfsz_inside_a_pipeline_is_reported(box: Sandbox) -> None:
    res = box.run("yes > big | true; echo rc=$?")
    assert "rc=0" in res.stdout and "file_size_limit" in res.contained, res
    assert (box.app / "big").stat().st_size == LIMITS.file_size
    later = box.run("echo x > small")  # the big file is no news to a later command
    assert "file_size_limit" not in later.contained, later


# -- the same attacks as an unprivileged user ---------------------------------------------


def unprivileged_uid() -> int:
    """A uid with no processes of its own: just above the sandbox uids (no passwd entry)."""
    return int(os.environ.get(UNPRIVILEGED) or SANDBOX_UID_BASE + SANDBOX_UIDS)


def test_the_attacks_again_as_an_unprivileged_user() -> None:
    """As root, run this file again under an unprivileged uid, from a copy of the tree in a
    0700 directory of that uid whose path has a space (scripts/as-unprivileged.py makes the
    interpreter and its packages reachable)."""
    if os.environ.get(UNPRIVILEGED):
        pytest.skip("this is the unprivileged run")
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: the attacks above ran as this user")
    uid = unprivileged_uid()
    done = run_as_unprivileged(uid, ["tests/test_terminal_attacks.py"])
    tail = done.stdout[-3000:]
    assert done.returncode == 0, tail
    assert " passed" in tail and "failed" not in tail, tail


def run_as_unprivileged(uid: int, tests: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """pytest on ``tests`` as ``uid`` from a 0700 copy of the tree (scripts/as-unprivileged.py)."""
    command = [sys.executable, str(ROOT / "scripts" / "as-unprivileged.py"), "--uid", str(uid), "--copy"]
    command += ["--", sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q"]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        UNPRIVILEGED: str(uid),
        **({ROOTFS_VARIABLE: ROOTFS} if ROOTFS else {}),
    }
    return subprocess.run([*command, *tests], env=env, capture_output=True, text=True, timeout=timeout)


def test_a_command_has_its_cpu_limit_from_its_first_instruction(box: Sandbox) -> None:
    """Set after the spawn alone, the CPU limit raced the command: under load 33 of 300
    commands read `unlimited` (and a child forked at once would keep it). bash now sets it
    from a read-only file before it reads the command, and leaves no trace in the env."""
    for _ in range(60):
        res = box.run("ulimit -Ht; echo ${BASH_ENV-unset}")
        assert res.stdout.split() == [str(LIMITS.cpu_seconds), "unset"], res


def test_every_command_runs_under_its_limits(box: Sandbox) -> None:
    """The runner carries the limits itself (CPU time is set on each command as it starts):
    what a command sees, in a fresh and in the persistent shell."""
    for persistent in (False, True):
        res = box.run("ulimit -Ht; ulimit -St; ulimit -Hv; ulimit -Hf; ulimit -Hc", persistent=persistent)
        cpu_hard, cpu_soft, address_kb, file_blocks, core = res.stdout.split()
        assert (int(cpu_hard), int(cpu_soft), int(core)) == (LIMITS.cpu_seconds, LIMITS.cpu_seconds, 0)
        assert int(address_kb) * 1024 == LIMITS.address_space and int(file_blocks) * 1024 == LIMITS.file_size
