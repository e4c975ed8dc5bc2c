"""Episode directories on the host, and copying and removing trees the agent shaped.

Each episode gets a fresh directory under :func:`episode_base` (``app`` and ``home``
inside) whose :data:`OWNER_FILE` names its owner process, so a killed harness's leftovers
are removed by the next one (:func:`remove_stale_episode_dirs`). :func:`walk_tree`,
:func:`remove_tree` and :func:`copy_tree` never follow a symlink and take any depth, FIFOs
and unreadable directories the agent may have left.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from harness_gym.envs.terminal.sandbox_processes import process_tag

OWNER_FILE = ".hg-owner"
EPISODE_PREFIX = "hg-term-"


def walk_tree(root: str | os.PathLike[str]) -> list[str]:
    """Every path under ``root`` (not ``root`` itself), iteratively: no symlink is followed,
    any depth is fine, and entries that vanish or cannot be read are skipped."""
    found: list[str] = []
    stack = [os.fspath(root)]
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as entries:
                for entry in entries:
                    found.append(entry.path)
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                    except OSError:
                        pass
        except OSError:
            continue
    return found


def remove_tree(path: str | os.PathLike[str]) -> bool:
    """Remove ``path`` whatever the agent left there: any depth, FIFOs, symlinks (never
    followed), directories without write or search permission. True when it is gone."""
    path = os.fspath(path)
    if not os.path.lexists(path):
        return True
    if os.path.islink(path) or not os.path.isdir(path):
        try:
            os.unlink(path)
        except OSError:
            pass
        return not os.path.lexists(path)
    for argv in (["rm", "-rf", "--", path], ["chmod", "-R", "u+rwX", "--", path], ["rm", "-rf", "--", path]):
        if not os.path.lexists(path):
            break
        subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    return not os.path.lexists(path)


def copy_tree(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Copy a directory as it is (``cp -a``: symlinks as symlinks, FIFOs as FIFOs, modes kept,
    any depth). Raises ``OSError`` saying what could not be copied."""
    done = subprocess.run(
        ["cp", "-a", "--no-target-directory", "--", os.fspath(src), os.fspath(dst)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise OSError(f"cannot copy {src}: {done.stderr.strip()[-500:]}")


#: Chooses the host folder of episode directories (default: ``/tmp``, whatever ``$TMPDIR`` says).
EPISODE_BASE_VARIABLE = "HARNESS_GYM_SANDBOX_TMP"


def episode_base() -> str:
    """The host folder that holds episode directories.

    A bind mount's source path shows inside the sandbox (``/proc/self/mountinfo``), so the
    default is a fixed, neutral ``/tmp`` (or ``/var/tmp``) rather than ``$TMPDIR``, which often
    names the user (``/home/alice/tmp``, ``/run/user/1000``). ``$HARNESS_GYM_SANDBOX_TMP``
    chooses another folder, which the agent can then see.
    """
    chosen = os.environ.get(EPISODE_BASE_VARIABLE)
    if chosen:
        return chosen
    for base in ("/tmp", "/var/tmp"):
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            return base
    return tempfile.gettempdir()


def owned_tempdir(prefix: str = EPISODE_PREFIX) -> Path:
    """A fresh host directory (under :func:`episode_base`) whose :data:`OWNER_FILE` names this
    process; stale ones (their owner gone, e.g. a killed harness) are removed first."""
    remove_stale_episode_dirs()
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=episode_base()))
    # Written whole or not at all (a rename): another process's sweep must never read a
    # half-written owner file and take the directory for a stale one.
    partial = root / (OWNER_FILE + ".partial")
    partial.write_text(process_tag(os.getpid()) or "")
    partial.rename(root / OWNER_FILE)
    return root


def remove_stale_episode_dirs(base: str | os.PathLike[str] | None = None) -> list[str]:
    """Remove this user's episode and snapshot directories whose owner process is gone."""
    base = os.fspath(base or episode_base())
    removed = []
    try:
        with os.scandir(base) as entries:
            candidates = [
                e.path
                for e in entries
                if e.name.startswith(EPISODE_PREFIX)
                and e.is_dir(follow_symlinks=False)
                and e.stat(follow_symlinks=False).st_uid == os.geteuid()
            ]
    except OSError:
        return removed
    for path in candidates:
        try:
            fd = os.open(os.path.join(path, OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd) as f:
                tag = f.read(100).strip()
        except OSError:
            continue  # no owner file: being created now, or not ours to judge
        pid = tag.split()[0] if tag else ""
        if not pid.isdigit() or process_tag(int(pid)) == tag:
            continue  # unreadable (not ours to judge) or its owner is alive
        if remove_tree(path):
            removed.append(path)
    return removed


def make_episode_dir(prefix: str = EPISODE_PREFIX) -> Path:
    """A fresh host directory for one episode (``app`` and ``home`` inside)."""
    root = owned_tempdir(prefix)
    os.chmod(root, 0o755)
    (root / "app").mkdir()
    (root / "home").mkdir()
    return root


def remove_episode_dir(root: Path) -> None:
    """Remove an episode directory completely, whatever the agent left in it (never raises)."""
    remove_tree(root)
