"""The cache of built root file systems: content-hash keys, listing and pruning.

A build is named by :func:`cache_key` (the mapped base's recipe, every step, the bytes and
modes of every copied file) and kept under :func:`cache_dir` as a :class:`RootFS` (its root,
and what the Dockerfile set); bases are cached on their own under ``bases/``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_gym.envs.terminal.rootfs_base import Base, debian_mirror
from harness_gym.envs.terminal.rootfs_steps import BuildStep, check_buildable, copy_sources

#: Overrides the cache folder (default: ``$XDG_CACHE_HOME/harness-gym/rootfs``).
CACHE_VARIABLE = "HARNESS_GYM_ROOTFS_CACHE"


@dataclass
class RootFS:
    """A built file system: ``path`` is its root; ``env``, ``workdir``, ``user`` are what the
    Dockerfile set; ``app`` holds what the build left in ``/app`` (the episode's start)."""

    key: str
    path: Path
    image: str = ""
    base: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str = "root"
    steps: list[str] = field(default_factory=list)
    build_seconds: float = 0.0
    size_bytes: int = 0
    created: float = 0.0
    last_used: float = 0.0

    @property
    def app(self) -> Path:
        return self.path / "app"

    @property
    def folder(self) -> Path:
        return self.path.parent

    def meta(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "image": self.image,
            "base": self.base,
            "env": self.env,
            "workdir": self.workdir,
            "user": self.user,
            "steps": self.steps,
            "build_seconds": self.build_seconds,
            "size_bytes": self.size_bytes,
            "created": self.created,
        }

    @classmethod
    def load(cls, folder: Path) -> RootFS:
        data = json.loads((folder / "meta.json").read_text())
        used = folder / "last-used"
        return cls(
            key=data["key"],
            path=folder / "root",
            image=data.get("image", ""),
            base=data.get("base", {}),
            env=dict(data.get("env", {})),
            workdir=data.get("workdir", "/"),
            user=data.get("user", "root"),
            steps=list(data.get("steps", [])),
            build_seconds=float(data.get("build_seconds", 0.0)),
            size_bytes=int(data.get("size_bytes", 0)),
            created=float(data.get("created", 0.0)),
            last_used=used.stat().st_mtime if used.exists() else float(data.get("created", 0.0)),
        )


def cache_dir() -> Path:
    """Where built file systems live: ``$HARNESS_GYM_ROOTFS_CACHE``, else
    ``$XDG_CACHE_HOME/harness-gym/rootfs``, else ``~/.cache/harness-gym/rootfs`` — except for
    root without ``XDG_CACHE_HOME``, whose ``/root`` the sandbox's own uid cannot enter:
    ``/var/cache/harness-gym/rootfs``."""
    chosen = os.environ.get(CACHE_VARIABLE)
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "harness-gym" / "rootfs"
    if os.geteuid() == 0:
        return Path("/var/cache/harness-gym/rootfs")
    return Path.home() / ".cache" / "harness-gym" / "rootfs"


def _hash_tree(path: Path, digest: Any) -> None:
    """Feed every file under ``path`` (name, mode, bytes or link target) to ``digest``."""
    items = [path] if not path.is_dir() or path.is_symlink() else [path, *sorted(path.rglob("*"))]
    for item in items:
        rel = os.path.relpath(item, path) if item != path else "."
        st = item.lstat()
        digest.update(f"{rel}\0{st.st_mode:o}\0".encode())
        if item.is_symlink():
            digest.update(os.readlink(item).encode())
        elif item.is_file():
            with open(item, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
        digest.update(b"\1")


def cache_key(image: str, steps: Sequence[BuildStep], context: Path | None) -> str:
    """The content hash naming a build: the mapped base's recipe, every step (kind and
    arguments, not line numbers), and the bytes and modes of every file a COPY takes."""
    base = check_buildable(image, steps, context)
    digest = hashlib.sha256()
    digest.update(json.dumps(base.recipe(debian_mirror()), sort_keys=True).encode())
    for step in steps:
        digest.update(json.dumps([step.kind, list(step.args)]).encode())
        if step.kind == "COPY" and context is not None:
            for rel in copy_sources(step, context):
                digest.update(rel.encode() + b"\0")
                _hash_tree(Path(context) / rel, digest)
    return digest.hexdigest()[:32]


def base_key(base: Base) -> str:
    return hashlib.sha256(json.dumps(base.recipe(debian_mirror()), sort_keys=True).encode()).hexdigest()[:32]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def disk_usage(path: Path) -> int:
    """Bytes ``path`` takes on disk (``du``; 0 when it is missing)."""
    if not path.exists():
        return 0
    done = subprocess.run(
        ["du", "-s", "--block-size=1", "--", str(path)], capture_output=True, text=True, timeout=600
    )
    try:
        return int(done.stdout.split()[0])
    except (IndexError, ValueError):
        return 0


def list_rootfs(cache: Path | None = None) -> list[RootFS]:
    """Every built file system in the cache, newest first."""
    cache = Path(cache or cache_dir())
    out = []
    if cache.is_dir():
        for folder in cache.iterdir():
            if (folder / "meta.json").is_file() and (folder / "root").is_dir():
                with contextlib.suppress(ValueError, KeyError, OSError):
                    out.append(RootFS.load(folder))
    return sorted(out, key=lambda r: r.created, reverse=True)


def list_bases(cache: Path | None = None) -> list[tuple[str, dict[str, Any], int]]:
    """(key, recipe, bytes) of every cached base."""
    cache = Path(cache or cache_dir()) / "bases"
    out = []
    if cache.is_dir():
        for folder in sorted(cache.iterdir()):
            if (folder / "recipe.json").is_file():
                out.append(
                    (folder.name, json.loads((folder / "recipe.json").read_text()), disk_usage(folder))
                )
    return out


def prune_rootfs(
    cache: Path | None = None,
    *,
    unused_for: float | None = None,
    bases: bool = False,
    keep: Sequence[str] = (),
) -> list[str]:
    """Remove built file systems (those unused for ``unused_for`` seconds, else all but
    ``keep``), half-finished builds, and with ``bases`` the cached bases; return what went."""
    cache = Path(cache or cache_dir())
    removed: list[str] = []
    if not cache.is_dir():
        return removed
    now = time.time()
    for folder in sorted(cache.iterdir()):
        if folder.name == "bases" or folder.name.startswith(".lock"):
            continue
        if folder.name.startswith(".tmp-"):
            pid = folder.name.split("-")[-1]
            if pid.isdigit() and Path(f"/proc/{pid}").exists():
                continue  # a build in progress
        elif (folder / "meta.json").is_file():
            if any(folder.name.startswith(k) for k in keep if k):
                continue
            if unused_for is not None and now - RootFS.load(folder).last_used < unused_for:
                continue
        elif folder.suffix != ".log":
            continue
        remove_path(folder)
        removed.append(folder.name)
    if bases and (cache / "bases").is_dir():
        for folder in sorted((cache / "bases").iterdir()):
            remove_path(folder)
            removed.append("bases/" + folder.name)
    return removed


def remove_path(path: Path) -> None:
    from harness_gym.envs.terminal.episode_dirs import remove_tree

    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    else:
        path.unlink(missing_ok=True)
