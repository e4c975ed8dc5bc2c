"""The browser's errors: missing software, and a browser that died or did not answer in time.

Their own module because every part of the browser session raises them (finding Chromium,
the DevTools connection, the session's deadlines), and the env reports a failure by its
``error_kind``: no part needs another just to name a failure.
"""

from __future__ import annotations


class BrowserUnavailableError(RuntimeError):
    """Chromium or Playwright is not installed; the message names the install command."""


class BrowserCrashedError(RuntimeError):
    """The browser died (or a page of it crashed) during a call; ``error_kind`` names it."""

    error_kind = "browser_crashed"


class BrowserTimeoutError(BrowserCrashedError):
    """The browser did not answer a call within its deadline, and was killed."""

    error_kind = "browser_timeout"
