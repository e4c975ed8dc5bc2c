"""Harbor verification: the tests the verifier gets, its environment, and the reward it wrote.

After the agent submits, every agent process is killed and a fresh one-shot verifier sandbox
(:meth:`Sandbox.run_verifier <harness_gym.envs.terminal.sandbox.Sandbox.run_verifier>`) sees
the final ``/app``, a copy of the task's tests at ``/tests`` (:func:`copy_tests`: read-only,
no symlink followed; the agent never sees them), an empty writable ``/logs`` and the image's
environment less :data:`FIXED_VERIFIER_ENV`. :func:`read_reward` reads ``reward.json`` (a
flat object of finite numbers) before ``reward.txt`` (one finite number) without following
any symlink; :func:`reward_tampering` lists the traces the agent's code leaves when it claims
the reward itself; :func:`min_reward_failure` is a multi-step task's gate.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from harness_gym.envs.terminal.episode_dirs import walk_tree
from harness_gym.envs.terminal.harbor_format import MAX_TESTS_BYTES, UnsupportedHarborTask, tests_files
from harness_gym.envs.terminal.sandbox_verifier import VERIFIER_ENV

#: Variables of the verifier that a task's environment never replaces (git hardening, home).
FIXED_VERIFIER_ENV = frozenset(k for k in VERIFIER_ENV if k.startswith("GIT_")) | {
    "HOME",
    "USER",
    "LOGNAME",
    "PYTHONNOUSERSITE",
}


#: The files test.sh may write its reward to (Harbor reads the first that exists).
REWARD_FILES = ("reward.json", "reward.txt")


def named_reward_files(tests: Path) -> set[str]:
    """The reward files some file of the task's tests names (test.sh, or a checker it runs)."""
    named: set[str] = set()
    for path in walk_tree(tests):
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                data = f.read(MAX_TESTS_BYTES)
            named.update(n for n in REWARD_FILES if n.encode() in data)
    return named


def reward_tampering(logs: Path, named: set[str]) -> list[str]:
    """What says the reward under ``logs/verifier`` is not the one test.sh wrote: the
    directory made read-only, a reward file no file of the tests names (the agent's code
    wrote it), one made read-only (test.sh's own write then fails), hard-linked, or whose
    mode or owner changed after its last write (ctime after mtime). test.sh runs the agent's
    code as its own uid: these are the traces that code leaves when it claims the reward."""
    found: list[str] = []
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_NONBLOCK
    try:  # no link is followed on the way (read_reward names a linked /logs/verifier)
        base = os.open(logs, flags)
    except OSError:
        return found
    try:
        fd = os.open("verifier", flags, dir_fd=base)
    except OSError:
        return found
    finally:
        os.close(base)
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o700 != 0o700:
            found.append(f"/logs/verifier was made mode {stat.S_IMODE(st.st_mode):o}")
        for name in REWARD_FILES:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            where = f"/logs/verifier/{name}"
            if name not in named:
                found.append(f"{where} exists, but no file of the task's tests names it")
            if not stat.S_ISREG(st.st_mode):
                continue
            if not st.st_mode & 0o200:
                found.append(f"{where} was made read-only (mode {stat.S_IMODE(st.st_mode):o})")
            if st.st_nlink != 1:
                found.append(f"{where} has {st.st_nlink} hard links")
            if st.st_ctime_ns != st.st_mtime_ns:
                found.append(f"{where}'s mode or owner changed after its last write")
    finally:
        os.close(fd)
    return found


def read_reward(logs: Path) -> tuple[dict[str, float] | None, str]:
    """The rewards ``test.sh`` wrote under ``logs/verifier``, read as Harbor reads them
    (``reward.json`` first: an object of finite numbers; else ``reward.txt``: one finite
    number, as ``{"reward": x}``). No symlink is followed on the way (test.sh could point
    ``/logs/verifier`` or the file at host paths), nor a FIFO opened."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        base = os.open(logs, flags | os.O_DIRECTORY)
    except OSError:
        return None, "the verifier's /logs is gone"
    try:
        try:
            verifier = os.open("verifier", flags | os.O_DIRECTORY, dir_fd=base)
        except OSError:
            return None, "/logs/verifier is not a directory (a symlink is not followed)"
        try:
            for name in ("reward.json", "reward.txt"):
                try:
                    fd = os.open(name, flags, dir_fd=verifier)
                except FileNotFoundError:
                    continue
                except OSError:
                    return None, f"/logs/verifier/{name} is not a regular file (a symlink is not followed)"
                with os.fdopen(fd, "rb") as f:
                    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                        return None, f"/logs/verifier/{name} is not a regular file"
                    text = f.read(1 << 20).decode("utf-8", "replace")
                return _parse_reward(name, text)
        finally:
            os.close(verifier)
    finally:
        os.close(base)
    return None, "test.sh wrote no /logs/verifier/reward.txt or reward.json"


def _parse_reward(name: str, text: str) -> tuple[dict[str, float] | None, str]:
    if not text:
        return None, f"/logs/verifier/{name} is empty"
    if name == "reward.txt":
        try:
            value = float(text)
        except ValueError:
            return None, f"/logs/verifier/reward.txt holds no number: {text[:80]!r}"
        if not math.isfinite(value):
            return None, f"/logs/verifier/reward.txt holds a non-finite reward {value!r}"
        return {"reward": value}, ""
    try:
        data = json.loads(text)
    except ValueError:
        return None, f"/logs/verifier/reward.json is not JSON: {text[:80]!r}"
    if not isinstance(data, dict):
        return None, f"/logs/verifier/reward.json must be an object of rewards, got {text[:80]!r}"
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None, f"/logs/verifier/reward.json: reward {key!r} is not a finite number ({value!r})"
    return {str(k): float(v) for k, v in data.items()}, ""


def min_reward_failure(rewards: dict[str, float] | None, min_reward: Any) -> str | None:
    """Harbor's step gate (trial/multi_step.py): a float gates ``reward``, a table each key."""
    if min_reward is None:
        return None
    thresholds = {"reward": min_reward} if isinstance(min_reward, (int, float)) else dict(min_reward)
    for key, threshold in thresholds.items():
        actual = (rewards or {}).get(key, float("-inf"))
        if actual < float(threshold):
            return f"{key}={actual} below min_reward {threshold}"
    return None


def copy_tests(tests: Path, dest: Path, name: str) -> None:
    """Copy ``tests/`` without following symlinks (each file opened with ``O_NOFOLLOW``);
    a later folder's files replace an earlier one's (a step's tests over the task's)."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel, is_dir in tests_files(tests, name):
        target = dest / rel
        if is_dir:
            target.mkdir(mode=0o755, exist_ok=True)
            continue
        fd = os.open(tests / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise UnsupportedHarborTask(f"{name}: tests/{rel} is not a regular file", "bad-file")
            target.write_bytes(f.read(MAX_TESTS_BYTES + 1))
            mode = os.fstat(f.fileno()).st_mode
        os.chmod(target, 0o755 if mode & 0o111 else 0o644)
