#!/usr/bin/env bash
# Install the Debian packages harness-gym needs beyond Python, when they are missing:
# chromium (real MiniWoB++ tasks, the report test in a real browser) and chromium-driver
# (the Selenium reference in benchmarks/browser_throughput.py), bubblewrap (`bwrap`, the
# sandbox of the terminal tasks) and mmdebstrap (the Debian bases of root file systems built
# from task Dockerfiles: harness_gym/envs/terminal/rootfs.py). Nothing is downloaded
# outside the package manager: Playwright drives this chromium through executable_path.
# Another package manager holding apt's locks (unattended upgrades on a fresh cloud machine) is
# waited for, up to HARNESS_GYM_APT_LOCK_TIMEOUT seconds (default 600), saying so.
set -euo pipefail
lock_timeout=${HARNESS_GYM_APT_LOCK_TIMEOUT:-600}
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
# apt-get install waits for dpkg's lock by itself (DPkg::Lock::Timeout); apt-get update does not
# wait for the package lists' lock (apt 2.6 fails at once), so it is retried here.
waited=0
until out=$($sudo apt-get -o DPkg::Lock::Timeout="$lock_timeout" update -qq 2>&1); do
    if ! grep -q "Could not get lock" <<<"$out" || [ "$waited" -ge "$lock_timeout" ]; then
        echo "$out" >&2
        [ "$waited" -ge "$lock_timeout" ] && echo "apt's lock was still held after ${lock_timeout}s (HARNESS_GYM_APT_LOCK_TIMEOUT)" >&2
        exit 1
    fi
    [ "$waited" -eq 0 ] && echo "another package manager holds apt's lock: waiting up to ${lock_timeout}s"
    sleep 2
    waited=$((waited + 2))
done
DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout="$lock_timeout" \
    install -y -qq --no-install-recommends "${need[@]}" >/dev/null
