"""A real vLLM server for tests: ``scripts/vllm-server.sh`` started once per test session.

The server runs in its own venv (``.venv-vllm``, created by the script on first use) and its own
process group, so teardown stops the API process, the engine core and the worker together.
A missing or broken vLLM install FAILS the tests that need the server (the project's rule: tests
fail loudly on missing dependencies); ``HARNESS_GYM_SKIP_VLLM=1`` turns that into a skip.

Environment: ``HARNESS_GYM_VLLM_ARGS`` adds options to the script (e.g. ``--enforce-eager`` for a
faster start); ``HARNESS_GYM_VLLM_VENV`` / ``HARNESS_GYM_CACHE`` are passed through to it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "vllm-server.sh"
# Start-up takes 100-115 s on an idle 2-core machine; a loaded one can take several times that.
READY_TIMEOUT = float(os.environ.get("HARNESS_GYM_VLLM_READY_TIMEOUT", "900"))
INSTALL_TIMEOUT = 1800.0
STOP_GRACE = 10.0


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class VLLMServer:
    """A running vLLM OpenAI-compatible server: where it listens and what it has served."""

    base_url: str  # e.g. http://127.0.0.1:PORT/v1
    model: str  # the served model name, what requests pass as ``model``
    model_path: Path  # the Hugging Face folder the server loaded
    port: int
    log_path: Path
    process: subprocess.Popen = field(repr=False)
    start_seconds: float = 0.0  # from launch to the first answer of GET /v1/models

    @property
    def root_url(self) -> str:
        return self.base_url.removesuffix("/v1")

    def client(self, **kwargs: Any) -> Any:
        """An ``openai.OpenAI`` client for this server (no retries, so every request is counted once)."""
        import openai

        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("timeout", 120.0)
        return openai.OpenAI(base_url=self.base_url, api_key="EMPTY", **kwargs)

    def metrics_text(self) -> str:
        """The Prometheus text of ``GET /metrics``."""
        with urllib.request.urlopen(f"{self.root_url}/metrics", timeout=10) as response:
            return response.read().decode()

    def requests_served(self) -> int:
        """Generation requests the engine has finished, for any reason (stop, length, abort, error).

        Sum of ``vllm:request_success_total`` over ``finished_reason``. Requests the server rejects
        before generation (HTTP 400, e.g. a prompt longer than the context) are not counted; a
        request with ``n`` choices counts ``n``. Updated before the response reaches the client.
        """
        return int(sum(_samples(self.metrics_text(), "vllm:request_success_total").values()))

    def http_requests(self, endpoint: str = "/v1/chat/completions", status: str | None = None) -> int:
        """HTTP POSTs to ``endpoint`` the server has answered (``http_requests_total``).

        ``status`` is a class such as ``"2xx"`` or ``"4xx"``; None counts all of them.
        """
        total = 0.0
        for labels, value in _samples(self.metrics_text(), "http_requests_total").items():
            got = dict(labels)
            if got.get("handler") == endpoint and got.get("method") == "POST":
                if status is None or got.get("status") == status:
                    total += value
        return int(total)


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one metric in Prometheus text format, keyed by their sorted labels."""
    found: dict[tuple[tuple[str, str], ...], float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match["name"] == name:
            labels = tuple(sorted(_LABEL.findall(match["labels"] or "")))
            found[labels] = float(match["value"])
    return found


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM the server's process group, SIGKILL after STOP_GRACE seconds; leave nothing behind."""
    pgid = process.pid  # start_new_session: the script (exec'd into the server) leads its own group
    for sig, grace in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if process.poll() is not None and not _group_alive(pgid):
                return
            time.sleep(0.2)
    process.poll()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Members that are zombies (exited, waiting to be reaped by init) still answer signal 0.
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the test process dies, even by SIGKILL.

    The server runs in its own session, so without this a killed pytest would leave it running.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def _install(log_dir: Path, env: dict[str, str]) -> None:
    """Create the vLLM venv if needed (minutes the first time); fail loudly if that fails."""
    log = log_dir / "install.log"
    with log.open("w") as out:
        try:
            done = subprocess.run(
                ["bash", str(SCRIPT), "--install-only"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=INSTALL_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"Installing vLLM took over {INSTALL_TIMEOUT:.0f} s:\n{_tail(log)}")
    if done.returncode != 0:
        pytest.fail(
            "Could not create the vLLM venv (scripts/vllm-server.sh --install-only failed; set "
            f"HARNESS_GYM_SKIP_VLLM=1 to skip the server tests instead):\n{_tail(log)}"
        )


def _wait_ready(process: subprocess.Popen, url: str, log: Path, timeout: float) -> list[dict]:
    """Poll GET /v1/models until it answers; fail with the log's tail if the server dies first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"vLLM server exited with code {process.returncode} before it was ready:\n{_tail(log)}"
            )
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5) as response:
                return json.loads(response.read())["data"]
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            time.sleep(1.0)
    _stop(process)
    pytest.fail(f"vLLM server did not answer GET /v1/models within {timeout:.0f} s:\n{_tail(log)}")


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMServer]:
    """Start ``scripts/vllm-server.sh`` (embedded model) on a free port for the session."""
    if os.environ.get("HARNESS_GYM_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_GYM_SKIP_VLLM=1: the vLLM server tests are skipped")
    log_dir = tmp_path_factory.mktemp("vllm-server")
    env = dict(os.environ)
    # Convert the embedded model with the interpreter running the tests (the project's venv).
    env.setdefault("HARNESS_GYM_PYTHON", sys.executable)
    _install(log_dir, env)

    port = _free_port()
    log = log_dir / "server.log"
    command = ["bash", str(SCRIPT), "--port", str(port), *shlex.split(env.get("HARNESS_GYM_VLLM_ARGS", ""))]
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        models = _wait_ready(process, base_url, log, READY_TIMEOUT)
        server = VLLMServer(
            base_url=base_url,
            model=models[0]["id"],
            model_path=Path(models[0]["root"]),
            port=port,
            log_path=log,
            process=process,
            start_seconds=time.monotonic() - started,
        )
        yield server
    finally:
        _stop(process)
