"""Where the real MiniWoB++ tasks live: the HTML shipped in the ``miniwob`` PyPI package.

The package is located without importing it (importing ``miniwob`` registers Farama's
Selenium environments and pulls in Selenium). Pages are served by a small HTTP server of this
process, bound to ``127.0.0.1`` and started on first use, with every response cacheable for
good (the files never change). Over HTTP, Chromium keeps the files in its cache and the
compiled scripts in its code cache, so each episode's freshly loaded document parses and
compiles no script from scratch; ``file://`` URLs get neither cache.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import logging
import mimetypes
import os
import re
import sys
import threading
import urllib.parse
from pathlib import Path

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg")
_SPECIAL = re.compile(r"common/special/([A-Za-z0-9_-]+)")

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'harness-gym[browser]'  (or: pip install miniwob playwright)"


class MissingAssetsError(RuntimeError):
    """The ``miniwob`` package (which ships the task HTML) is not installed."""


@functools.lru_cache(maxsize=1)
def html_root() -> Path:
    """The ``html`` folder of the installed ``miniwob`` package."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise MissingAssetsError(
            "the real MiniWoB++ tasks need the HTML assets of the `miniwob` package, which is not "
            f"installed. Install it with: {INSTALL_HINT}"
        )
    for location in spec.submodule_search_locations:
        root = Path(location) / "html"
        if (root / "miniwob").is_dir() and (root / "core" / "core.js").is_file():
            return root
    raise MissingAssetsError(
        f"the `miniwob` package at {list(spec.submodule_search_locations)} has no html/miniwob folder; "
        f"reinstall it with: {INSTALL_HINT}"
    )


def task_path(subdomain: str) -> Path:
    """The HTML file of one MiniWoB++ task, e.g. ``task_path("click-button")``."""
    path = html_root() / "miniwob" / f"{subdomain}.html"
    if not path.is_file():
        raise MissingAssetsError(f"no MiniWoB++ task {subdomain!r} in {path.parent}")
    return path


def task_url(subdomain: str) -> str:
    """The URL of one MiniWoB++ task on this process's asset server (started if needed)."""
    task_path(subdomain)
    return f"{server_url()}/miniwob/{subdomain}.html"


def available_subdomains() -> list[str]:
    """Every task that the installed ``miniwob`` package ships (flight tasks excluded)."""
    return sorted(p.stem for p in (html_root() / "miniwob").glob("*.html"))


@functools.cache
def image_paths(subdomain: str) -> tuple[str, ...]:
    """The images a task may show: every image in the ``common/special`` folders it uses.

    A page loads images asynchronously, so an element sized by its image (MiniWoB's icons
    are CSS ``content: url(...)``) would be laid out differently depending on how fast the
    file arrived. The session decodes these images into the page's cache before the episode
    starts, so the layout, and with it the observation, never depends on timing. Paths are
    relative to the html folder.
    """
    text = task_path(subdomain).read_text(encoding="utf-8", errors="replace")
    root = html_root()
    paths = []
    for name in sorted(set(_SPECIAL.findall(text))):
        folder = root / "common" / "special" / name
        if folder.is_dir():
            found = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
            paths.extend(p.relative_to(root).as_posix() for p in found)
    return tuple(paths)


def image_urls(subdomain: str) -> tuple[str, ...]:
    """The URLs of :func:`image_paths` on this process's asset server."""
    base = server_url()
    return tuple(f"{base}/{path}" for path in image_paths(subdomain))


# -- the asset server -------------------------------------------------------------------------

#: Every response may be cached for a year and never revalidated: the files never change.
CACHE_CONTROL = "public, max-age=31536000, immutable"

_assets: dict[str, tuple[bytes, str]] = {}  # path -> (bytes, content type), files found so far


def _asset(path: str) -> tuple[bytes, str] | None:
    """The bytes and content type of a file under the html folder (None if there is none)."""
    found = _assets.get(path)
    if found is None:
        root = html_root().resolve()
        try:
            file = (root / path.lstrip("/")).resolve()
        except (OSError, ValueError):  # e.g. a NUL byte in the path
            return None
        if not file.is_relative_to(root) or not file.is_file():
            return None
        # No charset parameter: the page decodes its text as it would from disk.
        content_type = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        found = _assets[path] = (file.read_bytes(), content_type)
    return found


class _AssetHandler(http.server.BaseHTTPRequestHandler):
    """GET for the files of the ``miniwob`` html folder, from memory, cacheable for good."""

    protocol_version = "HTTP/1.1"
    timeout = 60  # idle keep-alive connections are dropped after a minute

    def do_GET(self) -> None:
        found = _asset(urllib.parse.unquote(urllib.parse.urlsplit(self.path).path))
        if found is None:
            self.send_error(404)
            return
        body, content_type = found
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", CACHE_CONTROL)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: no line on stderr per request."""


#: Errors that mean the client went away mid-request: normal when Chromium cancels a load,
#: navigates or closes, so they are logged at debug level rather than printed.
DROPPED = (ConnectionError, TimeoutError)


class _AssetServer(http.server.ThreadingHTTPServer):
    """The asset server: a dropped connection is a debug log line, not a traceback on stderr."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, DROPPED):
            log.debug("asset server: %s dropped the connection (%r)", client_address, error)
            return
        super().handle_error(request, client_address)  # a real fault: keep the traceback


_server: tuple[int, str] | None = None  # (pid that started it, base URL)
_server_lock = threading.Lock()


def server_url() -> str:
    """The base URL of this process's asset server, started (as a daemon thread) on first use.

    One server per process (a forked child starts its own): all sessions share it, so the
    URLs, and the pages' origin, are the same in every browser of the process.
    """
    global _server
    with _server_lock:
        if _server is None or _server[0] != os.getpid():
            server = _AssetServer(("127.0.0.1", 0), _AssetHandler)
            threading.Thread(target=server.serve_forever, name="miniwob-assets", daemon=True).start()
            _server = (os.getpid(), f"http://127.0.0.1:{server.server_address[1]}")
        return _server[1]
