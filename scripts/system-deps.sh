#!/usr/bin/env bash
# Install the Debian packages harness-gym needs beyond Python, when they are missing:
# chromium (real MiniWoB++ tasks, the report test in a real browser) and chromium-driver
# (the Selenium reference in benchmarks/browser_throughput.py), bubblewrap (`bwrap`, the
# sandbox of the terminal tasks) and mmdebstrap (the Debian bases of root file systems built
# from task Dockerfiles: harness_gym/envs/terminal/rootfs.py). Nothing is downloaded
# outside the package manager: Playwright drives this chromium through executable_path.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
if [ ${#need[@]} -eq 0 ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "harness-gym needs: ${need[*]} (Debian package names); install them with your package manager" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
echo "installing Debian packages: ${need[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
