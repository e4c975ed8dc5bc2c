"""The process that runs inside the sandbox and executes the agent's commands.

It is started once per episode as ``python3 -I -S -B runner.py`` inside bubblewrap (so it
lives in the episode's namespaces and sees only the sandbox's file system) and speaks one
JSON object per line on stdin/stdout with the host. It runs on the system ``python3`` and
imports only the standard library. Each command runs under resource limits (CPU seconds,
address space, processes, file size) in its own session; its output is capped while it is
read (head and tail kept, the rest counted); after every command every other process in the
sandbox's PID namespace is killed (background jobs do not outlive their command), except the
persistent shell when there is one.

Requests: ``{"op": "run", "cmd": str, "timeout": float, "persistent": bool}``,
``{"op": "read", "path": str}``, ``{"op": "write", "path": str, "content": str}``,
``{"op": "reset_shell"}``. Every reply carries ``"ok"``.
"""

import json
import os
import resource
import select
import signal
import subprocess
import sys
import time

CONFIG = json.loads(os.environ.pop("HG_RUNNER_CONFIG"))
HEAD = CONFIG["head_bytes"]
TAIL = CONFIG["tail_bytes"]
CWD = CONFIG["cwd"]
ENV = {k: v for k, v in os.environ.items()}
SHELL = ["/bin/bash", "--noprofile", "--norc"]


def limits():
    os.setsid()
    for name, value in CONFIG["rlimits"].items():
        res = getattr(resource, name)
        resource.setrlimit(res, (value, value))
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; commands must not
        signal.signal(sig, signal.SIG_DFL)


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
    return len(killed)


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def pump(fds, caps, deadline, until):
    """Read ``fds`` into ``caps`` until ``until()`` or the deadline; return False on timeout."""
    open_fds = list(fds)
    while open_fds:
        if until():
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select(open_fds, [], [], min(left, 0.05))
        for fd in ready:
            data = os.read(fd, 65536)
            if not data:
                open_fds.remove(fd)
            else:
                caps[fd].add(data)
    return until() or time.monotonic() < deadline


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


def run_fresh(cmd, timeout):
    start = time.monotonic()
    argv = [*SHELL, "-c", cmd]
    if len(cmd.encode("utf-8", "surrogateescape")) > 65536:  # beyond what one exec argument may hold
        with open("/tmp/.hg-runner-script", "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(cmd)
        argv = [*SHELL, "/tmp/.hg-runner-script"]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=CWD,
            env=ENV,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=limits,
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
    finished = pump(fds, caps, start + timeout, lambda: proc.poll() is not None)
    if finished:
        # The output closed; the command itself may still be exiting (or still running).
        try:
            proc.wait(timeout=max(0.0, start + timeout - time.monotonic()))
        except subprocess.TimeoutExpired:
            finished = False
    if finished:
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
    return {
        "stdout": out.result(),
        "stderr": err.result(),
        "exit_code": code,
        "signal": signame(code),
        "timed_out": not finished,
        "killed_processes": killed,
        "cwd": CWD,
        "shell_restarted": False,
        "seconds": time.monotonic() - start,
    }


class Shell:
    """One persistent bash: cwd, variables and functions carry over between commands."""

    def __init__(self):
        self.status_r, status_w = os.pipe()
        self.proc = subprocess.Popen(
            SHELL,
            cwd=CWD,
            env=ENV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=limits,
            pass_fds=(status_w,),
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
        with open(self.cmd_path, "w", encoding="utf-8", errors="surrogateescape") as f:
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
            self.proc.stdin.write(script.encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        finished = pump(
            fds, caps, start + timeout, lambda: b"\0" in status.head or self.proc.poll() is not None
        )
        code, cwd, died = None, CWD, False
        if finished and b"\0" in status.head:
            drain(fds[:2], caps)
            text = bytes(status.head).split(b"\0")[0].decode("utf-8", "replace")
            rc, _, cwd = text.partition(" ")
            code = int(rc) if rc.lstrip("-").isdigit() else None
            killed = kill_strays(keep=(self.proc.pid,))
        else:
            died = True
            drain(fds[:2], caps)
            self.kill()
            killed = kill_strays()
            if finished:
                code = self.proc.returncode
        return {
            "stdout": out.result(),
            "stderr": err.result(),
            "exit_code": code,
            "signal": signame(code) if died else None,
            "timed_out": not finished,
            "killed_processes": killed,
            "cwd": cwd,
            "shell_restarted": died,
            "seconds": time.monotonic() - start,
        }


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


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    send({"ok": True, "ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        try:
            reply = handle(json.loads(line))
        except Exception as err:  # noqa: BLE001 - report, keep serving
            reply = {"ok": False, "error": f"{type(err).__name__}: {err}"}
        send(reply)


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
        return write_file(req["path"], req["content"])
    if op == "reset_shell":
        shell, STATE["shell"] = STATE["shell"], None
        if shell is not None:
            shell.kill()
        return {"ok": True, "killed_processes": kill_strays()}
    return {"ok": False, "error": f"unknown op {op!r}"}


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
