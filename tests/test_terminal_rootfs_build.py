"""Real builds of root file systems (mmdebstrap from Debian's package registry, RUN lines with
apt-get and pip) and episodes over them; slow: a base takes minutes the first time.

The built file systems live in ``$HARNESS_GYM_TEST_ROOTFS_CACHE`` (default
``/var/tmp/harness-gym-test-rootfs``) and are reused by later runs, as users' caches are.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness_gym.envs.terminal.episode_dirs import copy_tree, make_episode_dir, remove_episode_dir
from harness_gym.envs.terminal.rootfs import BuildFailed, build_rootfs
from harness_gym.envs.terminal.rootfs_cache import RootFS
from harness_gym.envs.terminal.rootfs_steps import BuildStep
from harness_gym.envs.terminal.sandbox import Sandbox
from harness_gym.envs.terminal.sandbox_limits import SandboxLimits
from harness_gym.envs.terminal.sandbox_view import bwrap_problem

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("HARNESS_GYM_TEST_ROOTFS_CACHE", "/var/tmp/harness-gym-test-rootfs"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bwrap_problem() is not None, reason="bubblewrap unusable"),
    pytest.mark.skipif(
        shutil.which("mmdebstrap") is None, reason="mmdebstrap missing (scripts/system-deps.sh)"
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="building needs root"),
]


@pytest.fixture(scope="session")
def context(tmp_path_factory) -> Path:
    ctx = tmp_path_factory.mktemp("context")
    (ctx / "data").mkdir()
    (ctx / "data" / "numbers.csv").write_text("a,b\n1,2\n3,4\n")
    (ctx / "run.sh").write_text("#!/bin/sh\necho from-context\n")
    (ctx / "run.sh").chmod(0o755)
    return ctx


@pytest.fixture(scope="session")
def built(context: Path) -> RootFS:
    steps = [
        BuildStep("ENV", ("DEBIAN_FRONTEND=noninteractive", "APP_MODE=test"), 2),
        BuildStep("RUN", ("apt-get update && apt-get install -y --no-install-recommends jq",), 3),
        BuildStep("RUN", ("pip install --no-cache-dir six==1.16.0",), 4),
        BuildStep("WORKDIR", ("/app",), 5),
        BuildStep("COPY", ("data", "run.sh", "./"), 6),
        BuildStep("RUN", ("python -c 'import six; print(six.__version__)' > /app/six-version.txt",), 7),
        BuildStep(
            "ENV", ("PATH=/opt/tools:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",), 8
        ),
        BuildStep(
            "RUN",
            (
                "mkdir -p /opt/tools && printf '#!/bin/sh\\necho tool-ok\\n' > /opt/tools/tool "
                "&& chmod +x /opt/tools/tool",
            ),
            9,
        ),
    ]
    return build_rootfs("python:3.11-slim", steps, context, cache=CACHE, progress=False)


@pytest.fixture
def episode(built: RootFS):
    root = make_episode_dir()
    os.rmdir(root / "app")
    copy_tree(built.app, root / "app")  # the fresh /app starts as the build left it
    sb = Sandbox(root, rootfs=built.path, env=built.env)
    yield sb
    sb.close()
    remove_episode_dir(root)


def test_the_build_ran_every_step_and_logged_the_mapping(built: RootFS) -> None:
    log = (built.folder / "build.log").read_text()
    assert "FROM python:3.11-slim -> Debian bookworm (12) with its Python 3.11" in log
    assert "# step 6: RUN python -c" in log
    assert (built.app / "six-version.txt").read_text().strip() == "1.16.0"
    assert (built.app / "numbers.csv").is_file() and os.access(built.app / "run.sh", os.X_OK)
    assert built.env["APP_MODE"] == "test" and built.env["PATH"].startswith("/opt/tools:")
    assert built.workdir == "/app" and built.size_bytes > 100 << 20 and built.build_seconds > 0


def test_an_episode_runs_over_the_built_system_read_only_with_a_fresh_app(episode: Sandbox) -> None:
    res = episode.run(
        "jq --version; python -c 'import six; print(six.__file__)'; tool; echo $APP_MODE; "
        "./run.sh; cat six-version.txt; head -1 /etc/os-release; id -un; hostname"
    )
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("jq-1.6") and "dist-packages/six.py" in lines[1]
    assert lines[2:] == [
        "tool-ok",
        "test",
        "from-context",
        "1.16.0",
        'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"',
        "agent",
        "sandbox",
    ]
    denied = episode.run(
        "touch /usr/bin/x || echo ro-usr; touch /opt/tools/x || echo ro-opt; ls /work || echo no-work"
    )
    assert denied.stdout.split() == ["ro-usr", "ro-opt", "no-work"], denied.stdout
    assert episode.run("echo new > /app/new.txt && cat /app/new.txt").stdout == "new\n"
    net = episode.run(
        "python -c \"import socket; socket.create_connection(('pypi.org', 443), 3)\" || echo offline"
    )
    assert net.stdout.strip().endswith("offline")
    verifier = episode.run_verifier("jq -n 1 && tool && echo $APP_MODE && ls /app/new.txt")
    assert verifier.exit_code == 0 and verifier.stdout.split() == ["1", "tool-ok", "test", "/app/new.txt"]


def test_the_built_app_is_copied_not_shared(built: RootFS, episode: Sandbox) -> None:
    episode.run("rm -f /app/numbers.csv && echo x > /app/six-version.txt")
    assert (built.app / "numbers.csv").is_file()
    assert (built.app / "six-version.txt").read_text().strip() == "1.16.0"


def test_a_failing_real_step_names_its_line(built: RootFS, context: Path) -> None:
    steps = [
        BuildStep("RUN", ("apt-get update",), 2),
        BuildStep(
            "RUN",
            ("apt-get install -y no-such-package-h26b",),
            11,
            "RUN apt-get install -y no-such-package-h26b",
        ),
    ]
    with pytest.raises(BuildFailed) as err:
        build_rootfs("python:3.11-slim", steps, context, cache=CACHE, progress=False)
    assert (err.value.step_index, err.value.line_number) == (2, 11)
    assert "Unable to locate package no-such-package-h26b" in err.value.log_tail
    assert "line 11: RUN apt-get install -y no-such-package-h26b" in str(err.value)


def test_a_second_build_comes_from_the_cache(built: RootFS, context: Path) -> None:
    again = build_rootfs("python:3.11-slim-bookworm", [], context, cache=CACHE, progress=False)
    same = build_rootfs("python:3.11-slim-bookworm", [], context, cache=CACHE, progress=False)
    assert same.key == again.key and same.created == again.created


def test_the_attack_suite_holds_over_a_built_root_file_system(built: RootFS) -> None:
    """tests/test_terminal_attacks.py with every sandbox over the built system, as root and
    (its last test) again as an unprivileged uid from a 0700 copy of the tree."""
    env = {**os.environ, "HG_ATTACKS_ROOTFS": str(built.path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "-q",
            "tests/test_terminal_attacks.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    tail = done.stdout[-3000:]
    assert done.returncode == 0, tail
    assert " passed" in tail and "failed" not in tail, tail


def test_a_trixie_python_image_runs_the_sandbox_and_installs_like_the_image() -> None:
    """python:3.13 maps to trixie: the runner works on its Python 3.13, and pip / uv install
    into the system Python as in the python image (no EXTERNALLY-MANAGED marker)."""
    steps = [BuildStep("RUN", ("pip install six && pip install uv && uv pip install --system attrs",), 2)]
    built = build_rootfs("python:3.13-slim", steps, None, cache=CACHE, progress=False)
    root = make_episode_dir()
    sb = Sandbox(root, rootfs=built.path, env=built.env)
    try:
        res = sb.run(
            "python --version; python -c 'import six, attrs; print(\"ok\")'; cd /tmp", persistent=True
        )
        words = res.stdout.split()
        assert words[0] == "Python" and words[1].startswith("3.13.") and words[2:] == ["ok"], res.stdout
        assert sb.run("pwd", persistent=True).stdout == "/tmp\n"  # the persistent shell on 3.13's runner
    finally:
        sb.close()
        remove_episode_dir(root)


@pytest.mark.parametrize(
    ("image", "command", "expect"),
    [
        ("golang:1.24", "go version", "go version go1.24"),
        ("eclipse-temurin:21-jdk", "javac -version 2>&1", "javac 21"),
    ],
)
def test_a_toolchain_image_builds_with_debians_tool(image: str, command: str, expect: str) -> None:
    """A toolchain image maps to the suite with the nearest packaged tool, and the tool runs
    in an episode over the built system (under a Harbor task's address-space limit: the JVM
    reserves a quarter of the machine's memory at start, more than the 1 GiB built-in default)."""
    built = build_rootfs(image, [BuildStep("RUN", (command,), 2)], None, cache=CACHE, progress=False)
    root = make_episode_dir()
    limits = SandboxLimits(address_space=8 << 30, processes=512, timeout=30, cpu_seconds=30)
    sb = Sandbox(root, rootfs=built.path, env=built.env, limits=limits)
    try:
        assert sb.run(command).stdout.startswith(expect)
    finally:
        sb.close()
        remove_episode_dir(root)


# -- the Harbor backend over a real container runtime (Debian's podman, image never pulled) --

#: What podman needs on this machine kind: runc (crun fails: no CAP_SYS_RESOURCE for its
#: rlimits, no hybrid cgroups) and rlimits no higher than the caller's.
PODMAN = ["podman", "--runtime", "runc"]
PODMAN_RUN = ["--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1000:1000"]


class HarborInterfaceOverPodman:
    """Harbor's environment calls (``harbor/environments/base.py``) on a podman container
    of an image imported from a built root file system, as Harbor's docker and podman
    environments run one: ``sleep infinity`` as the main process, ``exec`` per command
    (``harbor/environments/docker/docker.py``: compose exec; here ``podman exec``)."""

    def __init__(self, image: str) -> None:
        import uuid

        self.image, self.name = image, f"hg-test-{uuid.uuid4().hex[:10]}"

    def _podman(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout)

    async def start(self, force_build: bool) -> None:
        done = self._podman("run", "-d", "--name", self.name, *PODMAN_RUN, self.image, "sleep", "infinity")
        assert done.returncode == 0, done.stderr

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None):
        from types import SimpleNamespace

        args = ["exec", "-w", cwd or "/app"]
        for key, value in (env or {}).items():
            args += ["-e", f"{key}={value}"]
        limit = timeout_sec or 60
        inner = ["timeout", "-s", "KILL", str(limit), "bash", "-c", command]
        try:
            done = self._podman(*args, self.name, *inner, timeout=limit + 30)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"Command timed out after {limit} seconds") from None
        if done.returncode == 137:
            raise RuntimeError(f"Command timed out after {limit} seconds")
        return SimpleNamespace(stdout=done.stdout, stderr=done.stderr, return_code=done.returncode)

    async def upload_dir(self, source_dir, target_dir) -> None:
        assert self._podman("cp", f"{source_dir}/.", f"{self.name}:{target_dir}").returncode == 0

    async def download_dir(self, source_dir, target_dir) -> None:
        Path(target_dir).mkdir(parents=True, exist_ok=True)
        assert self._podman("cp", f"{self.name}:{source_dir}/.", str(target_dir)).returncode == 0

    async def stop(self, delete: bool) -> None:
        self._podman("rm", "-f", "-t", "0", self.name)


@pytest.fixture(scope="session")
def podman_image(built: RootFS):
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (apt-get install podman runc)")
    image = f"localhost/hg-test-rootfs:{built.key[:12]}"
    tar = subprocess.Popen(["tar", "-C", str(built.path), "-c", "."], stdout=subprocess.PIPE)
    done = subprocess.run([*PODMAN, "import", "-", image], stdin=tar.stdout, capture_output=True, text=True)
    tar.wait()
    if done.returncode != 0:
        pytest.skip(f"podman cannot import an image here: {done.stderr.strip()[-300:]}")
    probe = subprocess.run(
        [*PODMAN, "run", "--rm", *PODMAN_RUN, image, "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        subprocess.run([*PODMAN, "rmi", image], capture_output=True)
        pytest.skip(f"podman cannot run a container here: {probe.stderr.strip()[-300:]}")
    yield image
    subprocess.run([*PODMAN, "rmi", "-f", image], capture_output=True)


def test_a_task_runs_through_the_harbor_backend_on_podman(podman_image: str, monkeypatch) -> None:
    import numpy as np

    from harness_gym.core.task import Action
    from harness_gym.envs.terminal.backends import HarborBackend
    from harness_gym.envs.terminal.tasks import TermSortUnique

    made: list[HarborInterfaceOverPodman] = []

    def make(root: Path) -> HarborInterfaceOverPodman:
        made.append(HarborInterfaceOverPodman(podman_image))
        return made[-1]

    monkeypatch.setattr(TermSortUnique, "backend", staticmethod(HarborBackend.factory(make)))
    task = TermSortUnique()
    try:
        task.reset(np.random.default_rng(5))
        backend = task._sandbox
        assert backend.run("id -un; head -1 /etc/os-release; jq --version").stdout.splitlines() == [
            "root",  # as in Harbor's containers
            'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"',
            "jq-1.6",
        ]
        assert backend.run("cd /tmp && export K=v", persistent=True).exit_code == 0
        assert backend.run("pwd; echo $K", persistent=True).stdout == "/tmp\nv\n"
        assert backend.run("sleep 20", timeout=2).timed_out
        task.step(Action.of("run", command=task.solution()))
        res = task.step(Action.of("submit"))
        assert res.terminated and res.success and res.reward == 1.0, task.verdict
    finally:
        task.close()
    untouched = TermSortUnique()
    try:
        untouched.reset(np.random.default_rng(5))
        res = untouched.step(Action.of("submit"))
        assert res.terminated and not res.success and res.reward == 0.0
    finally:
        untouched.close()
    gone = subprocess.run([*PODMAN, "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True)
    assert made and made[-1].name not in gone.stdout


def test_a_build_that_links_the_mount_points_away_writes_nothing_on_the_host() -> None:
    """``/opt`` made a link to ``/etc`` and ``/home`` to ``/``: the sandbox's mount points
    are made inside the built system, so the host's /etc and / get nothing."""
    assert not os.path.lexists("/etc/harness-gym")
    steps = [BuildStep("RUN", ("rm -rf /opt /home && ln -s /etc /opt && ln -s / /home",), 2)]
    built = build_rootfs("python:3.11-slim", steps, None, cache=CACHE, progress=False)
    assert not os.path.lexists("/etc/harness-gym") and not os.path.lexists("/agent")
    assert (built.path / "etc" / "harness-gym" / "runner.py").is_file()
    root = make_episode_dir()
    sb = Sandbox(root, rootfs=built.path)
    try:
        res = sb.run("readlink /opt; ls /opt/harness-gym; ls -d /home/agent; echo ok > /app/x && cat /app/x")
        assert res.stdout.split() == ["etc", "command-limits.sh", "runner.py", "/home/agent", "ok"], res
    finally:
        sb.close()
        remove_episode_dir(root)
