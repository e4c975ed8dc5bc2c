"""Training and sweep logs: scalars to TensorBoard event files or a Weights & Biases run.

One :class:`RunLog` per run (SB3 training, the text policy's GRPO, GRPO-LM training, a sweep
or a search): ``log({"tag": value, ...}, step)`` then ``close()``. Two backends, each from the
``logs`` extra and imported only when chosen:

* ``tensorboard``: event files in the log folder, each value a plain scalar (``simple_value``,
  what SB3 writes through its ``tensorboard_log`` option and what TensorBoard's
  ``EventAccumulator.Scalars`` reads; ``tensorboard.summary.Writer`` would write tensors);
* ``wandb``: a run under ``<folder>/wandb/``, offline unless ``WANDB_MODE`` says otherwise (an
  offline run is uploaded later with ``wandb sync``).

Sweeps and searches log their progress (cells done, success rate so far, errors) through the
run log made current with :func:`active`; :func:`log_progress` is the one call the row writer
makes. :func:`read_scalars` reads either backend's files back (tests and notebooks use it).

Every tag is ``<prefix>/<key>``, the prefix naming the kind of run (:data:`TAG_PREFIXES`), the
way SB3 logs ``rollout/ep_rew_mean``: runs of several kinds can share one ``--log-dir``.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

#: The ``--log`` choices.
LOG_BACKENDS = ("tensorboard", "wandb")
WANDB_PROJECT = "harness-gym"
WANDB_CLOSE_SECONDS = 60.0  # the longest close() waits for wandb to finish writing the run file


#: The tag prefix of each kind of run: a run of kind ``k`` logs key ``x`` as ``TAG_PREFIXES[k]/x``.
#: SB3's own keys already name their section (``rollout/``, ``train/``, ``time/``): no prefix.
TAG_PREFIXES = {
    "sb3": "",
    "text_policy": "text_policy",
    "grpo_lm": "grpo_lm",
    "sft_lm": "sft_lm",
    "sweep": "sweep",
    "search": "search",
}


class LogError(ValueError):
    """A log backend that is unknown or not installed."""


def _scalars(values: Mapping[str, Any]) -> dict[str, float]:
    """The numeric entries (bools as 0/1); others (strings, lists) are not scalars and are left out."""
    return {k: float(v) for k, v in values.items() if isinstance(v, int | float)}


def tag_name(kind: str, key: str) -> str:
    """The tag a run of ``kind`` (a key of :data:`TAG_PREFIXES`) logs ``key`` under."""
    if kind not in TAG_PREFIXES:
        raise LogError(f"unknown kind of run {kind!r}; one of {', '.join(TAG_PREFIXES)}")
    prefix = TAG_PREFIXES[kind]
    return f"{prefix}/{key}" if prefix else key


class RunLog:
    """Where one run's scalars go; ``folder`` is what :func:`read_scalars` reads back; each
    key is logged under :func:`tag_name` of the run's ``kind``."""

    backend = ""

    def __init__(self, folder: Path, kind: str) -> None:
        tag_name(kind, "")  # an unknown kind fails here, before anything is written
        self.folder = folder
        self.kind = kind

    def log(self, values: Mapping[str, Any], step: int) -> None:
        """Log the numeric entries of ``values`` (others are left out) at ``step``."""
        self._write({tag_name(self.kind, k): v for k, v in _scalars(values).items()}, int(step))

    def _write(self, scalars: Mapping[str, float], step: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class TensorBoardLog(RunLog):
    """Scalars as TensorBoard events in ``folder``: one event per :meth:`log`, each value a
    ``simple_value`` (as SB3's writer and ``torch.utils.tensorboard`` write scalars)."""

    backend = "tensorboard"

    def __init__(self, folder: Path, kind: str) -> None:
        super().__init__(folder, kind)
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        folder.mkdir(parents=True, exist_ok=True)
        self.writer = EventFileWriter(str(folder))

    def _write(self, scalars: Mapping[str, float], step: int) -> None:
        from tensorboard.compat.proto import event_pb2

        event = event_pb2.Event(wall_time=time.time(), step=step)
        for tag, value in scalars.items():
            event.summary.value.add(tag=tag, simple_value=value)
        self.writer.add_event(event)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbLog(RunLog):
    """Scalars as a W&B run under ``folder/wandb`` (offline unless ``WANDB_MODE`` is set)."""

    backend = "wandb"

    def __init__(self, folder: Path, kind: str, name: str, config: Mapping[str, Any] | None = None) -> None:
        tag_name(kind, "")
        import wandb

        folder.mkdir(parents=True, exist_ok=True)
        settings = wandb.Settings(silent=True, console="off", x_disable_stats=True, disable_git=True)
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", WANDB_PROJECT),
            name=name,
            dir=str(folder),
            config=json.loads(json.dumps(dict(config or {}), default=str)),
            mode=os.environ.get("WANDB_MODE", "offline"),  # type: ignore[arg-type]
            reinit="create_new",
            settings=settings,
        )
        super().__init__(Path(self.run.dir).parent, kind)

    def _write(self, scalars: Mapping[str, float], step: int) -> None:
        self.run.log(dict(scalars), step=step)

    def close(self) -> None:
        self.run.finish()
        # wandb-core writes the run file after finish() returns: wait for its closing record,
        # so what :func:`read_scalars` reads next is the whole run.
        deadline = time.monotonic() + WANDB_CLOSE_SECONDS
        files = list(self.folder.glob("*.wandb"))
        while files and time.monotonic() < deadline:
            if any(m.WhichOneof("record_type") == "exit" for m in _wandb_records(files[0])):
                return
            time.sleep(0.05)


def open_log(
    backend: str, folder: str | Path, kind: str, name: str, config: Mapping[str, Any] | None = None
) -> RunLog:
    """A run log of ``backend`` (one of :data:`LOG_BACKENDS`) writing under ``folder`` the
    scalars of a run of ``kind`` (a key of :data:`TAG_PREFIXES`); ``name`` names a W&B run."""
    if backend not in LOG_BACKENDS:
        raise LogError(f"--log must be one of {', '.join(LOG_BACKENDS)}, got {backend!r}")
    try:
        if backend == "tensorboard":
            return TensorBoardLog(Path(folder), kind)
        return WandbLog(Path(folder), kind, name, config)
    except ImportError as err:
        raise LogError(f"--log {backend} needs {backend}: pip install 'harness-gym[logs]' ({err})") from None


def check_backend(backend: str | None) -> None:
    """Raise :class:`LogError` now (before long work) if ``backend`` is unknown or missing."""
    if backend is None:
        return
    if backend not in LOG_BACKENDS:
        raise LogError(f"--log must be one of {', '.join(LOG_BACKENDS)}, got {backend!r}")
    import importlib.util

    if importlib.util.find_spec(backend) is None:
        raise LogError(f"--log {backend} needs {backend}: pip install 'harness-gym[logs]'")


@contextlib.contextmanager
def maybe_log(
    backend: str | None, folder: str | Path, kind: str, name: str, config: Mapping[str, Any] | None = None
) -> Iterator[RunLog | None]:
    """``open_log(...)`` for the ``with`` block, closed after it; ``None`` when ``backend`` is None."""
    if backend is None:
        yield None
        return
    run_log = open_log(backend, folder, kind, name, config)
    try:
        yield run_log
    finally:
        run_log.close()


def check_log_dir(args: Any) -> None:
    """Refuse ``--log-dir`` without ``--log``: nothing would be logged there (a :class:`LogError`)."""
    if getattr(args, "log_dir", None) is not None and getattr(args, "log", None) is None:
        raise LogError(f"--log-dir {args.log_dir} would be ignored: nothing is logged without --log")


def cli_log(args: Any, kind: str, name: str, config: Mapping[str, Any] | None = None) -> Any:
    """:func:`maybe_log` for a command's ``--log`` / ``--log-dir`` (default ``<--out>/logs``)."""
    check_log_dir(args)
    folder = args.log_dir or Path(args.out) / "logs"
    return maybe_log(getattr(args, "log", None), folder, kind, name, config)


# -- sweep and search progress ---------------------------------------------------------------


class _Progress:
    """What the active run log has been told: rows counted per row list, and running sums."""

    def __init__(self, run_log: RunLog) -> None:
        self.run_log = run_log
        self.cells = self.errors = self.successes = 0
        self.returns = 0.0


_ACTIVE: contextvars.ContextVar[_Progress | None] = contextvars.ContextVar("run_log", default=None)


@contextlib.contextmanager
def active(run_log: RunLog | None) -> Iterator[RunLog | None]:
    """Make ``run_log`` the one :func:`log_progress` writes to, for the ``with`` block."""
    token = _ACTIVE.set(_Progress(run_log) if run_log is not None else None)
    try:
        yield run_log
    finally:
        _ACTIVE.reset(token)


def log_progress(new_rows: Sequence[Mapping[str, Any]], done: int, total: int) -> None:
    """Log progress to the active run log, if any: ``new_rows`` are the rows a row writer has
    just written, ``done`` of its ``total`` cells. A search writes each rung with a new writer;
    the counts run on across them (the step is the number of cells done in the whole run)."""
    state = _ACTIVE.get()
    if state is None or not new_rows:
        return
    for row in new_rows:
        state.cells += 1
        if row.get("error") is not None:
            state.errors += 1
            continue
        state.successes += bool(row.get("success"))
        state.returns += float(row.get("episode_return") or 0.0)
    ok = state.cells - state.errors
    values = {
        "cells_done": state.cells,
        "fraction_done": done / total if total else 1.0,
        "errors": state.errors,
    }
    if ok:
        values["success_rate"] = state.successes / ok
        values["mean_return"] = state.returns / ok
    state.run_log.log(values, step=state.cells)


# -- reading logs back -----------------------------------------------------------------------


def read_scalars(folder: str | Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar under ``folder`` (TensorBoard event files and W&B ``.wandb`` run files):
    tag -> [(step, value), ...] in the order written."""
    folder = Path(folder)
    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(folder.rglob("events.out.tfevents.*")):
        for tag, point in _tensorboard_points(path):
            out.setdefault(tag, []).append(point)
    for path in sorted(folder.rglob("*.wandb")):
        for tag, point in _wandb_points(path):
            out.setdefault(tag, []).append(point)
    return out


def _tensorboard_points(path: Path) -> Iterator[tuple[str, tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    for event in EventFileLoader(str(path)).Load():
        for value in event.summary.value:
            if value.HasField("simple_value"):
                number = float(value.simple_value)
            elif value.HasField("tensor"):
                number = float(tensor_util.make_ndarray(value.tensor).item())
            else:
                continue
            yield value.tag, (int(event.step), number)


_WANDB_BLOCK, _WANDB_HEADER = 32768, 7  # LevelDB-log blocks after a 7-byte ":W&B" file header


def _wandb_points(path: Path) -> Iterator[tuple[str, tuple[int, float]]]:
    """The scalars of a ``.wandb`` run file's history records."""
    for message in _wandb_records(path):
        if message.WhichOneof("record_type") != "history":
            continue
        items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in message.history.item}
        step = int(items.get("_step", 0))
        for tag, value in items.items():
            if not tag.startswith("_") and isinstance(value, int | float):
                yield tag, (step, float(value))


def _wandb_records(path: Path) -> Iterator[Any]:
    """The records of a ``.wandb`` run file (wandb's transaction log: LevelDB log records of
    ``wandb_internal_pb2.Record``; wandb 0.31 ships no Python reader for it). A record cut
    short at the end (a file still being written) is left out."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise LogError(f"{path} is not a W&B run file")
    pos, record = _WANDB_HEADER, b""
    while pos + _WANDB_HEADER <= len(data):
        left = _WANDB_BLOCK - pos % _WANDB_BLOCK
        if left < _WANDB_HEADER:  # a block's tail too short for a record header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + _WANDB_HEADER])
        body = data[pos + _WANDB_HEADER : pos + _WANDB_HEADER + length]
        pos += _WANDB_HEADER + length
        if kind == 0 or len(body) < length:
            break
        record = body if kind in (1, 2) else record + body  # full / first, then middle / last
        if kind not in (1, 4):
            continue
        message = wandb_internal_pb2.Record()
        message.ParseFromString(record)
        yield message


def add_log_arguments(parser: Any, default_folder: str) -> None:
    """The ``--log`` and ``--log-dir`` options of a command (``default_folder`` says the default)."""
    parser.add_argument(
        "--log",
        choices=LOG_BACKENDS,
        default=None,
        help="log scalars to TensorBoard event files or a W&B run (offline unless WANDB_MODE is set)",
    )
    parser.add_argument("--log-dir", default=None, help=f"where the logs go (default: {default_folder})")


def sb3_logger(run_log: RunLog) -> Any:
    """An SB3 ``Logger`` whose every dump goes to ``run_log`` (for backends SB3 lacks: wandb)."""
    from stable_baselines3.common.logger import KVWriter, Logger

    class _Output(KVWriter):
        def write(self, key_values: dict[str, Any], key_excluded: dict[str, Any], step: int = 0) -> None:
            run_log.log(key_values, step)

        def close(self) -> None:
            pass

    return Logger(folder=str(run_log.folder), output_formats=[_Output()])
