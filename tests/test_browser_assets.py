"""The in-process asset server: a connection the browser drops is debug noise, not a traceback."""

from __future__ import annotations

import logging
import socket
import struct
import time
import urllib.parse

import pytest

from harness_gym.envs.browser import assets


def _drop_mid_response(port: int, path: str) -> None:
    """Ask for a file and reset the connection at once (SO_LINGER 0 sends RST on close)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    sock.close()


@pytest.mark.parametrize("error", [BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")])
def test_a_dropped_connection_is_logged_at_debug_level(
    error: Exception, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    server = assets._AssetServer(("127.0.0.1", 0), assets._AssetHandler)
    try:
        with caplog.at_level(logging.DEBUG, logger=assets.__name__):
            try:
                raise error
            except OSError:
                server.handle_error(None, ("127.0.0.1", 1))
    finally:
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert "dropped the connection" in caplog.records[0].getMessage()


def test_other_handler_errors_still_print_their_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    server = assets._AssetServer(("127.0.0.1", 0), assets._AssetHandler)
    try:
        try:
            raise KeyError("a real bug")
        except KeyError:
            server.handle_error(None, ("127.0.0.1", 1))
    finally:
        server.server_close()
    assert "KeyError: 'a real bug'" in capfd.readouterr().err


def test_many_dropped_requests_print_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    try:
        base = urllib.parse.urlsplit(assets.server_url())
        assets._asset("/core/core.js")
    except assets.MissingAssetsError:
        pytest.skip("the miniwob package is not installed")
    for _ in range(200):
        _drop_mid_response(base.port, "/core/core.js")
    time.sleep(0.5)  # let the handler threads finish writing into the dead sockets
    assert "Traceback" not in capfd.readouterr().err
