"""Where the real MiniWoB++ tasks live: the HTML shipped in the ``miniwob`` PyPI package.

The package is located without importing it (importing ``miniwob`` registers Farama's
Selenium environments and pulls in Selenium), and pages are loaded straight from disk through
``file://`` URLs, so no server and no network are involved.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg")
_SPECIAL = re.compile(r"common/special/([A-Za-z0-9_-]+)")

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
    """The ``file://`` URL of one MiniWoB++ task."""
    return task_path(subdomain).as_uri()


def available_subdomains() -> list[str]:
    """Every task that the installed ``miniwob`` package ships (flight tasks excluded)."""
    return sorted(p.stem for p in (html_root() / "miniwob").glob("*.html"))


@functools.cache
def image_urls(subdomain: str) -> tuple[str, ...]:
    """The images a task may show: every image in the ``common/special`` folders it uses.

    A page loads images asynchronously, so an element sized by its image (MiniWoB's icons
    are CSS ``content: url(...)``) would be laid out differently depending on how fast the
    file arrived. The session decodes these images into the page's cache before the episode
    starts, so the layout, and with it the observation, never depends on timing.
    """
    text = task_path(subdomain).read_text(encoding="utf-8", errors="replace")
    urls = []
    for name in sorted(set(_SPECIAL.findall(text))):
        folder = html_root() / "common" / "special" / name
        if folder.is_dir():
            urls.extend(p.as_uri() for p in sorted(folder.rglob("*")) if p.suffix.lower() in IMAGE_SUFFIXES)
    return tuple(urls)
