"""Cost of root file systems built from Dockerfile steps, and of episodes over them.

(a) one build: its base (mmdebstrap, once per cache), its steps, then the same build again
    (from the cache), side by side with their ratio, and the cache's size on disk;
(b) one command in a sandbox over the host's system and over the built one, interleaved,
    medians and their ratio (the sandbox start included once per sandbox, not per command).

    python benchmarks/rootfs_build.py [--cache DIR] [--image python:3.11-slim] [--repeats 20]

Needs root, mmdebstrap and bubblewrap; the first run downloads the base from Debian's mirror.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from harness_gym.envs.terminal.episode_dirs import make_episode_dir, remove_episode_dir
from harness_gym.envs.terminal.rootfs import build_rootfs
from harness_gym.envs.terminal.rootfs_cache import disk_usage
from harness_gym.envs.terminal.rootfs_steps import BuildStep
from harness_gym.envs.terminal.sandbox import Sandbox

STEPS = [
    BuildStep("RUN", ("apt-get update && apt-get install -y --no-install-recommends jq",), 2),
    BuildStep("RUN", ("pip install --no-cache-dir six",), 3),
    BuildStep("WORKDIR", ("/app",), 4),
]


def builds(image: str, cache: Path) -> Path:
    had_base = (cache / "bases").is_dir() and any((cache / "bases").glob("*/recipe.json"))
    start = time.perf_counter()
    first = build_rootfs(image, STEPS, None, cache=cache)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    again = build_rootfs(image, STEPS, None, cache=cache, progress=False)
    warm = time.perf_counter() - start
    assert again.key == first.key
    print(f"{'build':<28}{'seconds':>10}   (base {'from the cache' if had_base else 'built too'})")
    print(f"{'first (base + steps)':<28}{cold:>10.2f}")
    print(f"{'recorded build time':<28}{first.build_seconds:>10.2f}")
    print(f"{'again (from the cache)':<28}{warm:>10.4f}")
    print(f"{'ratio first / again':<28}{cold / max(warm, 1e-9):>10.0f}")
    print(f"rootfs {first.size_bytes / 1e6:.0f} MB; cache {disk_usage(cache) / 1e6:.0f} MB in {cache}")
    return first.path


def per_command(rootfs: Path, repeats: int) -> None:
    roots = [make_episode_dir(), make_episode_dir()]
    host, built = Sandbox(roots[0]), Sandbox(roots[1], rootfs=rootfs)
    try:
        print(f"\n{'command':<26}{'host ms':>10}{'rootfs ms':>11}{'ratio':>8}")
        for command in ("true", "python3 -c pass"):
            a, b = [], []
            for _ in range(repeats):
                for box, out in ((host, a), (built, b)):
                    box.run("true")
                    t = time.perf_counter()
                    res = box.run(command)
                    out.append(time.perf_counter() - t)
                    assert res.exit_code == 0, res.stderr
            ma, mb = statistics.median(a) * 1e3, statistics.median(b) * 1e3
            print(f"{command:<26}{ma:>10.1f}{mb:>11.1f}{mb / ma:>8.2f}")
    finally:
        for box in (host, built):
            box.close()
        for root in roots:
            remove_episode_dir(root)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", type=Path, default=None, help="cache folder (default: a fresh one)")
    parser.add_argument("--image", default="python:3.11-slim")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    cache = args.cache or Path(tempfile.mkdtemp(prefix="hg-rootfs-bench-", dir="/var/tmp"))
    per_command(builds(args.image, cache), args.repeats)


if __name__ == "__main__":
    main()
