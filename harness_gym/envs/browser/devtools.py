"""How this process reaches Chromium's DevTools: the ``pipe`` and ``port`` modes, and in ``port``
mode the session's own connection to each tab.

``pipe`` (the default) opens no port: every call goes through Playwright's driver over its
private pipe. ``port`` also opens a DevTools port on 127.0.0.1 (:data:`PORT_ARG`, found in the
profile's :data:`DEVTOOLS_PORT_FILE`) and sends page calls over a WebSocket of the session's
own (:class:`_DirectPage`), one process hop fewer per call, but the port is open to every local
user (:class:`DevToolsPortWarning`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness_gym.envs.browser.errors import BrowserCrashedError

#: What the DevTools protocol answers when the document went away under (or before) a call.
_CONTEXT_GONE = (
    "context was destroyed",
    "find default execution context",
    "find context with",
    "navigated or closed",
)
#: The file in which Chromium writes the port of ``--remote-debugging-port=0`` (profile dir).
DEVTOOLS_PORT_FILE = "DevToolsActivePort"
#: How this process reaches Chromium's DevTools: ``pipe`` (the default) opens no port, every
#: call goes through Playwright's driver over its private pipe; ``port`` also opens a DevTools
#: port on 127.0.0.1 for a connection of the session's own (:class:`_DirectPage`, one process
#: hop fewer per call), which every local user can reach (a :class:`DevToolsPortWarning` says
#: so). A session's ``devtools`` argument, else this environment variable, else ``pipe``.
DEVTOOLS_ENV = "HARNESS_GYM_BROWSER_DEVTOOLS"
DEVTOOLS_MODES = ("pipe", "port")
#: The argument that opens the DevTools port (a port of the system's choosing, as chromedriver
#: opens one; Chromium binds it to 127.0.0.1 only).
PORT_ARG = "--remote-debugging-port=0"


class DevToolsPortWarning(UserWarning):
    """A browser was started with its DevTools port open (``devtools="port"``)."""


def devtools_mode(mode: str | None = None) -> str:
    """``mode`` if given, else ``$HARNESS_GYM_BROWSER_DEVTOOLS``, else ``pipe``; checked."""
    if mode is None:
        mode = os.environ.get(DEVTOOLS_ENV) or "pipe"
    if mode not in DEVTOOLS_MODES:
        raise ValueError(f"{DEVTOOLS_ENV} must be one of {', '.join(DEVTOOLS_MODES)}, got {mode!r}")
    return mode


class _ContextGoneError(BrowserCrashedError):
    """The document went away under a call (a navigation): the call is retried in the new one."""


class _DirectPage:
    """A DevTools connection of this process's own to one tab of the browser, a WebSocket
    straight to Chromium's DevTools port (``websocket-client``): a ``Runtime.evaluate`` crosses
    one process boundary each way instead of two (Python -> Playwright's Node driver ->
    Chromium), which on a busy machine is most of a call's time.

    It sends commands and reads their answers; the only events it asks for are the
    ``Inspector`` domain's: when the tab's renderer crashes (``Inspector.targetCrashed``) the
    call waiting for it calls ``on_crash`` (which kills the browser) and fails at once, as
    Playwright's ``crash`` event does for its own calls. A call blocks until the answer comes
    or the socket fails: the session's watchdog kills the browser past the deadline, which
    closes the socket; ``timeout`` (longer than any deadline) is a last resort.
    """

    def __init__(self, url: str, timeout: float, on_crash: Callable[[], None]) -> None:
        import websocket

        self._errors: tuple[type[BaseException], ...] = (OSError, ValueError, websocket.WebSocketException)
        self._ws = websocket.create_connection(url, timeout=timeout, suppress_origin=True)
        self._id = 0
        self._on_crash = on_crash
        self.send("Inspector.enable", {})

    def send(self, method: str, params: dict[str, Any]) -> Any:
        self._id += 1
        ident = self._id
        try:
            self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
            while True:
                message = json.loads(self._ws.recv())
                if message.get("id") == ident:
                    break
                if message.get("method") in ("Inspector.targetCrashed", "Inspector.detached"):
                    self._on_crash()
                    raise BrowserCrashedError(f"the tab went away during {method}: {message['method']}")
        except self._errors as err:
            reason = str(err) or type(err).__name__
            raise BrowserCrashedError(f"the DevTools connection to Chromium failed: {reason}") from err
        error = message.get("error")
        if error is not None:
            text = str(error.get("message", error))
            if any(gone in text for gone in _CONTEXT_GONE):
                raise _ContextGoneError(text)
            raise BrowserCrashedError(f"Chromium's DevTools answered {method} with an error: {text}")
        return message.get("result", {})

    def close(self) -> None:
        """Drop the connection (no closing handshake: the browser may be frozen)."""
        try:
            self._ws.shutdown()
        except Exception:  # noqa: BLE001 - a connection to a dead browser is closed already
            pass


def _devtools_port(needles: list[str], seconds: float) -> int | None:
    """The DevTools port Chromium chose (from its profile's :data:`DEVTOOLS_PORT_FILE`), waiting
    up to ``seconds`` for the file; None when there is none."""
    folders = [n.split("=", 1)[1] for n in needles if n.startswith("--user-data-dir=")]
    until = time.monotonic() + seconds
    while folders:
        try:
            return int(Path(folders[0], DEVTOOLS_PORT_FILE).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            if time.monotonic() > until:
                return None
            time.sleep(0.01)
    return None
