"""The process that runs inside the sandbox and executes the agent's commands.

It is started once per episode as ``python3 -I -S -B runner.py REQUEST_FD REPLY_FD`` inside
bubblewrap, as the sandbox's PID 1 (``--as-pid-1``: no other process holds its channel), and
speaks one line per message with the host over two private pipes. It runs on the system
``python3`` and imports only the standard library.

The control channel is out of the agent's reach: the runner makes itself non-dumpable (so
``/proc/1/fd``, ``/proc/1/environ`` and ptrace are closed to the agent's processes, which
run without capabilities), its pipe ends are close-on-exec (commands never inherit them),
and as PID 1 of the namespace it ignores every signal the agent may send. Each line is
``HMAC JSON``: the HMAC (SHA-256, keyed by a per-episode secret sent as the first line) binds
a request and its reply, whose ``id`` echoes the request's, so a line written by anyone
else is never taken for one.

Each command runs under resource limits (CPU seconds, address space, processes, file size)
in its own session; its output is capped while it is read (head and tail kept, the rest
counted); the episode's disk use (bytes and entries under ``/app`` and ``$HOME``) is checked
while it runs, whenever inotify reports a change, and a command that goes over is killed and
the excess removed; after every command every other process in the sandbox's PID namespace
is killed (background jobs do not outlive their command), except the persistent shell, which
is stopped (SIGSTOP) until the next command.

Requests: ``{"op": "run", "cmd": str, "timeout": float, "persistent": bool}``,
``{"op": "read", "path": str}``, ``{"op": "write", "path": str, "content": str}``,
``{"op": "reset_shell"}``. Every reply carries ``"ok"``.
"""

import ctypes
import hashlib
import hmac
import json
import os
import resource
import select
import signal
import stat
import subprocess
import sys
import time

LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE = 4
CONFIG = {}
ENV = {k: v for k, v in os.environ.items()}
SHELL = ["/bin/bash", "--noprofile", "--norc"]
CWD = "/app"
HEAD = TAIL = 16384


def configure(config):
    global HEAD, TAIL, CWD
    CONFIG.update(config)
    HEAD, TAIL, CWD = config["head_bytes"], config["tail_bytes"], config["cwd"]


def own_limits():
    """Give the runner itself every command limit but CPU time (it lives for the episode):
    commands inherit them, so none is set in the child (a ``preexec_fn`` costs ~5 ms a
    command: Python forks instead of vforking)."""
    for name, value in CONFIG["rlimits"].items():
        if name != "RLIMIT_CPU":
            resource.setrlimit(getattr(resource, name), (value, value))


def spawned(proc):
    """Limit the new command's CPU time (before bash has read its command line; the wall-clock
    deadline bounds every process of the command anyway)."""
    value = CONFIG["rlimits"]["RLIMIT_CPU"]
    for _ in range(20):
        try:
            resource.prlimit(proc.pid, resource.RLIMIT_CPU, (value, value))
            if resource.prlimit(proc.pid, resource.RLIMIT_CPU) == (value, value):
                return proc
        except (OSError, ValueError):
            pass
        time.sleep(0.001)
    proc.kill()  # fail closed: no command runs without its CPU limit
    proc.wait()
    raise OSError("could not set the command's CPU time limit")


class Capped:
    """Keeps the first HEAD and last TAIL bytes of a stream and counts everything."""

    def __init__(self):
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data):
        self.total += len(data)
        room = HEAD - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > TAIL:
                del self.tail[: len(self.tail) - TAIL]

    def result(self):
        raw = bytes(self.head + self.tail)
        binary = b"\x00" in raw
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            binary = True
        dec = lambda b: b.decode("utf-8", "replace").replace("\x00", "\ufffd")  # noqa: E731
        return {
            "head": dec(bytes(self.head)),
            "tail": dec(bytes(self.tail)),
            "total": self.total,
            "omitted": self.total - len(self.head) - len(self.tail),
            "binary": binary,
        }


def strays(keep):
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            pid = int(name)
            if pid not in (1, me) and pid not in keep:
                out.append(pid)
    return out


def kill_strays(keep=()):
    """SIGKILL every process of the sandbox but init, the runner and ``keep``; count them."""
    killed = set()
    for _ in range(50):
        pids = strays(keep)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        reap()
        time.sleep(0.002)
    reap()
    remove_sysv_ipc()
    return len(killed)


def remove_sysv_ipc():
    """SysV shared memory, message queues and semaphores outlive their processes (until the
    IPC namespace dies), outside every limit: remove them all."""
    for kind, rmid in (
        ("shm", lambda i: LIBC.shmctl(i, 0, None)),  # IPC_RMID
        ("msg", lambda i: LIBC.msgctl(i, 0, None)),
        ("sem", lambda i: LIBC.semctl(i, 0, 0, 0)),
    ):
        try:
            with open("/proc/sysvipc/" + kind) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 1 and cols[1].isdigit():
                rmid(int(cols[1]))


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


IN_FLAGS = 0o4000 | 0o2000000  # IN_NONBLOCK | IN_CLOEXEC
# modify, attrib (a chmod, fallocate), close_write, moved_from/to, create, delete; do not
# follow links; directories only
IN_MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x02000000 | 0x01000000


class Disk:
    """Bytes and entries under ``/app`` and ``$HOME``: measured when inotify saw a change."""

    def __init__(self, counted, others):
        self.counted, self.others = counted, others
        self.quota, self.max_files = CONFIG["disk_quota"], CONFIG["max_files"]
        self.file_size = CONFIG["rlimits"]["RLIMIT_FSIZE"]
        self.ino = LIBC.inotify_init1(IN_FLAGS)
        self.watching = self.ino >= 0
        self.dirty = True
        self.next_scan = 0.0
        self.hit_file_size = False
        self.rule = None
        self.since = 0
        #: A directory stayed unlistable during the last scan (counted as over the quota).
        self.unlistable = False

    def begin(self):
        """A command starts: files it writes up to the file-size limit are reported."""
        self.since = time.time_ns()  # file times lag (coarse clock): never an earlier write

    def poll(self):
        if not self.watching:
            self.dirty = True
            return
        try:
            while os.read(self.ino, 65536):
                self.dirty = True
        except BlockingIOError:
            pass
        except OSError:
            self.dirty = True

    def scan(self, collect=False):
        """(bytes, entries, [(size, mtime, path, is_dir)]) of the counted trees (no link followed)."""
        total = count = 0
        entries = []
        stack = [(root, True) for root in self.counted] + [(root, False) for root in self.others]
        while stack:
            path, counted = stack.pop()
            if self.watching and LIBC.inotify_add_watch(self.ino, path.encode(), IN_MASK) < 0:
                if ctypes.get_errno() == 28:  # ENOSPC: out of watches, measure after every command
                    self.watching = False
            try:
                it = os.scandir(path)
            except PermissionError:  # chmod 300: made listable again (the sandbox owns it)
                try:
                    os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) | 0o700)
                    it = os.scandir(path)
                except OSError:
                    self.unlistable = True
                    continue
            except OSError:
                continue
            with it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    is_dir = stat.S_ISDIR(st.st_mode)
                    if is_dir:
                        stack.append((entry.path, counted))
                    elif st.st_size >= self.file_size and st.st_mtime_ns >= self.since:
                        self.hit_file_size = True  # written up to the limit by this command
                    if not counted:
                        continue
                    count += 1
                    # allocated blocks count too (fallocate --keep-size holds disk at size 0)
                    size = 0 if is_dir else max(st.st_size, st.st_blocks * 512)
                    total += size
                    if collect:
                        entries.append((size, st.st_mtime_ns, entry.path, is_dir))
                    elif count > self.max_files:
                        return total, count, entries
        return total, count, entries

    def over(self):
        """Measure now if something changed; the rule exceeded (``"disk_quota"``, ...) or None."""
        self.poll()
        if self.dirty:  # else the last measurement still holds
            self.dirty = False
            start = time.monotonic()
            self.unlistable = False
            total, count, _ = self.scan()
            self.next_scan = time.monotonic() + max(0.1, 2 * (time.monotonic() - start))
            self.rule = None
            if total > self.quota or self.unlistable:
                self.rule = "disk_quota"
            elif count > self.max_files:
                self.rule = "file_count_limit"
        return self.rule

    def due(self):
        return time.monotonic() >= self.next_scan and self.over()

    def enforce(self):
        """Remove the largest files while over the quota, the newest entries while over the count."""
        _, _, entries = self.scan(collect=True)
        removed = []
        total = sum(size for size, _, _, is_dir in entries if not is_dir)
        for size, _, path, _ in sorted((e for e in entries if not e[3]), reverse=True):
            if total <= self.quota:
                break
            if remove(path, False):
                total -= size
                removed.append(path)
        count = len(entries) - len(removed)
        gone = set(removed)
        for _, _, path, is_dir in sorted(entries, key=lambda e: (e[1], e[2].count("/")), reverse=True):
            if count <= self.max_files:
                break
            if path not in gone and remove(path, is_dir):
                count -= 1
                removed.append(path)
        self.dirty, self.rule = True, None
        return removed


def remove(path, is_dir):
    try:
        os.rmdir(path) if is_dir else os.unlink(path)
        return True
    except OSError:
        return False


def check_disk(disk, reply):
    """After a command: enforce the quota and the entry count if something changed; record it."""
    rule = disk.over()
    removed = disk.enforce() if rule else []
    reply["disk_rule"] = reply.get("disk_rule") or rule
    reply["quota_removed"] = [strip_root(p) for p in removed[:100]]
    reply["quota_removed_count"] = len(removed)
    reply["file_size_limit"] = disk.hit_file_size
    disk.hit_file_size = False
    return reply


def strip_root(path):
    for root, name in CONFIG["roots"].items():
        if path == root or path.startswith(root + "/"):
            return name + path[len(root) :]
    return path


def pump(fds, caps, deadline, until, disk=None):
    """Read ``fds`` into ``caps`` until ``until()``, the deadline or a disk rule is broken.

    Returns ``"done"``, ``"timeout"`` or the disk rule the command broke."""
    open_fds = list(fds)
    nap = 0.0005
    while True:
        if until():
            return "done"
        if disk is not None:
            rule = disk.due()
            if rule:
                return rule
        left = deadline - time.monotonic()
        if left <= 0:
            return "timeout"
        if not open_fds:  # the output closed; the command is exiting (or still running)
            time.sleep(min(left, nap))
            nap = min(2 * nap, 0.02)
            continue
        ready, _, _ = select.select(open_fds, [], [], min(left, 0.05))
        for fd in ready:
            data = os.read(fd, 65536)
            if not data:
                open_fds.remove(fd)
            else:
                caps[fd].add(data)


def drain(fds, caps, seconds=0.05):
    deadline = time.monotonic() + seconds
    open_fds = list(fds)
    while open_fds and time.monotonic() < deadline:
        ready, _, _ = select.select(open_fds, [], [], 0.005)
        if not ready:
            break
        for fd in ready:
            data = os.read(fd, 65536)
            if not data:
                open_fds.remove(fd)
            else:
                caps[fd].add(data)


def signame(code):
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return str(-code)
    return None


def private_file(path):
    """``path`` opened for writing as a new regular file: whatever the agent left there (a
    FIFO that would block the open, a symlink, a file of its own) is removed first."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        subprocess.run(["rm", "-rf", "--", path], check=False)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    return open(fd, "w", encoding="utf-8", errors="surrogateescape")


def run_fresh(cmd, timeout):
    start = time.monotonic()
    DISK[0].begin()
    argv = [*SHELL, "-c", cmd]
    if len(cmd.encode("utf-8", "surrogateescape")) > 65536:  # beyond what one exec argument may hold
        with private_file("/tmp/.hg-runner-script") as f:
            f.write(cmd)
        argv = [*SHELL, "/tmp/.hg-runner-script"]
    try:
        proc = spawned(
            subprocess.Popen(
                argv,
                cwd=CWD,
                env=ENV,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        )
    except OSError as err:
        return {
            "stdout": Capped().result(),
            "stderr": {**Capped().result(), "head": f"cannot start: {err}"},
            "exit_code": None,
            "signal": None,
            "timed_out": False,
            "killed_processes": kill_strays(),
            "cwd": CWD,
            "shell_restarted": False,
            "seconds": time.monotonic() - start,
        }
    out, err = Capped(), Capped()
    fds = [proc.stdout.fileno(), proc.stderr.fileno()]
    caps = {fds[0]: out, fds[1]: err}
    status = pump(fds, caps, start + timeout, lambda: proc.poll() is not None, DISK[0])
    if status == "done":
        drain(fds, caps)
    else:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # Reap the command before kill_strays reaps blindly (waitpid(-1) would take its status).
    code = proc.wait()
    killed = kill_strays()
    drain(fds, caps)
    proc.stdout.close()
    proc.stderr.close()
    reply = {
        "stdout": out.result(),
        "stderr": err.result(),
        "exit_code": code,
        "signal": signame(code),
        "timed_out": status == "timeout",
        "disk_rule": None if status in ("done", "timeout") else status,
        "killed_processes": killed,
        "cwd": CWD,
        "shell_restarted": False,
        "seconds": time.monotonic() - start,
    }
    return check_disk(DISK[0], reply)


class Shell:
    """One persistent bash: cwd, variables and functions carry over between commands."""

    def __init__(self):
        self.status_r, status_w = os.pipe()
        self.proc = spawned(
            subprocess.Popen(
                SHELL,
                cwd=CWD,
                env=ENV,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=(status_w,),
            )
        )
        self.status_fd = status_w
        os.close(status_w)
        self.status = bytearray()
        self.cmd_path = "/tmp/.hg-runner-cmd"

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        os.close(self.status_r)

    def run(self, cmd, timeout):
        start = time.monotonic()
        DISK[0].begin()
        with private_file(self.cmd_path) as f:
            f.write(cmd)
        script = (
            f'{{ eval "$(cat {self.cmd_path}; rm -f {self.cmd_path})"; }} </dev/null {self.status_fd}>&-\n'
            f'printf "%d %s\\0" "$?" "$PWD" >&{self.status_fd}\n'
        )
        out, err = Capped(), Capped()
        fds = [self.proc.stdout.fileno(), self.proc.stderr.fileno(), self.status_r]
        status = Capped()
        caps = {fds[0]: out, fds[1]: err, fds[2]: status}
        try:
            os.kill(self.proc.pid, signal.SIGCONT)  # stopped since its last command
            self.proc.stdin.write(script.encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, ProcessLookupError):
            pass
        state = pump(
            fds, caps, start + timeout, lambda: b"\0" in status.head or self.proc.poll() is not None, DISK[0]
        )
        code, cwd, died = None, CWD, False
        if state == "done" and b"\0" in status.head and self.proc.poll() is None:
            drain(fds[:2], caps)
            text = bytes(status.head).split(b"\0")[0].decode("utf-8", "replace")
            rc, _, cwd = text.partition(" ")
            code = int(rc) if rc.lstrip("-").isdigit() else None
            killed = kill_strays(keep=(self.proc.pid,))
            # Whatever the shell still does (a forged end of command) waits for the next command.
            os.kill(self.proc.pid, signal.SIGSTOP)
        else:
            died = True
            drain(fds[:2], caps)
            self.kill()
            killed = kill_strays()
            if state == "done":
                code = self.proc.returncode
        reply = {
            "stdout": out.result(),
            "stderr": err.result(),
            "exit_code": code,
            "signal": signame(code) if died else None,
            "timed_out": state == "timeout",
            "disk_rule": None if state in ("done", "timeout") else state,
            "killed_processes": killed,
            "cwd": cwd,
            "shell_restarted": died,
            "seconds": time.monotonic() - start,
        }
        return check_disk(DISK[0], reply)


def read_file(path):
    try:
        full = os.path.join(CWD, path)
        with open(full, "rb") as f:
            data = f.read(CONFIG["max_file_bytes"] + 1)
    except (OSError, ValueError) as err:
        return {
            "ok": False,
            "error": f"cannot read {path!r}: {err.strerror if isinstance(err, OSError) else err}",
        }
    too_big = len(data) > CONFIG["max_file_bytes"]
    data = data[: CONFIG["max_file_bytes"]]
    return {
        "ok": True,
        "content": data.decode("utf-8", "replace"),
        "truncated": too_big,
        "binary": b"\x00" in data,
    }


def write_file(path, content):
    try:
        full = os.path.join(CWD, path)
        parent = os.path.dirname(full)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(full, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(content)
    except (OSError, ValueError) as err:
        return {
            "ok": False,
            "error": f"cannot write {path!r}: {err.strerror if isinstance(err, OSError) else err}",
        }
    return {"ok": True}


class Channel:
    """The runner's end of the host's pipes: HMAC-bound lines, each reply bound to its request."""

    def __init__(self, req_fd, rep_fd):
        for fd in (req_fd, rep_fd):
            os.set_inheritable(fd, False)
        self.reader = os.fdopen(req_fd, "rb")
        self.rep_fd = rep_fd
        first = json.loads(self.reader.readline())
        self.key = bytes.fromhex(first["key"])
        configure(first["config"])

    def requests(self):
        for line in self.reader:
            mac, _, body = line.rstrip(b"\n").partition(b" ")
            good = hmac.new(self.key, b"request " + body, hashlib.sha256).hexdigest().encode()
            if hmac.compare_digest(mac, good):
                yield json.loads(body)

    def send(self, obj):
        body = json.dumps(obj).encode()
        mac = hmac.new(self.key, b"reply " + body, hashlib.sha256).hexdigest().encode()
        data = mac + b" " + body + b"\n"
        while data:
            data = data[os.write(self.rep_fd, data) :]


def main():
    # Not dumpable: the agent's processes (same uid, no capabilities) cannot open /proc/1/fd,
    # read /proc/1/environ or ptrace the runner.
    LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    channel = Channel(int(sys.argv[1]), int(sys.argv[2]))
    own_limits()
    DISK[0] = Disk(CONFIG["counted"], CONFIG["watched"])
    channel.send({"id": 0, "ok": True, "ready": True, "pid": os.getpid()})
    for req in channel.requests():
        try:
            reply = handle(req)
        except Exception as err:  # noqa: BLE001 - report, keep serving
            reply = {"ok": False, "error": f"{type(err).__name__}: {err}"}
        reply["id"] = req.get("id")
        channel.send(reply)


DISK = [None]
STATE = {"shell": None}


def handle(req):
    op = req["op"]
    if op == "run":
        shell = STATE["shell"]
        if req["persistent"]:
            if shell is None:
                shell = STATE["shell"] = Shell()
            reply = shell.run(req["cmd"], req["timeout"])
            if reply["shell_restarted"]:
                STATE["shell"] = None
        else:
            if shell is not None:
                STATE["shell"] = None
                shell.kill()
            reply = run_fresh(req["cmd"], req["timeout"])
        reply["ok"] = True
        return reply
    if op == "read":
        return read_file(req["path"])
    if op == "write":
        return check_disk(DISK[0], write_file(req["path"], req["content"]))
    if op == "reset_shell":
        shell, STATE["shell"] = STATE["shell"], None
        if shell is not None:
            shell.kill()
        return {"ok": True, "killed_processes": kill_strays()}
    return {"ok": False, "error": f"unknown op {op!r}"}


if __name__ == "__main__":
    main()
