"""What every verb of ``harness-gym`` shares: argument types, env ids, output paths, tables, and
the one place where errors become ``harness-gym: error: <one line>`` on stderr.

Exit codes: 0 success; 1 ``check`` found harnesses that break the contract; 2 an error of the
user's (bad arguments, unknown ids, unreadable or invalid files, unwritable output); 3 an
unexpected error (a bug: rerun with ``--debug`` for the traceback); 130 interrupted.
Tracebacks are printed only with ``harness-gym --debug``.

Nothing outside ``harness_gym.cli`` imports this module: the verbs call into ``analysis``,
``baselines``, ``core`` and ``llm``, never the other way round.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

PROG = "harness-gym"
EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_ERROR = 2
EXIT_UNEXPECTED = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class CommandError(Exception):
    """A mistake of the user's found while a verb runs; its message is the line printed."""


class UsageError(CommandError):
    """A command line argparse rejects (printed as one line, even with ``--debug``)."""


class CLIExit(SystemExit):
    """Raised once the error line went to stderr: ``code`` is the exit code, ``str()`` the line."""

    def __init__(self, line: str, code: int = EXIT_ERROR) -> None:
        super().__init__(code)
        self.line = line

    def __str__(self) -> str:
        return self.line


def user_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean "the input was wrong", not "the code is wrong"."""
    import gymnasium

    from harness_gym.analysis.agent_spec import AgentSpecError
    from harness_gym.analysis.sweep.spec import SweepError
    from harness_gym.core.harness import HarnessSpecError  # CoverageError is one
    from harness_gym.core.plugins import PluginError
    from harness_gym.llm.embedded import EmbeddedModelError
    from harness_gym.llm.spec import LLMSpecError
    from harness_gym.logging_backends import LogError

    kinds: list[type[BaseException]] = [
        CommandError,
        HarnessSpecError,
        AgentSpecError,
        LLMSpecError,
        SweepError,
        EmbeddedModelError,
        PluginError,
        LogError,
        OSError,
        UnicodeError,
        json.JSONDecodeError,
        gymnasium.error.Error,
    ]
    try:
        import yaml

        kinds.append(yaml.YAMLError)
    except ImportError:  # pragma: no cover - yaml is a dependency
        pass
    return tuple(kinds)


def one_line(err: BaseException) -> str:
    """The error's message on one line (OS errors as ``PATH: reason``)."""
    if isinstance(err, OSError) and err.strerror and err.filename is not None:
        text = f"{err.filename}: {err.strerror}"
        if err.filename2 is not None:
            text += f" (and {err.filename2})"
    else:
        text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    return " ".join(text.split()) or type(err).__name__


def fail(message: str, code: int = EXIT_ERROR, err: TextIO | None = None) -> CLIExit:
    """Print ``harness-gym: error: MESSAGE`` (one line) and return the exit to raise."""
    line = f"{PROG}: error: {' '.join(message.split())}"
    stream = err or sys.stderr
    stream.write(line + "\n")
    stream.flush()
    return CLIExit(line, code)


def run_guarded(command: Callable[[], int], debug: bool | Callable[[], bool] = False) -> int:
    """Run one verb; turn the package's errors into one line on stderr and exit code 2.

    This is the one place the CLI handles errors. With ``debug`` (a flag, or a function asked
    when an error happens) the original exception propagates (a traceback); bad command lines
    are one line either way."""
    if callable(debug):
        is_debug = debug
    else:

        def is_debug() -> bool:
            return bool(debug)

    try:
        return _guarded(command, is_debug)
    except BaseException:
        _remove_empty_created_dirs()  # a command that failed leaves no empty --out behind
        raise
    finally:
        _created_dirs.clear()


#: Output folders :func:`output_dir` created during the running command (deepest last).
_created_dirs: list[Path] = []


def note_new_folders(path: str | Path) -> None:
    """Remember the folders among ``path`` and its parents that do not exist yet, so a command
    that fails after making them removes those still empty (every folder a command makes before
    its work starts goes through here: ``--out``, a file's parents, a run folder for trajectories)."""
    absolute = Path(path).absolute()
    missing = [p for p in (absolute, *absolute.parents) if not p.exists() and not p.is_symlink()]
    _created_dirs.extend(m for m in reversed(missing) if m not in _created_dirs)


def _remove_empty_created_dirs() -> None:
    """Remove the folders this command created that are still empty (``rmdir`` leaves any
    folder that holds something: a refused command leaves nothing, a failed run keeps its work)."""
    for folder in reversed(_created_dirs):
        try:
            folder.rmdir()
        except OSError:
            pass


def _guarded(command: Callable[[], int], is_debug: Callable[[], bool]) -> int:
    try:
        return command()
    except CLIExit:
        raise
    except BrokenPipeError as exc:
        if exc.filename is not None or is_debug():
            raise
        _quiet_stdout()  # the reader (`| head`) left: stop quietly, as Unix tools do
        raise CLIExit("", EXIT_BROKEN_PIPE) from None
    except UsageError as exc:
        raise fail(one_line(exc)) from None
    except KeyboardInterrupt:
        if is_debug():
            raise
        raise fail("interrupted", EXIT_INTERRUPTED) from None
    except Exception as exc:
        if is_debug():
            raise
        if isinstance(exc, user_errors()):
            raise fail(one_line(exc)) from None
        raise fail(
            f"unexpected {type(exc).__name__}: {one_line(exc)} "
            f"(rerun with `{PROG} --debug ...` for the traceback)",
            EXIT_UNEXPECTED,
        ) from None


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real stdout (tests capture it)
        pass


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line through :func:`run_guarded`."""

    def error(self, message: str) -> Any:  # argparse's signature returns NoReturn
        verb = self.prog.removeprefix(PROG).strip()
        where = f"{verb}: " if verb else ""
        raise UsageError(f"{where}{message} (see `{self.prog} --help`)")


# -- argument types -----------------------------------------------------------------------------


def int_at_least(low: int, what: str = "") -> Callable[[str], int]:
    """An argparse ``type=``: an integer ``>= low`` (the error names the bound)."""

    def parse(text: str) -> int:
        # ASCII digits only: int() also reads "1_0" as 10 and non-ASCII digits such as "٢".
        if not re.fullmatch(r"[+-]?[0-9]+", text.strip(), re.ASCII):
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}{what}, got {value}")
        return value

    parse.__name__ = f"int>={low}"
    return parse


def tcp_port(low: int) -> Callable[[str], int]:
    """An argparse ``type=``: a TCP port from ``low`` (0: any free one) to 65535."""
    at_least = int_at_least(low, " (a TCP port)")

    def parse(text: str) -> int:
        value = at_least(text)
        if value > 65535:
            raise argparse.ArgumentTypeError(f"must be <= 65535 (a TCP port), got {value}")
        return value

    parse.__name__ = "port"
    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)
seed_int = int_at_least(0, " (seeds are non-negative)")


def finite_float(low: float, inclusive: bool) -> Callable[[str], float]:
    """An argparse ``type=``: a finite number ``>= low`` (or ``> low``); nan and inf are refused."""
    rule = f">= {low:g}" if inclusive else f"> {low:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number {rule}, got {text!r}")
        if value < low or (value == low and not inclusive):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
        return value

    parse.__name__ = f"number{rule.replace(' ', '')}"
    return parse


positive_float = finite_float(0.0, inclusive=False)
non_negative_float = finite_float(0.0, inclusive=True)


# -- options a run would ignore -----------------------------------------------------------------


def remember_defaults(parser: argparse.ArgumentParser) -> None:
    """Record the parser's option defaults in the namespace, for :func:`refuse_ignored`."""
    parser.set_defaults(option_defaults={a.dest: a.default for a in parser._actions if a.option_strings})


def flag_of(dest: str) -> str:
    """The command-line flag of an option's ``dest`` (``node_limit`` -> ``--node-limit``)."""
    return "--" + dest.replace("_", "-")


def refuse_ignored(args: argparse.Namespace, dests: Sequence[str], why: str) -> None:
    """Refuse, with one line and before any work, each option of ``dests`` set to a value other
    than its default: ``why`` says what the run is that would ignore it (an option that is
    accepted and then not read is a silent lie about what ran)."""
    defaults = getattr(args, "option_defaults", {})
    given = [d for d in dests if getattr(args, d, None) != defaults.get(d)]
    if given:
        flags = ", ".join(flag_of(d) for d in given)
        raise CommandError(f"{flags} would be ignored: {why}; drop {'it' if len(given) == 1 else 'them'}")


# -- plugins ------------------------------------------------------------------------------------

#: ``--import MODULE``, accepted by every verb (see :mod:`harness_gym.core.plugins`).
IMPORT_OPTION: dict[str, Any] = {
    "action": "append",
    "dest": "imports",
    "metavar": "MODULE",
    "help": "import MODULE first (repeatable): tasks, formats, tool styles or agents it registers "
    "become available, also in worker processes",
}


def load_plugins(imports: Sequence[str], err: TextIO | None = None) -> None:
    """Import ``--import`` modules, then load installed plugins; a plugin that fails to load is
    one ``harness-gym: warning:`` line on stderr and the others still load."""
    from harness_gym.core import plugins

    plugins.import_modules(imports)
    stream = err or sys.stderr
    for failure in plugins.load_plugins(warn=False):
        stream.write(f"{PROG}: warning: {failure}\n")
    stream.flush()


# -- env ids, harnesses, files ------------------------------------------------------------------


def resolve_env_ids(patterns: Sequence[str]) -> list[str]:
    """Expand ``all`` and glob patterns over registered ids; exact ids pass through.

    Gymnasium's ``MODULE:ID`` form imports ``MODULE`` first (which registers its envs); a glob
    may follow the module (``my_pkg:harness_gym/Count*``).
    """
    from harness_gym.core.plugins import import_env_module
    from harness_gym.core.registry import FAMILY_ENV_IDS, registered_env_ids

    out: list[str] = []
    for pattern in patterns:
        if ":" in pattern and any(ch in pattern for ch in "*?["):
            pattern = import_env_module(pattern)
        known = registered_env_ids()
        if pattern == "all":
            matches = known
        elif any(ch in pattern for ch in "*?["):
            matches = [i for i in known if fnmatch.fnmatchcase(i, pattern)]
            if not matches:  # a glob only over families kept out of 'all' (e.g. 'harness_gym/Term*')
                matches = [i for i in FAMILY_ENV_IDS if fnmatch.fnmatchcase(i, pattern)]
        else:
            matches = [require_env_id(pattern)]
        if not matches:
            raise CommandError(f"no registered env matches {pattern!r}; run `{PROG} list envs` for the ids")
        out.extend(m for m in matches if m not in out)
    return out


def require_env_id(env_id: str) -> str:
    """``env_id`` if it is registered, else a :class:`CommandError` naming where the ids are.

    ``MODULE:ID`` (Gymnasium's form) imports ``MODULE`` first and is returned as given, so
    ``gym.make`` imports it again wherever the env is built (worker processes too).
    """
    import gymnasium as gym

    from harness_gym.core.plugins import failures_note, import_env_module

    if import_env_module(env_id) not in gym.registry:
        raise CommandError(
            f"unknown env id {env_id!r}. Run `{PROG} list envs` for the ids; "
            f"globs such as 'harness_gym/ClickButton-*' work too{failures_note()}"
        )
    return env_id


def make_env(env_id: str, harness: str | None = None) -> Any:
    """``gym.make(env_id)``, with its harness replaced when ``harness`` is given."""
    import gymnasium as gym

    if harness is not None:
        check_family_options(env_id, harness)
    return gym.make(env_id) if harness is None else gym.make(env_id, harness=harness)


def check_family_options(env_id: str, harness: Any, flag: str = "--harness") -> None:
    """Refuse a harness whose ``family_options`` name a family the env's task is not in (a
    web task never reads terminal options, so they would be ignored without a word)."""
    import gymnasium as gym

    from harness_gym.core.presets import resolve_harness
    from harness_gym.core.registry import family_of

    task = gym.spec(env_id).kwargs.get("task")
    own = family_of(task) if isinstance(task, str) else None
    families = [family for family, _ in resolve_harness(harness, family=own).family_options]
    if not families or not isinstance(task, str):
        return
    foreign = [f for f in families if f != own]
    if foreign:
        families = foreign
        raise CommandError(
            f"{flag} sets family_options for {', '.join(families)}, but {env_id} is not a task of "
            f"that family, so they would be ignored; drop them or choose a {families[0]} env"
        )


def json_object(text: str, flag: str) -> dict[str, Any]:
    """Parse a JSON-object option such as ``--hyperparams``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise CommandError(f"{flag} must be a JSON object: {err}") from None
    if not isinstance(value, dict):
        raise CommandError(f"{flag} must be a JSON object, got {type(value).__name__}")
    return value


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """A user file holding one JSON object; every way it can be wrong is a :class:`CommandError`."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        reason = f"not UTF-8 text ({err.reason} at byte {err.start})"
        raise CommandError(f"{what} {path} is corrupt: {reason}") from None
    except json.JSONDecodeError as err:
        raise CommandError(f"{what} {path} is corrupt: not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise CommandError(f"{what} {path} is corrupt: a JSON {type(value).__name__}, not an object")
    return value


def _existing_ancestor(path: Path) -> Path:
    for parent in path.parents:
        if parent.exists() or parent.is_symlink():
            return parent
    return Path(".")


def _check_writable_under(path: Path, flag: str) -> None:
    ancestor = _existing_ancestor(path.absolute())
    if not ancestor.is_dir():
        raise CommandError(f"{flag} {path} is under {ancestor}, which is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise CommandError(f"{flag} {path} cannot be written: {ancestor} is not writable")
    try:  # the OS has the last word (read-only mounts, root on /sys)
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CommandError(f"{flag} {path} cannot be written: {one_line(err)}") from None


def output_file(path: str | Path, flag: str = "--out") -> Path:
    """Check an output file can be written before any work is done; make its folder.

    The file is opened for appending (and removed again if it was not there), so that
    whatever the OS refuses (``/proc``, a read-only mount, a full quota) is found now."""
    path = Path(path)
    if path.is_dir():
        raise CommandError(f"{flag} {path} is a folder; give a file name such as {path / 'rows.jsonl'}")
    note_new_folders(path.parent)
    _check_writable_under(path, flag)
    if path.exists() and not os.access(path, os.W_OK):
        raise CommandError(f"{flag} {path} cannot be written: permission denied")
    existed = path.exists()
    try:
        with path.open("a"):
            pass
    except OSError as err:
        raise CommandError(f"{flag} {path} cannot be written: {err.strerror or one_line(err)}") from None
    if not existed:
        path.unlink(missing_ok=True)
    return path


def output_dir(path: str | Path, flag: str = "--out") -> Path:
    """Make the output folder and write a probe file in it, before any work is done.

    Permission bits do not tell everything: root passes ``os.access`` on ``/proc`` and on a
    read-only mount, and a training run found out only when it saved its model. So the folder
    is created and a file is written and removed in it: what the OS refuses is found now."""
    path = Path(path)
    note_new_folders(path)  # removed again if the command fails while empty
    if path.exists() and not path.is_dir():
        raise CommandError(f"{flag} {path} is a file; this command writes a folder there")
    if not path.is_dir():
        _check_writable_under(path, flag)
    elif not os.access(path, os.W_OK | os.X_OK):
        raise CommandError(f"{flag} {path} cannot be written: permission denied")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".harness-gym-probe-")
        try:
            os.write(fd, b"probe")
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as err:
        raise CommandError(f"{flag} {path} cannot be written: {err.strerror or one_line(err)}") from None
    return path


def table(rows: list[list[str]], out: TextIO) -> None:
    """Write rows as an aligned text table, the first row a header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def write_results(results: Sequence[Any], path: Path) -> None:
    """Write episode rows as JSON Lines (``.jsonl``) or CSV (``.csv``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [r.to_dict() for r in results]
    if path.suffix == ".csv":
        import csv

        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            for row in rows:
                writer.writerow({k: json.dumps(v) if isinstance(v, dict) else v for k, v in row.items()})
    else:
        with path.open("w") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")


def trajectory_policy(text: str) -> Any:
    """An argparse type: a ``--trajectories`` value (a bad one is argparse's one-line error)."""
    from harness_gym.rows.trajectories import TrajectoryError, TrajectoryPolicy

    try:
        return TrajectoryPolicy.parse(text)
    except TrajectoryError as err:
        raise argparse.ArgumentTypeError(str(err).replace("--trajectories ", "")) from None


def add_trajectory_argument(
    parser: argparse.ArgumentParser, default: str | None = "pairs", default_text: str | None = None
) -> None:
    """The ``--trajectories`` option of the verbs that play episodes (``default`` None: the
    verb resolves it, as ``default_text`` says)."""
    parser.add_argument(
        "--trajectories",
        type=trajectory_policy,
        default=None if default is None else trajectory_policy(default),
        metavar="none|failures|sample:N|all|pairs",
        help=(
            "which episodes keep a recorded trajectory beside the rows (for `harness-gym view`): "
            f"none, failures, sample:N (first N seeds of each cell group), all, or pairs "
            "(sample:1 plus every episode whose outcome differs from its paired partner's; "
            f"default {default_text or default})"
        ),
    )
