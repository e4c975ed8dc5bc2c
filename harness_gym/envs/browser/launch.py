"""Launching Chromium: which binary, what the machine must have, and the arguments it starts with.

The system Chromium (``/usr/bin/chromium``, or ``$HARNESS_GYM_CHROMIUM``) is driven through
Playwright, which never downloads a browser; what is missing fails early with the install
command (:func:`check_requirements`, :class:`~harness_gym.envs.browser.errors.BrowserUnavailableError`).
:func:`launch_args` is :data:`LAUNCH_ARGS`, plus the DevTools port in ``port`` mode (see
:mod:`~harness_gym.envs.browser.devtools`).
"""

from __future__ import annotations

import importlib.util
import os
import shutil

from harness_gym.envs.browser.devtools import PORT_ARG, devtools_mode
from harness_gym.envs.browser.errors import BrowserUnavailableError

#: Environment variable naming the Chromium binary to use.
CHROMIUM_ENV = "HARNESS_GYM_CHROMIUM"
INSTALL_CHROMIUM = "apt-get update && apt-get install -y chromium"
INSTALL_EXTRA = "pip install 'harness-gym[browser]'"
LAUNCH_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--disable-smooth-scrolling",  # a key that scrolls has scrolled when the call returns
    # A new document per episode is the hot path: keep it light (RenderDocument swaps in a new
    # frame object per navigation; the back-forward cache keeps the old document alive).
    # Chromium reads only the last --disable-features, so Playwright's own list is repeated.
    "--disable-features=RenderDocument,BackForwardCache,PaintHolding,HttpsUpgrades,"
    "HttpsFirstBalancedModeAutoEnable,MediaRouter,OptimizationHints,LensOverlay,ThirdPartyStoragePartitioning,"
    "DestroyProfileOnBrowserClose,AvoidUnnecessaryBeforeUnloadCheckSync,AvoidCorsURLLoaderRestartOnRedirect,"
    "NetworkTimeServiceQuerying,PreconnectToSearch,AimEnabled",
)


def launch_args(mode: str | None = None) -> list[str]:
    """Chromium's arguments: :data:`LAUNCH_ARGS`, and :data:`PORT_ARG` in ``port`` mode (see
    :func:`devtools_mode`)."""
    return [*LAUNCH_ARGS, PORT_ARG] if devtools_mode(mode) == "port" else list(LAUNCH_ARGS)


def find_chromium() -> str:
    """The Chromium binary to drive: ``$HARNESS_GYM_CHROMIUM``, else the system ``chromium``."""
    override = os.environ.get(CHROMIUM_ENV)
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise BrowserUnavailableError(
            f"{CHROMIUM_ENV}={override!r} is not an executable file. Unset it to use the system "
            f"Chromium, installed with: {INSTALL_CHROMIUM}"
        )
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise BrowserUnavailableError(
        "the browser tasks need Chromium, and none was found (looked for /usr/bin/chromium, "
        f"`chromium` and `chromium-browser` on PATH, and ${CHROMIUM_ENV}). Install Debian's "
        f"Chromium with: {INSTALL_CHROMIUM}"
    )


def require_playwright() -> None:
    """Fail with the install command when the Python ``playwright`` package is missing."""
    if importlib.util.find_spec("playwright") is None:
        raise BrowserUnavailableError(
            "the browser tasks need the Python `playwright` package. Install it with: "
            f"{INSTALL_EXTRA} (never `playwright install`: the system Chromium is used, installed "
            f"with: {INSTALL_CHROMIUM})"
        )


def check_requirements() -> str:
    """Check Playwright and Chromium without starting anything; return the Chromium path."""
    require_playwright()
    return find_chromium()
