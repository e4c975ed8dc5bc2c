#!/usr/bin/env python3
"""Run a command as an unprivileged uid (from root), e.g. the terminal tests.

    python scripts/as-unprivileged.py [--uid UID] [--copy] -- COMMAND ...

The interpreter that runs this script (a venv's, say) may sit behind a directory the uid
cannot enter (``/root`` holds pyenv's Pythons; a clone may be in a 0700 folder). In a private
mount namespace, each such directory is covered by a tmpfs that holds only bind mounts of
the paths the interpreter needs (its prefix, the venv, ``sys.path``), so the uid reaches those
and nothing else of it; then the privileges are dropped and COMMAND runs as the uid.

``--copy`` first copies the tree (git's tracked files, else the package, tests and scripts)
into a fresh 0700 directory of the uid whose path has a space, runs COMMAND there with
``PYTHONPATH`` on the copy, and removes it afterwards: the issue-25 check that nothing
depends on the checkout's path or permissions. Standard library only; Linux.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 1 << 18
LIBC = ctypes.CDLL(None, use_errno=True)
ROOT = Path(__file__).resolve().parents[1]
#: Just above the sandbox uids (harness_gym.envs.terminal.sandbox_view.SANDBOX_UID_BASE + 4000).
DEFAULT_UID = 0x70000000 + 4000


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = [None if x is None else x.encode() for x in (source, target, fstype, data)]
    if LIBC.mount(enc[0], enc[1], enc[2], flags, enc[3]) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def first_blocked(path: str, uid: int) -> tuple[str, str] | None:
    """(directory, child) where ``uid`` (no group in common) cannot go on towards ``path``."""
    current = "/"
    for part in Path(path).parts[1:]:
        st = os.stat(current)
        if not (st.st_mode & 0o001 or (st.st_uid == uid and st.st_mode & 0o100)):
            return current, part
        current = os.path.join(current, part)
    return None


def expose(paths: list[str], uid: int) -> None:
    """Make every path in ``paths`` reachable for ``uid`` (in this process's mount namespace)."""
    if LIBC.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    stashes: dict[str, str] = {}
    for _ in range(100):
        blocked = sorted({b for p in paths if (b := first_blocked(p, uid))})
        if not blocked:
            return
        directory, child = blocked[0]
        if directory not in stashes:
            stash = tempfile.mkdtemp(prefix="hg-expose-")
            mount(directory, stash, None, MS_BIND | MS_REC, None)
            mount("tmpfs", directory, "tmpfs", 0, "mode=0755")
            stashes[directory] = stash
        source = os.path.join(stashes[directory], child)
        target = os.path.join(directory, child)
        if os.path.isdir(source):
            os.makedirs(target, exist_ok=True)
        else:
            open(target, "a").close()
        mount(source, target, None, MS_BIND | MS_REC, None)
    raise RuntimeError(f"could not expose {paths}")


def needed_paths() -> list[str]:
    out = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.realpath(sys.executable)}
    out.update(p for p in sys.path if p and os.path.exists(p))
    return sorted(out)


def copy_tree(uid: int) -> tuple[Path, Path]:
    """A 0700 home of ``uid`` with ``a checkout`` inside (the tree's files), both owned by it."""
    home = Path(tempfile.mkdtemp(prefix="hg-unpriv-"))
    checkout = home / "a checkout"
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        files = [f.decode() for f in listed if f]
    except (OSError, subprocess.CalledProcessError):
        parts = ("harness_gym", "tests", "scripts")
        files = [str(p.relative_to(ROOT)) for part in parts for p in (ROOT / part).rglob("*")]
        files.append("pyproject.toml")
    for rel in files:
        src = ROOT / rel
        if src.is_file() and not src.is_symlink() and "__pycache__" not in rel:
            (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, checkout / rel)
    for path in [home, *home.rglob("*")]:
        os.lchown(path, uid, uid)
    checkout.chmod(0o700)
    home.chmod(0o700)
    return home, checkout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uid", type=int, default=DEFAULT_UID)
    parser.add_argument("--copy", action="store_true", help="run from a 0700 copy of the tree")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if os.geteuid() != 0:
        parser.error("run as root (it drops to --uid)")
    if not command:
        parser.error("give a command after --")
    home = checkout = None
    env = dict(os.environ)
    if args.copy:
        home, checkout = copy_tree(args.uid)
        env.update(HOME=str(home), PYTHONPATH=str(checkout), PWD=str(checkout))
    pid = os.fork()
    if pid == 0:  # the child: its own mount namespace, then the uid
        try:
            expose(needed_paths() + ([str(checkout)] if checkout else []), args.uid)
            os.setgroups([])
            os.setresgid(args.uid, args.uid, args.uid)
            os.setresuid(args.uid, args.uid, args.uid)
            if checkout is not None:
                os.chdir(checkout)
            os.execvpe(command[0], command, env)
        except BaseException as err:  # noqa: BLE001 - report and leave the child
            print(f"as-unprivileged: {err}", file=sys.stderr)
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
