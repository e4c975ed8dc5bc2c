"""Progress bars for long work: tqdm on stderr when it is installed, nothing otherwise.

Every long loop in the package (evaluation, checks, sweeps, training) shows its bar through
these two functions, so bars look alike and a missing tqdm never breaks a run.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def progress_bar(total: int, desc: str, unit: str = "ep", enabled: bool = True, **kwargs: Any) -> Any:
    """A tqdm bar to ``update()`` by hand, or ``None`` when disabled or tqdm is missing."""
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with the cli, rl and test extras
        return None
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, **kwargs)


def progress(
    items: Iterable[T], total: int, desc: str, unit: str = "ep", enabled: bool = True
) -> Iterator[T]:
    """Iterate ``items`` with a bar (see :func:`progress_bar`)."""
    bar = progress_bar(total, desc, unit, enabled)
    if bar is None:
        yield from items
        return
    try:
        for item in items:
            yield item
            bar.update(1)
    finally:
        bar.close()
