"""Progress for long work on stderr: a tqdm bar on a terminal, plain lines in a log.

Every long loop in the package (evaluation, checks, sweeps, training) shows its progress
through these functions, so it looks alike everywhere and a missing tqdm never breaks a run.
On a terminal it is a tqdm bar redrawn in place; when stderr is not a terminal (a log file,
a pipe, a batch job's output) carriage-return redraws would pile up in the file (hundreds per
run), so it is :class:`LineProgress`: one line at most every :func:`progress_interval`
seconds, and the final count when the work ends.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any, TypeVar

T = TypeVar("T")

#: Seconds between two progress lines when stderr is not a terminal.
PROGRESS_INTERVAL = 10.0
#: The environment variable that overrides :data:`PROGRESS_INTERVAL` (seconds, ``0``: every update).
PROGRESS_INTERVAL_ENV = "HARNESS_GYM_PROGRESS_INTERVAL"

_LINE_FORMAT = "{desc}: {percentage:3.0f}% {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
_LINE_FORMAT_NO_TOTAL = "{desc}: {n_fmt} [{elapsed}, {rate_fmt}{postfix}]"


def progress_interval() -> float:
    """Seconds between progress lines: ``$HARNESS_GYM_PROGRESS_INTERVAL`` or :data:`PROGRESS_INTERVAL`."""
    raw = os.environ.get(PROGRESS_INTERVAL_ENV, "").strip()
    if not raw:
        return PROGRESS_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{PROGRESS_INTERVAL_ENV} must be a number of seconds >= 0, got {raw!r}")
    return value


def is_terminal(stream: Any = None) -> bool:
    """Whether ``stream`` (default: stderr) is a terminal, where a bar can redraw in place."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


class LineProgress:
    """Progress as plain lines, for a log: after an :meth:`update`, a line if ``interval``
    seconds have passed since the last one, and at :meth:`close` the final count if no line
    showed it yet. So ``M`` updates write at most ``M`` lines, and at least one when ``M >= 1``.
    The part of tqdm's interface the package uses (``update``, ``set_postfix``,
    ``set_postfix_str``, ``write``, ``close``)."""

    def __init__(self, total: int, desc: str, unit: str, interval: float, file: IO[str]) -> None:
        self.total, self.desc, self.unit, self.interval, self.file = total, desc, unit, interval, file
        self.n = 0
        self.postfix = ""
        self.start = self.last = time.monotonic()
        self.shown = 0  # the count the last line showed
        self.closed = False

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if self.n != self.shown and now - self.last >= self.interval:
            self._line(now)

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> None:
        items = {**dict(ordered_dict or {}), **kwargs}
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = str(s)

    def write(self, s: str, file: IO[str] | None = None, end: str = "\n") -> None:
        """Write ``s`` as its own line (tqdm's ``write``: nothing to clear here)."""
        out = file or self.file
        out.write(s + end)
        out.flush()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.n != self.shown:
            self._line(time.monotonic())

    def _line(self, now: float) -> None:
        from tqdm import tqdm

        known = self.total > 0
        text = tqdm.format_meter(
            self.n,
            self.total if known else None,
            now - self.start,
            prefix=self.desc,
            unit=self.unit,
            postfix=self.postfix or None,
            bar_format=_LINE_FORMAT if known else _LINE_FORMAT_NO_TOTAL,
        )
        self.write(text)
        self.last, self.shown = now, self.n


def progress_bar(total: int, desc: str, unit: str = "ep", enabled: bool = True, **kwargs: Any) -> Any:
    """A tqdm bar to ``update()`` by hand (``kwargs`` go to tqdm) on a terminal, a
    :class:`LineProgress` when stderr is not one, or ``None`` when disabled or tqdm is missing."""
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with the cli, rl and test extras
        return None
    if not is_terminal(sys.stderr):
        return LineProgress(total, desc, unit, progress_interval(), sys.stderr)
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, **kwargs)


def trainer_progress(desc: str, enabled: bool = True) -> tuple[bool, list[Any]]:
    """``(disable_tqdm, callbacks)`` for a transformers trainer: on a terminal, its own tqdm
    bars; elsewhere those are off (their redraws would fill the log) and the callback shows the
    optimizer steps through :func:`progress_bar` (lines). Off too, for the rest of the process,
    are transformers' other bars (loading and writing weights). ``enabled=False``: no progress
    at all from the trainer."""
    if not enabled:
        return True, []
    if is_terminal(sys.stderr):
        return False, []
    from transformers import TrainerCallback
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

    class _Steps(TrainerCallback):
        bar: Any = None

        def on_train_begin(self, _args: Any, state: Any, *_: Any, **__: Any) -> None:
            self.bar = progress_bar(state.max_steps, desc, unit="step")

        def on_step_end(self, _args: Any, state: Any, *_: Any, **__: Any) -> None:
            if self.bar is not None:
                self.bar.update(state.global_step - self.bar.n)

        def on_train_end(self, *_: Any, **__: Any) -> None:
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    return True, [_Steps()]


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
