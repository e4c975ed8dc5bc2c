"""The plumbing of the OpenAI-shaped fault stand-ins (stdlib ``http.server`` on 127.0.0.1):
a threaded server with a backlog for many requests in flight, JSON replies, and a chat
completion body. The stand-ins themselves (what each route answers) live in their tests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # a backlog for every connection in flight (the default 5 drops some)
    daemon_threads = True


def send_json(handler: BaseHTTPRequestHandler, status: int, body: Any) -> None:
    """Answer ``body`` as JSON with ``status``; a client that left is no error of the server."""
    data = json.dumps(body).encode()
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


def chat_completion(model: str, content: str, prompt_tokens: int = 1, completion_tokens: int = 1) -> dict:
    """A chat completion body as an OpenAI-compatible server answers it."""
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [choice],
        "usage": usage,
    }


class StandIn:
    """Serves ``handler`` (a ``BaseHTTPRequestHandler`` class) on a free port until :meth:`close`."""

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.http = _Server(("127.0.0.1", 0), handler)
        threading.Thread(target=self.http.serve_forever, args=(0.02,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
