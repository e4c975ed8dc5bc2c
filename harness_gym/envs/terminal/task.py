"""TerminalTask: the world of a shell task (files in a sandbox, a verifier, an oracle script).

A terminal task builds an instance from a seeded generator (:meth:`TerminalTask.build`
returns the files to write into ``/app`` and may ask for set-up commands that run in the
sandbox, e.g. ``git init``), gives an instruction, and judges success by the final state of
the working directory (:meth:`TerminalTask.verify`), never by the transcript. At ``submit``
every agent process is killed first; checks that run commands (:meth:`TerminalTask.sh`,
:meth:`~TerminalTask.sh_many`, :meth:`~TerminalTask.python_check`) run in a fresh verifier
sandbox the agent never shaped, and compare values, never success messages. Its oracle is a
scripted shell solution (:meth:`TerminalTask.solution`), run with one ``run`` action and
followed by ``submit``. The canonical actions are ``run(command)``, ``read_file(path)``,
``write_file(path, content)`` and ``submit()``.

Fields: ``instruction`` and ``result`` (the last action's result as structured data; a
terminal harness decides how it is shown, see :mod:`harness_gym.envs.terminal.options`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import pickle
import secrets
import shlex
from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from harness_gym.core.task import Action, ActionSpec, Param, StepResult, Task
from harness_gym.envs.terminal.backends import ExecutionBackend, open_backend
from harness_gym.envs.terminal.episode_dirs import (
    copy_tree,
    make_episode_dir,
    owned_tempdir,
    remove_episode_dir,
    remove_tree,
)
from harness_gym.envs.terminal.sandbox_limits import CommandResult, SandboxLimits
from harness_gym.envs.terminal.sandbox_view import require_bwrap

log = logging.getLogger(__name__)

RUN = ActionSpec(
    "run",
    "Run a shell command with bash in the sandbox and see its output.",
    (Param("command", "str", "The shell command line(s) to run."),),
)
READ_FILE = ActionSpec(
    "read_file",
    "Read a text file. Relative paths start at /app.",
    (Param("path", "str", "Path of the file to read."),),
)
WRITE_FILE = ActionSpec(
    "write_file",
    "Write a text file, replacing it if it exists. Relative paths start at /app.",
    (Param("path", "str", "Path of the file to write."), Param("content", "str", "The whole new content.")),
)
SUBMIT = ActionSpec("submit", "Say that the task is done; the final state of /app is then checked.")
TERMINAL_ACTIONS = (RUN, READ_FILE, WRITE_FILE, SUBMIT)
#: Longest command or file content the task accepts (the harness's max_action_chars also applies).
MAX_COMMAND_CHARS = 1 << 20


class Files(dict):
    """The instance's files: relative path -> text (or bytes); a path ending in ``/`` is a directory."""


class TerminalTask(Task):
    """Base class of the terminal tasks."""

    field_names: ClassVar[tuple[str, ...]] = ("instruction", "result")
    action_specs: ClassVar[tuple[ActionSpec, ...]] = TERMINAL_ACTIONS
    max_steps: ClassVar[int] = 8
    family: ClassVar[str | None] = "terminal"
    #: Per-command limits (subclasses may relax the timeout, e.g. for git-heavy set-ups).
    limits: ClassVar[SandboxLimits] = SandboxLimits()
    #: Where episodes run (:mod:`harness_gym.envs.terminal.backends`): ``"bwrap"`` or a factory.
    backend: ClassVar[Any] = "bwrap"

    def __init__(self, shell: str = "fresh") -> None:
        require_bwrap()
        self.shell = shell
        self._root: Path | None = None
        self._sandbox: ExecutionBackend | None = None
        self._clear()

    def _clear(self) -> None:
        self.instruction = ""
        self.files: dict[str, Any] = {}
        self.setup: list[str] = []
        self.params: dict[str, Any] = {}
        self.last: dict[str, Any] | None = None
        self.done = False
        self.succeeded = False
        self.oracle_done = False
        self.history: list[dict[str, Any]] = []
        self.verdict = ""
        #: What set-up made that the verifier compares against (e.g. commit ids); not in state().
        self.baseline: dict[str, Any] = {}

    # -- to implement ----------------------------------------------------------------------

    @abstractmethod
    def build(self, rng: np.random.Generator) -> None:
        """Set ``self.instruction``, ``self.files``, ``self.params`` (and ``self.setup``)."""

    @abstractmethod
    def solution(self) -> str:
        """A shell script that solves the instance (run in /app, in a fresh or persistent shell)."""

    @abstractmethod
    def verify(self) -> tuple[bool, str]:
        """Whether the final state of /app solves the task, and why not."""

    # -- helpers for verifiers (host side: no symlink ever followed out of /app) -----------

    @property
    def app(self) -> Path:
        assert self._root is not None, "reset() first"
        return self._root / "app"

    def read(self, rel: str, limit: int = 1 << 20) -> str | None:
        """Text of a regular file under /app, or ``None`` (missing, not regular, a symlink)."""
        path = self.app / rel
        try:
            real = Path(os.path.realpath(path))
            if not real.is_relative_to(self.app.resolve()) or path.is_symlink() or not path.is_file():
                return None
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                return f.read(limit).decode("utf-8", "replace")
        except OSError:
            return None

    def exists(self, rel: str) -> bool:
        return os.path.lexists(self.app / rel)

    def check(self, action: Action) -> str | None:  # noqa: D401 - Task API
        if self.done:
            return "the episode is over"
        for key in ("command", "path", "content"):
            if key in action.kwargs and len(action[key]) > MAX_COMMAND_CHARS:
                return f"{key} is longer than {MAX_COMMAND_CHARS} characters"
        if action.name == "run" and not action["command"].strip():
            return "empty command: give a shell command to run"
        if action.name in ("read_file", "write_file") and not action["path"].strip():
            return "empty path"
        if "\x00" in "".join(str(v) for _, v in action.args):
            return "NUL characters cannot appear in a command or file"
        return None

    def sh(self, command: str, timeout: float | None = None) -> CommandResult:
        """Run a checking command for a verifier, e.g. ``git cat-file``: in a fresh one-shot
        sandbox after every agent process is killed, with a home, environment and git config
        the agent never touched, and /app read-only (see :meth:`Sandbox.run_verifier`)."""
        assert self._sandbox is not None
        res = self._sandbox.run_verifier(command, timeout=timeout)
        self.tampering = [*getattr(self, "tampering", []), *res.tampering]
        return res

    def sh_many(
        self, commands: list[str], stdin: list[str] | None = None, timeout: float = 5
    ) -> list[tuple[int | None, str]]:
        """Run several checking commands in one verifier sandbox: ``(exit code, stdout)`` each.

        Each command gets its stdin (``stdin[i]``, default empty), ``timeout`` seconds, its
        stdout captured to a file, and after it every process it left is killed
        (``kill -9 -1``) before the next starts; the outputs are reported once all have run.
        A missing or garbled report reads as ``(None, "")``.
        """
        tag = "HG-CASE-" + secrets.token_hex(8)
        lines = ["cd /tmp"]
        for i, command in enumerate(commands):
            data = base64.b64encode((stdin[i] if stdin else "").encode()).decode()
            lines += [
                f"printf %s {data} | base64 -d > /tmp/hg-in-{i}",
                f"timeout -s KILL {timeout:g} /bin/bash --noprofile --norc -c {shlex.quote(command)} "
                f"< /tmp/hg-in-{i} > /tmp/hg-out-{i} 2>/dev/null; echo $? > /tmp/hg-rc-{i}",
                "kill -9 -1 2>/dev/null",
            ]
        lines += [
            f'printf "%s %s %s\\n" {tag}-{i} "$(cat /tmp/hg-rc-{i})" "$(base64 -w0 < /tmp/hg-out-{i})"'
            for i in range(len(commands))
        ]
        res = self.sh("\n".join(lines), timeout=timeout * len(commands) + 10)
        reports: dict[str, list[str]] = {}
        for line in res.stdout.splitlines():
            if line.startswith(tag):
                key, _, rest = line.partition(" ")
                reports.setdefault(key, []).append(rest)
        out: list[tuple[int | None, str]] = []
        for i in range(len(commands)):
            found = reports.get(f"{tag}-{i}", [])
            try:
                code, _, data = found[0].partition(" ") if len(found) == 1 else ("", "", "")
                out.append((int(code), base64.b64decode(data, validate=True).decode("utf-8", "replace")))
            except ValueError:
                out.append((None, ""))
        if any(code is None for code, _ in out):  # the cases ran, or the shell did not: say which
            log.warning(
                "%s: %d of %d checking commands left no report; the verifier shell: exit %s, "
                "timed out %s, signal %s, %.1f s, stderr %r",
                self.task_id, sum(code is None for code, _ in out), len(out), res.exit_code,
                res.timed_out, res.signal, res.seconds, res.stderr[-500:],
            )  # fmt: skip
        return out

    def python_check(self, code: str, payload: Any, timeout: float = 10) -> tuple[Any, str]:
        """Run ``code`` in the verifier sandbox's isolated Python and return what it reports.

        ``code`` sees ``payload`` (JSON-decoded) as ``PAYLOAD`` and assigns its answer to
        ``RESULT`` (JSON-encodable). It runs with ``python3 -I -S`` from ``/tmp``: no site or
        user customization, no ``PYTHONPATH``, and ``/app`` appended after the standard library,
        so that nothing in /app shadows a module the check imports. Whatever the agent's code
        prints, only the values count: the caller compares them with answers computed on the
        host. Returns ``(RESULT, "")`` or ``(None, why)``.
        """
        tag = "HG-RESULT-" + secrets.token_hex(8)
        program = (
            "import json, sys\nsys.path.append('/app')\n"
            f"PAYLOAD = json.loads({json.dumps(json.dumps(payload))})\n{code}\n"
            f"sys.stdout.write('\\n{tag}' + json.dumps(RESULT) + '\\n')\n"
        )
        quoted = "'" + program.replace("'", "'\\''") + "'"
        res = self.sh(f"cd /tmp && python3 -I -S -B -c {quoted}", timeout=timeout)
        lines = [line for line in res.stdout.splitlines() if line.startswith(tag)]
        if res.exit_code != 0 or len(lines) != 1:
            output = (res.stdout + res.stderr)[-300:]
            return None, f"the check did not finish (exit {res.exit_code}): {output}"
        try:
            return json.loads(lines[0][len(tag) :]), ""
        except ValueError:
            return None, "the check's answer is not JSON"

    @staticmethod
    def verify_rng() -> np.random.Generator:
        """Fresh randomness drawn at verify time: inputs no agent can have seen or memorized."""
        return np.random.default_rng(secrets.randbits(128))

    def make_sandbox(self, root: Path) -> ExecutionBackend:
        """The episode's sandbox over the episode directory ``root``, from :attr:`backend`
        (a subclass may add mounts or variables, e.g. a Harbor task's ``/solution`` and ``ENV``)."""
        return open_backend(self.backend, root, self.limits)

    def after_setup(self) -> None:
        """Record what set-up made that the verifier needs (``self.baseline``); default none."""

    # -- Task API --------------------------------------------------------------------------

    def reset(self, rng: np.random.Generator) -> None:
        self.close()
        self._clear()
        self.build(rng)
        self._root = make_episode_dir()
        for rel, content in self.files.items():
            path = self.app / rel
            if rel.endswith("/"):
                path.mkdir(parents=True, exist_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        self._sandbox = self.make_sandbox(self._root)
        for command in self.setup:
            res = self._sandbox.run(command, persistent=False, timeout=30)
            if res.exit_code != 0:
                raise RuntimeError(f"{self.task_id}: set-up command failed: {command!r}: {res.stderr}")
        self.after_setup()

    def fields(self) -> dict[str, Any]:
        return {"instruction": self.instruction, "result": dict(self.last) if self.last else {}}

    def legal_actions(self) -> list[Action]:
        if self.done:
            return []
        actions = [
            self.oracle(),
            Action.of("run", command="ls -la"),
            Action.of("read_file", path=self.peek_file()),
            Action.of("submit"),
        ]
        return list(dict.fromkeys(actions))

    def peek_file(self) -> str:
        names = sorted(k for k in self.files if not k.endswith("/"))
        return names[0] if names else "README"

    def step(self, action: Action) -> StepResult:
        assert self._sandbox is not None
        record: dict[str, Any] = {"action": action.name}
        if action.name == "run":
            try:
                res = self._sandbox.run(action["command"], persistent=self.shell == "persistent")
            except (OSError, RecursionError) as err:  # what the agent left broke a host-side step
                res = CommandResult(action["command"], "", f"host error: {type(err).__name__}: {err}", None)
                record["host_error"] = f"{type(err).__name__}: {err}"
            notes = []
            if res.timed_out:
                notes.append(f"the command timed out after {self.limits.timeout:g} s and was killed")
            if res.signal:
                notes.append(f"killed by {res.signal}")
            if res.binary:
                notes.append("the output is not valid UTF-8 text; bad bytes are shown as \ufffd")
            if res.quota_removed:
                notes.append(f"disk quota exceeded; removed {res.quota_removed}")
            if res.shell_restarted and self.shell == "persistent":
                notes.append("the shell was restarted: cwd and variables are reset")
            self.last = {
                "kind": "run",
                "command": action["command"],
                "stdout": res.stdout,
                "stderr": res.stderr,
                "exit_code": res.exit_code,
                "cwd": res.cwd,
                "notes": notes,
            }
            record.update(res.to_dict(), contained=res.contained)
            record.pop("stdout"), record.pop("stderr")
            if action["command"] == self.solution():
                self.oracle_done = True
        elif action.name == "read_file":
            reply = self._sandbox.read_file(action["path"])
            text = reply.get("content", "") if reply.get("ok") else reply.get("error", "")
            self.last = {"kind": "read_file", "ok": bool(reply.get("ok")), "text": text}
            record.update(path=action["path"], ok=bool(reply.get("ok")))
        elif action.name == "write_file":
            reply = self._sandbox.write_file(action["path"], action["content"])
            text = (
                f"wrote {len(action['content'])} characters to {action['path']}"
                if reply.get("ok")
                else reply.get("error", "")
            )
            self.last = {"kind": "write_file", "ok": bool(reply.get("ok")), "text": text}
            record.update(path=action["path"], ok=bool(reply.get("ok")))
        else:
            try:  # nothing of the agent's runs (or writes) while the state is checked
                self._sandbox.stop_agent()
            except OSError:
                pass
            self.tampering = []
            try:
                ok, why = self.verify()
            except Exception as err:  # noqa: BLE001 - a broken state is a failed check, never a crash
                ok, why = False, f"verifier error: {type(err).__name__}: {err}"
            if self.tampering and ok:  # a checking command was killed, or left processes behind
                ok, why = False, f"verifier tampering: {'; '.join(self.tampering)}"
            self.done, self.succeeded, self.verdict = True, bool(ok), why
            self.last = {"kind": "submit", "ok": bool(ok), "text": "submitted"}
            record.update(success=bool(ok), verdict=why, tampering=list(self.tampering))
        self.history.append(record)
        return StepResult(float(self.succeeded), self.done, self.succeeded, self.verdict)

    def oracle(self) -> Action:
        if not self.oracle_done:
            return Action.of("run", command=self.solution())
        return Action.of("submit")

    def state(self) -> dict[str, Any]:
        files = {
            k: hashlib.sha256(v if isinstance(v, bytes) else v.encode()).hexdigest()[:16]
            for k, v in sorted(self.files.items())
        }
        return {
            "task": self.task_id,
            "instruction": self.instruction,
            "files": files,
            "setup": self.setup,
            "params": self.params,
            "done": self.done,
            "succeeded": self.succeeded,
            "oracle_done": self.oracle_done,
            "steps": len(self.history),
        }

    # -- snapshots copy the working directory; the persistent shell restarts on restore -----

    def snapshot(self) -> Any:
        plain = {k: v for k, v in self.__dict__.items() if k not in ("_sandbox", "_root")}
        tmp = owned_tempdir(prefix="hg-term-snap-")
        if self._root is not None:
            try:  # as it is: FIFOs, symlinks (never followed), modes, any depth
                copy_tree(self._root / "app", tmp / "app")
            except OSError:
                remove_tree(tmp)
                raise
        return pickle.dumps(plain), tmp

    def restore(self, snapshot: Any) -> None:
        blob, tmp = snapshot
        self.__dict__.update(pickle.loads(blob))
        if self._root is not None and self._sandbox is not None:
            self._sandbox.reset_shell()
            # In place: the sandbox has this very directory bind-mounted as /app.
            os.chmod(self.app, 0o755)
            with os.scandir(self.app) as entries:
                children = [e.path for e in entries]
            for child in children:
                remove_tree(child)
            copy_tree(tmp / "app", self.app)
            self._sandbox.prepare()
        remove_tree(tmp)

    def close(self) -> None:
        """Kill the sandbox and remove the episode directory."""
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
        if self._root is not None:
            remove_episode_dir(self._root)
            self._root = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
