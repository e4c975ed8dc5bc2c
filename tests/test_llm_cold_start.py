"""No reply is lost against a healthy server, from a cold process with many requests in flight.

The ``openai`` client looks ``httpx`` up in ``sys.modules`` on every request and response; when
the backend imported ``httpx`` lazily (for ``GET /version``) while its pool was sending, the
other threads saw a half-imported module and most replies became ``AttributeError``s filed as
transport errors. That only shows in a process that has not imported ``httpx`` yet, so the
client runs in a fresh subprocess. The server is a small stdlib stand-in that answers every
route correctly (``/version``, ``/v1/models``, chat completions), allowed here only because
the real vLLM server's test of the same path is ``tests/test_llm_server_models.py``
(``-m llm``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from openai_stand_in import StandIn, chat_completion, send_json

ROOT = Path(__file__).resolve().parents[1]


class Healthy(StandIn):
    """A server that answers every request right, and counts the chat requests."""

    def __init__(self) -> None:
        self.chats = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                if self.path.endswith("/version"):
                    return send_json(self, 200, {"version": "0.0.0-healthy"})
                send_json(
                    self, 200, {"object": "list", "data": [{"id": "m", "object": "model", "root": "/w"}]}
                )

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with server._lock:
                    server.chats += 1
                send_json(self, 200, chat_completion("m", "hi"))

            def log_message(self, *args: Any) -> None:
                pass

        self.serve(Handler)


@pytest.fixture
def healthy() -> Iterator[Healthy]:
    server = Healthy()
    yield server
    server.close()


# The client, in a process that has imported nothing: N requests in flight, and the server's
# version asked (the first use of the HTTP library outside the client) while they are.
CHILD = r"""
import json, sys
from harness_gym.llm.openai_backend import OpenAIBackend
from harness_gym.llm.types import ChatRequest, Sampling
url, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
backend = OpenAIBackend(model, url, concurrency=32, retries=0, timeout=600)
request = ChatRequest(messages=[{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=2))
futures = [backend.submit(request) for _ in range(n)]
version = backend.server_version
done = [f.result() for f in futures]
print(json.dumps({"version": version, "errors": [c.error for c in done if c.failed],
                  "texts": sorted({c.text for c in done}), "identity": backend.identity}))
"""


def cold_client(url: str, model: str, n: int) -> dict[str, Any]:
    """What :data:`CHILD` saw, run in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", CHILD, url, model, str(n)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["errors"] == [], f"{len(result['errors'])} of {n} replies lost: {result['errors'][0]}"
    return result


@pytest.mark.parametrize("run", range(2))
def test_no_reply_is_lost_from_a_cold_process(healthy: Healthy, run: int) -> None:
    result = cold_client(healthy.url, "m", 200)
    assert result["texts"] == ["hi"] and result["version"] == "0.0.0-healthy"
    assert result["identity"].startswith("served:m:")
    assert healthy.chats == 200
