"""The real MiniWoB++ task classes: one :class:`BrowserTask` subclass per task of
:data:`~harness_gym.envs.browser.catalog.INCLUDED`, named ``Browser<CamelCase>``
(``click-tab-2-easy`` -> ``BrowserClickTab2Easy``) and registered as
``harness_gym/Browser<Task>-<Preset>-v0`` by :func:`harness_gym.envs.browser.register`. Which
tasks are included, and why the others are left out, is in :mod:`harness_gym.envs.browser.catalog`.
"""

from __future__ import annotations

from harness_gym.envs.browser.catalog import EXCLUDED, INCLUDED, TWINS, task_id_for  # noqa: F401 (old path)
from harness_gym.envs.browser.oracles import ORACLES
from harness_gym.envs.browser.task import BrowserTask

#: Keys that legal_actions offers for ``press`` in the tasks that react to them.
LEGAL_KEYS: dict[str, tuple[str, ...]] = {
    "terminal": ("Enter",),
    "use-spinner": ("ArrowUp", "ArrowDown"),
    "scroll-text-2": ("PageUp", "PageDown"),
    **dict.fromkeys(
        ["use-slider", "use-slider-2", "form-sequence"],
        ("PageUp", "PageDown", "ArrowUp", "ArrowDown", "Home", "End"),
    ),
}


#: Tasks that read every key press (the terminal appends each keydown's key to its prompt; the
#: spinner cancels typed keys): ``type`` sends them a key press per character, not a paste.
KEY_TYPED: frozenset[str] = frozenset({"terminal", "use-spinner"})


def _make(subdomain: str, max_steps: int) -> type[BrowserTask]:
    name = task_id_for(subdomain)
    twin = TWINS.get(subdomain)
    description = f"Real MiniWoB++ task {subdomain!r} in headless Chromium"
    if twin:
        description += f" (the real counterpart of the web suite's {twin})"
    cls = type(
        name,
        (BrowserTask,),
        {
            "__module__": __name__,
            "__qualname__": name,
            "__doc__": description + ".",
            "task_id": name,
            "description": description + ".",
            "subdomain": subdomain,
            "max_steps": max_steps,
            "legal_keys": LEGAL_KEYS.get(subdomain, ()),
            "scripted_oracle": ORACLES.get(subdomain),
            "twin": twin,
            "typing": "keys" if subdomain in KEY_TYPED else "paste",
        },
    )
    globals()[name] = cls  # importable by name, so envs pickle (async vector envs)
    return cls


#: Every registered real task class, in :data:`INCLUDED` order.
BROWSER_TASKS: tuple[type[BrowserTask], ...] = tuple(_make(s, n) for s, n in INCLUDED.items())
#: Task ids of the real tasks that have a scripted oracle.
ORACLE_TASK_IDS: tuple[str, ...] = tuple(t.task_id for t in BROWSER_TASKS if t.scripted_oracle is not None)
