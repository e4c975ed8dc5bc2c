"""``view --serve``: a localhost server for the viewer's files and the run files it reads, only.

The server answers ``GET`` and ``HEAD`` for a fixed list of addresses, made when it starts
from the view folder's marker (:func:`harness_gym.analysis.view_folder.recorded`): the page
and its assets and data at ``/index.html``, ``/assets/NAME``, ``/data/NAME`` (``/`` is the
page), and the screenshots its trajectories name at ``/run/screenshots/I/T.png``. Every other
address is 404: no folder listings, no other file of the run or of the folder around it. A
file reached through a symbolic link is 404 too (checked at each request). It binds
``127.0.0.1`` and answers only a ``Host`` of ``127.0.0.1:PORT`` or ``localhost:PORT`` (403
otherwise), so a web page that rebinds its own name to 127.0.0.1 cannot read it.
"""

from __future__ import annotations

import http.server
from pathlib import Path
from urllib.parse import urlsplit

from harness_gym.analysis.view_folder import recorded

#: Where the run files sit in the served address space; the page's base when served.
RUN_PREFIX = "run/"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
}
_POLICY = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self'; frame-ancestors 'none'"


def routes(view_dir: str | Path, run_dir: str | Path) -> dict[str, Path]:
    """Address -> file: the view's files and the run files its marker lists, nothing else."""
    view, run = Path(view_dir).resolve(), Path(run_dir).resolve()
    files, run_files = recorded(view)
    table = {f"/{name}": view / name for name in files}
    table.update({f"/{RUN_PREFIX}{name}": run / name for name in run_files})
    if "/index.html" in table:
        table["/"] = table["/index.html"]
    return table


class _Handler(http.server.BaseHTTPRequestHandler):
    table: dict[str, Path] = {}
    hosts: frozenset[str] = frozenset()
    server_version = "harness-gym-view"
    sys_version = ""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        self._answer(body=False)

    def _answer(self, body: bool) -> None:
        if self.headers.get("Host", "").lower() not in self.hosts:
            self._refuse(403, "only Host 127.0.0.1 or localhost with this port is served")
            return
        path = self.table.get(urlsplit(self.path).path)
        data = _read(path) if path is not None else None
        if path is None or data is None:
            self._refuse(404, "not part of the view")
            return
        self.send_response(200)
        self.send_header("Content-Type", _TYPES.get(path.suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", _POLICY)
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _refuse(self, code: int, why: str) -> None:
        data = why.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        pass  # quiet: the terminal shows the address and Ctrl-C only


def _read(path: Path) -> bytes | None:
    """The file's bytes, or None when it is missing, not a regular file or behind a link."""
    try:
        if path.resolve(strict=True) != path or not path.is_file():
            return None
        return path.read_bytes()
    except OSError:
        return None


def make_server(view_dir: str | Path, run_dir: str | Path, port: int = 0) -> http.server.ThreadingHTTPServer:
    """A server (not started) for the view folder on ``127.0.0.1:port`` (0: any free port)."""
    table = routes(view_dir, run_dir)
    handler = type("ViewHandler", (_Handler,), {"table": table})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    bound = server.server_address[1]
    handler.hosts = frozenset({f"127.0.0.1:{bound}", f"localhost:{bound}"})
    return server
