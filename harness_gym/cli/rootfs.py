"""``harness-gym rootfs list|build|prune``: the cache of root file systems built from
Dockerfiles for terminal tasks (``harness_gym.envs.terminal.rootfs``).

harness-gym rootfs list
harness-gym rootfs build tasks/fix-git                       # a Harbor task folder's Dockerfile
harness-gym rootfs build --from python:3.12-slim --run 'pip install numpy'
harness-gym rootfs prune --unused-days 30 [--bases] | --all
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, TextIO

from harness_gym.cli.common import CommandError, non_negative_float, table

HELP = "list, build or prune the cache of root file systems for terminal tasks"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cache", type=Path, help="the cache folder (default: $HARNESS_GYM_ROOTFS_CACHE or XDG)"
    )
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="built file systems and bases, with sizes and build times")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    build = sub.add_parser("build", help="build (or find in the cache) a task's root file system")
    build.add_argument("folders", nargs="*", type=Path, help="Harbor task folders (environment/Dockerfile)")
    build.add_argument("--from", dest="image", help="a base image to build without a task folder")
    build.add_argument("--run", action="append", default=[], help="a RUN step (repeatable; with --from)")
    build.add_argument("--no-progress", action="store_true", help="no progress bar")
    prune = sub.add_parser("prune", help="remove built file systems (and half-finished builds, failed logs)")
    prune.add_argument("--unused-days", type=non_negative_float, help="only those unused for this many days")
    prune.add_argument("--all", action="store_true", help="every built file system")
    prune.add_argument("--bases", action="store_true", help="the mmdebstrap bases too")


def run(args: argparse.Namespace, out: TextIO) -> int:
    return {"list": _list, "build": _build, "prune": _prune}[args.action](args, out)


def _mb(n: int) -> str:
    return f"{n / 1e6:.0f} MB"


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"


def _list(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.envs.terminal import rootfs_cache

    cache = args.cache or rootfs_cache.cache_dir()
    built = rootfs_cache.list_rootfs(cache)
    bases = rootfs_cache.list_bases(cache)
    if args.json:
        for item in built:
            out.write(json.dumps({"kind": "rootfs", "path": str(item.path), **item.meta()}) + "\n")
        for key, recipe, size in bases:
            out.write(json.dumps({"kind": "base", "key": key, "size_bytes": size, **recipe}) + "\n")
        return 0
    out.write(f"Root file systems in {cache}:\n")
    table(
        [["key", "image", "debian", "steps", "size", "build", "created", "last used"]]
        + [
            [
                r.key[:12],
                r.image,
                str(r.base.get("suite", "")),
                str(len(r.steps)),
                _mb(r.size_bytes),
                f"{r.build_seconds:.0f} s",
                _when(r.created),
                _when(r.last_used),
            ]
            for r in built
        ],
        out,
    )
    out.write("\nBases (mmdebstrap):\n")
    table(
        [["key", "suite", "packages", "size"]]
        + [[k, str(r.get("suite")), ",".join(r.get("packages", [])), _mb(s)] for k, r, s in bases],
        out,
    )
    out.write(f"\ncache total: {_mb(rootfs_cache.disk_usage(Path(cache)))}\n")
    return 0


def _recipes(args: argparse.Namespace) -> list[tuple[str, str, list[Any], Path | None]]:
    """(label, base image, steps, build context) for each thing to build."""
    from harness_gym.envs.terminal.rootfs_steps import BuildStep

    if args.image:
        if args.folders:
            raise CommandError("give task folders or --from IMAGE, not both")
        return [(args.image, args.image, [BuildStep("RUN", (cmd,)) for cmd in args.run], None)]
    if args.run:
        raise CommandError("--run needs --from IMAGE")
    if not args.folders:
        raise CommandError("give Harbor task folders to build, or --from IMAGE [--run CMD ...]")
    # the Harbor loader reads a task's Dockerfile into build steps
    from harness_gym.envs.terminal.harbor import rootfs_recipe
    from harness_gym.envs.terminal.harbor_format import UnsupportedHarborTask

    out = []
    for folder in args.folders:
        if not (folder / "environment" / "Dockerfile").is_file():
            raise CommandError(f"{folder}: no environment/Dockerfile (is it a Harbor task folder?)")
        try:
            image, steps, context = rootfs_recipe(folder)
        except UnsupportedHarborTask as err:
            raise CommandError(f"{folder}: {err}") from None
        out.append((str(folder), image, list(steps), context))
    return out


def _build(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.envs.terminal import rootfs
    from harness_gym.envs.terminal.rootfs_base import Unbuildable
    from harness_gym.envs.terminal.rootfs_cache import cache_dir, disk_usage

    cache = args.cache or cache_dir()
    rows = [["what", "key", "debian", "size", "build", "note"]]
    for label, image, steps, context in _recipes(args):
        start = time.monotonic()
        try:
            built = rootfs.build_rootfs(image, steps, context, progress=not args.no_progress, cache=cache)
        except (Unbuildable, rootfs.BuildFailed) as err:
            raise CommandError(f"{label}: {err}") from None
        took = time.monotonic() - start
        cached = took < built.build_seconds / 2
        rows.append(
            [
                label,
                built.key[:12],
                str(built.base.get("suite", "")),
                _mb(built.size_bytes),
                f"{built.build_seconds:.0f} s" + (" (cached)" if cached else ""),
                str(built.base.get("note", "")),
            ]
        )
    table(rows, out)
    out.write(f"cache {cache}: {_mb(disk_usage(Path(cache)))}\n")
    return 0


def _prune(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.envs.terminal import rootfs_cache

    cache = args.cache or rootfs_cache.cache_dir()
    if args.all and args.unused_days is not None:
        raise CommandError("give --all or --unused-days, not both")
    before = rootfs_cache.disk_usage(Path(cache))
    if args.all or args.unused_days is not None:
        unused = None if args.all else args.unused_days * 86400
        removed = rootfs_cache.prune_rootfs(cache, unused_for=unused, bases=args.bases)
    else:  # only leftovers: half-finished builds of dead processes, failed-build logs
        removed = rootfs_cache.prune_rootfs(cache, unused_for=float("inf"), bases=args.bases)
    for name in removed:
        out.write(f"removed {name}\n")
    out.write(f"freed {_mb(before - rootfs_cache.disk_usage(Path(cache)))}; cache {cache}\n")
    return 0
