"""Root file systems from Dockerfile steps, fast part: FROM mapping, what cannot be built,
cache keys, the failing line, list/prune and the CLI (no real build: those are in
test_terminal_rootfs_build.py, marked slow)."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest

from harness_gym.cli import main
from harness_gym.cli.common import CLIExit
from harness_gym.envs.terminal import rootfs, rootfs_base, rootfs_cache, rootfs_steps
from harness_gym.envs.terminal.rootfs import BuildFailed, build_rootfs
from harness_gym.envs.terminal.rootfs_base import Unbuildable, map_base
from harness_gym.envs.terminal.rootfs_cache import RootFS, cache_dir, cache_key, list_rootfs, prune_rootfs
from harness_gym.envs.terminal.rootfs_steps import (
    BuildStep,
    build_environment,
    check_buildable,
    unbuildable_reason,
)
from harness_gym.envs.terminal.sandbox import Sandbox
from harness_gym.envs.terminal.sandbox_view import SandboxUnavailable, bwrap_problem, rootfs_problem

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "harbor"


def run_step(cmd: str, line: int = 0) -> BuildStep:
    return BuildStep("RUN", (cmd,), line, f"RUN {cmd}")


# -- FROM mapping ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "suite", "python"),
    [
        ("debian:bookworm-slim", "bookworm", "3.11"),
        ("debian:12", "bookworm", "3.11"),
        ("debian:trixie", "trixie", "3.13"),
        ("debian:11-slim", "bullseye", "3.9"),
        ("debian", "trixie", "3.13"),
        ("docker.io/library/debian:bookworm@sha256:" + "a" * 64, "bookworm", "3.11"),
        ("ubuntu:22.04", "bookworm", "3.11"),
        ("ubuntu:24.04", "trixie", "3.13"),
        ("ubuntu:jammy", "bookworm", "3.11"),
        ("python:3.11-slim", "bookworm", "3.11"),
        ("python:3.13-slim-trixie", "trixie", "3.13"),
        ("python:3.12-slim-bookworm", "bookworm", "3.11"),
        ("python:3.12", "trixie", "3.13"),
        ("python:3.10", "bookworm", "3.11"),
        ("python:3.9-bullseye", "bullseye", "3.9"),
        ("python:slim", "trixie", "3.13"),
        ("ghcr.io/laude-institute/t-bench/python-3-13:20250620", "trixie", "3.13"),
        ("ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest", "trixie", "3.13"),
        ("buildpack-deps:bookworm", "bookworm", "3.11"),
        ("public.ecr.aws/docker/library/python:3.11-slim", "bookworm", "3.11"),
        ("gcc:12", "bookworm", "3.11"),
        ("golang:1.23-bookworm", "trixie", "3.13"),
        ("eclipse-temurin:17.0.12_7-jdk-jammy", "bookworm", "3.11"),
        ("node:18", "bookworm", "3.11"),
    ],
)
def test_from_maps_to_the_nearest_debian_base(image: str, suite: str, python: str) -> None:
    base = map_base(image)
    assert (base.suite, base.python) == (suite, python)
    assert base.note.startswith(f"FROM {image} -> Debian {suite}")
    assert "python3" in base.packages


def test_the_note_says_when_python_is_only_the_nearest() -> None:
    assert "nearest to the asked 3.12" in map_base("python:3.12-slim").note
    assert "nearest" not in map_base("python:3.13").note
    assert "pip" in " ".join(map_base("python:3.13").packages)
    assert map_base("python:3.13").python_image and not map_base("debian:12").python_image
    assert "nearest Debian base" in map_base("ubuntu:24.04").note


@pytest.mark.parametrize(
    ("image", "suite", "package", "note"),
    [
        (
            "golang:1.22.7-bookworm",
            "trixie",
            "golang-go",
            "Go 1.24 (nearest to the image's 1.22; not the image's bookworm: its Go decides)",
        ),
        ("golang:bookworm", "bookworm", "golang-go", "with its Go 1.19"),
        ("public.ecr.aws/docker/library/golang:1.19", "bookworm", "golang-go", "with its Go 1.19"),
        ("gcc:13.3.0-bookworm", "trixie", "build-essential", "gcc 14 (nearest to the image's 13.3"),
        ("eclipse-temurin:17.0.12_7-jdk-jammy", "bookworm", "openjdk-17-jdk-headless", "Java 17"),
        ("openjdk:21-slim", "trixie", "openjdk-21-jdk-headless", "Java 21"),
        ("node:20.18.1-bookworm", "trixie", "nodejs", "Node.js 20 (not the image's bookworm"),
    ],
)
def test_a_toolchain_image_maps_to_the_suite_with_the_nearest_tool(
    image: str, suite: str, package: str, note: str
) -> None:
    base = map_base(image)
    assert base.suite == suite and package in base.packages and "build-essential" in base.packages
    assert note in base.note
    if "nearest" not in note:
        assert "nearest" not in base.note  # the suite ships the version the image names


@pytest.mark.parametrize(
    ("image", "reason"),
    [
        ("nvidia/cuda:12.2.0-runtime-ubuntu22.04", "registry image that maps to no Debian base"),
        ("mcr.microsoft.com/dotnet/sdk:8.0.405", "registry image that maps to no Debian base"),
        ("ghcr.io/someone/custom:1.0", "registry image that maps to no Debian base"),
        ("python:2.7", "Python 2 is not in any Debian suite"),
        ("scratch", "empty image"),
        ("ubuntu:16.04", "no Debian suite is mapped to Ubuntu '16.04'"),
        ("debian:buster", "no Debian suite 'buster'"),
    ],
)
def test_an_unmappable_base_is_unbuildable_with_its_reason(image: str, reason: str) -> None:
    with pytest.raises(Unbuildable, match=reason) as err:
        map_base(image)
    assert image in err.value.reason


# -- what cannot be built is rejected before anything is built ------------------------------


@pytest.mark.parametrize(
    ("command", "host"),
    [
        ("curl -LsSf https://astral.sh/uv/install.sh | sh", "astral.sh"),
        ("git clone https://github.com/org/repo /app/repo", "github.com"),
        ("wget -q http://example.com/data.tar.gz", "example.com"),
        ("git clone git@gitlab.com:org/repo.git", "gitlab.com"),
        ("pip install git+https://github.com/org/pkg", "github.com"),
        ("curl -fsSL https://deb.nodesource.com/setup_20.x | bash -", "deb.nodesource.com"),
    ],
)
def test_a_url_outside_the_package_registries_is_unbuildable(command: str, host: str) -> None:
    reason = unbuildable_reason("python:3.11", [run_step(command, 4)])
    assert reason is not None and f"fetches from {host}, outside the package registries" in reason
    assert command[:20] in reason


def test_urls_of_the_package_registries_are_fine(monkeypatch) -> None:
    monkeypatch.delenv(rootfs_steps.REGISTRY_HOSTS_VARIABLE, raising=False)
    steps = [
        run_step("apt-get update && apt-get install -y curl"),
        run_step("pip install --index-url https://pypi.org/simple numpy"),
        run_step("curl -O https://files.pythonhosted.org/packages/x/y.whl"),
        run_step("echo deb http://deb.debian.org/debian bookworm main > /etc/apt/sources.list"),
        run_step("npm install --registry https://registry.npmjs.org left-pad"),
    ]
    assert unbuildable_reason("debian:12", steps) is None
    monkeypatch.setenv(rootfs_steps.REGISTRY_HOSTS_VARIABLE, "example.com, mirror.internal")
    assert unbuildable_reason("debian:12", [run_step("wget https://cdn.example.com/x")]) is None


def test_gpu_multi_stage_and_context_escapes_are_unbuildable(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path.parent / "secret-h26b.txt").write_text("s")
    (tmp_path / "link").symlink_to(tmp_path.parent / "secret-h26b.txt")
    cases = {
        "needs a GPU": run_step("nvidia-smi && pip install torch"),
        "another build stage": BuildStep("COPY", ("--from=builder", "/out", "/app/"), 3),
        "is not in the build context": BuildStep("COPY", ("missing.txt", "/app/"), 5),
        "lies outside the build context": BuildStep("COPY", ("link", "/app/"), 6),
        "copies from a URL": BuildStep("COPY", ("https://example.org/x", "/app/")),
    }
    for reason, step in cases.items():
        with pytest.raises(Unbuildable, match=reason):
            check_buildable("debian:12", [step], tmp_path)
    assert check_buildable("debian:12", [BuildStep("COPY", ("*.txt", "/app/"))], tmp_path).suite == "bookworm"


def test_build_steps_are_checked() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        BuildStep("ADD", ("a", "b"))
    with pytest.raises(ValueError, match="needs arguments"):
        BuildStep("RUN", ())
    assert BuildStep("RUN", "echo hi").args == ("echo hi",)
    with pytest.raises(TypeError, match="BuildStep values"):
        check_buildable("debian:12", ["RUN echo hi"])  # type: ignore[list-item]


# -- cache keys --------------------------------------------------------------------------------


def test_cache_key_follows_base_steps_and_copied_bytes_only(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(rootfs_base.MIRROR_VARIABLE, raising=False)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.csv").write_text("1,2\n")
    (tmp_path / "unused.bin").write_bytes(b"\0" * 10)
    steps = [run_step("apt-get install -y jq", 2), BuildStep("COPY", ("data", "/app/data"), 3)]
    key = cache_key("python:3.11-slim", steps, tmp_path)
    assert len(key) == 32
    assert cache_key("python:3.11-slim", steps, tmp_path) == key
    # line numbers and texts do not matter, nor a context file no step copies
    moved = [BuildStep(s.kind, s.args, s.line + 10, "") for s in steps]
    assert cache_key("python:3.11-slim", moved, tmp_path) == key
    (tmp_path / "unused.bin").write_bytes(b"\1" * 10)
    assert cache_key("python:3.11-slim", steps, tmp_path) == key
    # the same Debian base: an image name that maps to the same recipe shares the key
    assert cache_key("python:3.11-slim-bookworm", steps, tmp_path) == key
    changed = {
        "base": cache_key("python:3.13", steps, tmp_path),
        "step": cache_key("python:3.11-slim", [run_step("apt-get install -y jq curl"), steps[1]], tmp_path),
        "order": cache_key("python:3.11-slim", steps[::-1], tmp_path),
    }
    (tmp_path / "data" / "x.csv").write_text("1,3\n")
    changed["bytes"] = cache_key("python:3.11-slim", steps, tmp_path)
    (tmp_path / "data" / "x.csv").chmod(0o755)
    changed["mode"] = cache_key("python:3.11-slim", steps, tmp_path)
    (tmp_path / "data" / "y.csv").write_text("")
    changed["new file"] = cache_key("python:3.11-slim", steps, tmp_path)
    monkeypatch.setenv(rootfs_base.MIRROR_VARIABLE, "http://ftp.debian.org/debian")
    changed["mirror"] = cache_key("python:3.11-slim", steps, tmp_path)
    assert len({key, *changed.values()}) == len(changed) + 1, changed


def test_cache_dir_follows_the_variables(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(rootfs_cache.CACHE_VARIABLE, str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv(rootfs_cache.CACHE_VARIABLE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "harness-gym" / "rootfs"
    monkeypatch.delenv("XDG_CACHE_HOME")
    expected = (
        Path("/var/cache/harness-gym/rootfs")
        if os.geteuid() == 0
        else Path.home() / ".cache" / "harness-gym" / "rootfs"
    )
    assert cache_dir() == expected


def test_the_build_follows_the_hosts_pip_index_and_ca_but_not_its_local_folders(
    monkeypatch, tmp_path
) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\nindex-url = https://mirror.example/simple\n"
        "extra-index-url = file:///opt/pypi/simple https://extra.example/simple\n"
        f"cert = {conf}\nfind-links = /opt/wheels\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CERT", "UV_DEFAULT_INDEX", "UV_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    env = build_environment()
    assert env["PIP_INDEX_URL"] == "https://mirror.example/simple"
    assert env["PIP_EXTRA_INDEX_URL"] == "https://extra.example/simple"
    assert env["UV_DEFAULT_INDEX"] == "https://mirror.example/simple"
    assert env["PIP_CERT"] == env["SSL_CERT_FILE"] == rootfs_steps.CA_IN_BUILD
    assert rootfs_steps.ca_bundle() == str(conf)
    assert "PIP_FIND_LINKS" not in env and not any("/opt/" in v for v in env.values())
    assert {"mirror.example", "extra.example"} <= rootfs_steps.registry_hosts()
    assert unbuildable_reason("debian:12", [run_step("curl https://mirror.example/simple/x/")]) is None


# -- building, with the step runner replaced (fault injection); real builds are slow tests ---


@pytest.fixture
def fake_base(monkeypatch, tmp_path: Path) -> Path:
    """A stand-in base root and a step runner that fails the step whose command says so."""
    base = tmp_path / "base-root"
    (base / "etc").mkdir(parents=True)
    (base / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\nweb:x:33:33::/var/www:/bin/sh\n")
    monkeypatch.setattr(rootfs, "build_base", lambda base_, cache=None, logbook=None: base)
    ran: list[str] = []

    def sandbox(self, command: str, *, context: bool = False, as_user: bool = True) -> int:
        ran.append(command)
        self.log.write(f"output of {command}\n")
        return 7 if "fail-here" in command else 0

    monkeypatch.setattr(rootfs._Builder, "sandbox", sandbox)
    monkeypatch.setattr(rootfs, "_require_tools", lambda: None)
    return base


def test_a_failing_step_names_its_dockerfile_line_and_caches_nothing(fake_base, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    steps = [
        BuildStep("ENV", ("A=1",), 2, "ENV A=1"),
        run_step("apt-get install -y fail-here-pkg", 5),
        run_step("echo never", 6),
    ]
    with pytest.raises(BuildFailed) as err:
        build_rootfs("debian:12", steps, None, cache=cache, progress=False)
    failed = err.value
    assert (failed.step_index, failed.line_number) == (2, 5)
    assert failed.line == "RUN apt-get install -y fail-here-pkg"
    assert "output of apt-get install -y fail-here-pkg" in failed.log_tail
    assert "step 2 (line 5: RUN apt-get install -y fail-here-pkg)" in str(failed)
    key = cache_key("debian:12", steps, None)
    assert not (cache / key).exists() and list_rootfs(cache) == []
    assert not [p for p in cache.iterdir() if p.name.startswith(".tmp-")]
    log = (cache / f"{key}.failed.log").read_text()
    assert "# step 2: RUN apt-get install -y fail-here-pkg" in log and "step 3" not in log
    assert "FROM debian:12 -> Debian bookworm" in log


def test_a_built_file_system_is_cached_and_records_the_dockerfile(fake_base, tmp_path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    steps = [
        BuildStep("ENV", ("PATH=/opt/venv/bin:/usr/bin", "MODE=test"), 2),
        BuildStep("WORKDIR", ("/srv/work",), 3),
        BuildStep("USER", ("web",), 4),
        run_step("make all", 5),
    ]
    built = build_rootfs("python:3.11-slim", steps, None, cache=cache, progress=False)
    assert built.env == {"PATH": "/opt/venv/bin:/usr/bin", "MODE": "test"}
    assert (built.workdir, built.user) == ("/srv/work", "web")
    assert built.base["note"].startswith("FROM python:3.11-slim -> Debian bookworm")
    log = (built.folder / "build.log").read_text()
    assert log.count("# step") == 4
    # the mount points are made in the build sandbox, after the steps (a real build: slow tests)
    assert "output of set -e; for d in '/app' '/home/agent' '/opt/harness-gym'" in log.split("# step 4")[1]
    # the second build is the cache's: nothing runs
    monkeypatch.setattr(rootfs._Builder, "step", lambda *a: pytest.fail("rebuilt"))
    again = build_rootfs("python:3.11-slim", steps, None, cache=cache, progress=False)
    assert again.key == built.key and again.path == built.path
    assert [r.key for r in list_rootfs(cache)] == [built.key]


def test_user_must_exist_in_the_built_passwd(fake_base, tmp_path: Path) -> None:
    steps = [BuildStep("USER", ("nobody-here",), 9, "USER nobody-here")]
    with pytest.raises(BuildFailed, match="line 9: USER nobody-here.*no user 'nobody-here'"):
        build_rootfs("debian:12", steps, None, cache=tmp_path / "c", progress=False)


def _fake_built(cache: Path, key: str, used_days_ago: float) -> None:
    folder = cache / key
    (folder / "root").mkdir(parents=True)
    meta = RootFS(key=key, path=folder / "root", image="debian:12", created=time.time() - 86400 * 100)
    (folder / "meta.json").write_text(json.dumps(meta.meta()))
    (folder / "last-used").touch()
    stamp = time.time() - used_days_ago * 86400
    os.utime(folder / "last-used", (stamp, stamp))


def test_prune_removes_what_was_asked_and_leftovers_only_otherwise(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _fake_built(cache, "old" + "0" * 29, 40)
    _fake_built(cache, "new" + "0" * 29, 1)
    (cache / ".tmp-dead-999999999").mkdir()
    (cache / f".tmp-live-{os.getpid()}").mkdir()
    (cache / "x.failed.log").write_text("log")
    (cache / "bases" / "b1" / "root").mkdir(parents=True)
    assert prune_rootfs(cache, unused_for=float("inf")) == [".tmp-dead-999999999", "x.failed.log"]
    assert prune_rootfs(cache, unused_for=30 * 86400) == ["old" + "0" * 29]
    assert [r.key[:3] for r in list_rootfs(cache)] == ["new"]
    assert prune_rootfs(cache, bases=True) == ["new" + "0" * 29, "bases/b1"]
    assert (cache / f".tmp-live-{os.getpid()}").is_dir()  # a build in progress is kept


def test_cli_lists_builds_and_prunes(tmp_path: Path, fake_base) -> None:
    cache = tmp_path / "cache"
    _fake_built(cache, "abc" + "0" * 29, 40)
    out = io.StringIO()
    assert main(["rootfs", "--cache", str(cache), "list"], out=out) == 0
    assert "abc000000000" in out.getvalue() and "debian:12" in out.getvalue()
    out = io.StringIO()
    main(["rootfs", "--cache", str(cache), "list", "--json"], out=out)
    assert json.loads(out.getvalue().splitlines()[0])["key"] == "abc" + "0" * 29
    out = io.StringIO()
    assert (
        main(
            [
                "rootfs",
                "--cache",
                str(cache),
                "build",
                "--from",
                "debian:12",
                "--run",
                "true",
                "--no-progress",
            ],
            out=out,
        )
        == 0
    )
    assert "bookworm" in out.getvalue() and len(list_rootfs(cache)) == 2
    out = io.StringIO()
    assert main(["rootfs", "--cache", str(cache), "prune", "--unused-days", "30"], out=out) == 0
    assert "removed abc" in out.getvalue() and len(list_rootfs(cache)) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["build", "--from", "nvidia/cuda:12.0-base"], "maps to no Debian base"),
        (
            ["build", "--from", "python:3.11", "--run", "curl https://astral.sh/uv/install.sh | sh"],
            "astral.sh",
        ),
        (["build", "--run", "true"], "--run needs --from IMAGE"),
        (["build"], "give Harbor task folders"),
        (["prune", "--all", "--unused-days", "3"], "not both"),
        (["build", str(EXAMPLES / "unsupported-postgres")], "a service"),
        (["build", str(EXAMPLES)], "no environment/Dockerfile"),
    ],
)
def test_cli_errors_are_one_line(argv: list[str], message: str, tmp_path: Path) -> None:
    with pytest.raises(CLIExit) as err:
        main(["rootfs", "--cache", str(tmp_path), *argv], out=io.StringIO())
    assert message in str(err.value) and "\n" not in str(err.value)


# -- the sandbox over a root file system: what it must hold ---------------------------------


@pytest.mark.skipif(bwrap_problem() is not None, reason="bubblewrap unusable")
def test_a_sandbox_refuses_a_root_without_its_runner_or_mount_points(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    (bare / "usr" / "bin").mkdir(parents=True)
    assert "lacks /usr/bin/python3" in (rootfs_problem(bare) or "")
    with pytest.raises(SandboxUnavailable, match="lacks /usr/bin/python3"):
        Sandbox(tmp_path / "ep", rootfs=bare)
    assert "is not a folder" in (rootfs_problem(tmp_path / "nope") or "")
    for rel in (
        "usr/bin/python3",
        "bin/bash",
        "opt/harness-gym/runner.py",
        "opt/harness-gym/command-limits.sh",
    ):
        (bare / rel).parent.mkdir(parents=True, exist_ok=True)
        (bare / rel).touch()
    assert "lacks /home/agent" in (rootfs_problem(bare) or "")
    (bare / "home" / "agent").mkdir(parents=True)
    assert rootfs_problem(bare) is None
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    os.rename(bare, locked / "bare")
    assert "cannot be entered by the sandbox's own uid" in (rootfs_problem(locked / "bare", uid=12345) or "")


def test_a_step_that_hangs_silently_is_killed_at_its_timeout(tmp_path: Path) -> None:
    logbook = rootfs._Log(tmp_path / "build.log")
    try:
        assert rootfs._run_logged(["sh", "-c", "echo started; sleep 60 & sleep 60"], logbook, 0.5) == 124
        assert rootfs._run_logged(["sh", "-c", "echo fine; exit 3"], logbook, 30) == 3
    finally:
        logbook.close()
    text = (tmp_path / "build.log").read_text()
    assert "started\n\n(timed out after 0.5 s)\nfine\n" == text


def test_two_processes_building_the_same_key_build_it_once(fake_base, tmp_path: Path, monkeypatch) -> None:
    import multiprocessing

    cache, record = tmp_path / "cache", tmp_path / "steps-run.txt"

    def step(self, index: int, step: BuildStep) -> None:
        with open(record, "a") as f:
            f.write(f"{os.getpid()} {index}\n")
        time.sleep(0.3)  # long enough for the other process to arrive while this one builds

    monkeypatch.setattr(rootfs._Builder, "step", step)
    steps = [run_step("make one", 2), run_step("make two", 3)]

    def build(queue) -> None:
        queue.put(build_rootfs("debian:12", steps, None, cache=cache, progress=False).key)

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=build, args=(queue,)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    keys = {queue.get(timeout=5), queue.get(timeout=5)}
    assert len(keys) == 1 and [r.key for r in list_rootfs(cache)] == list(keys)
    lines = record.read_text().split("\n")[:-1]
    assert len(lines) == 2 and len({line.split()[0] for line in lines}) == 1, lines


def test_rootfs_checks_resolve_links_inside_the_root_never_on_the_host(tmp_path: Path) -> None:
    from harness_gym.envs.terminal.sandbox_view import _exists_within

    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "python3.11").touch()
    (root / "usr" / "bin" / "python3").symlink_to("python3.11")
    (root / "bin").symlink_to("usr/bin")
    (root / "home").symlink_to("/")  # an absolute link: / of the root, not of the host
    (root / "agent").mkdir()
    assert _exists_within(root, "usr/bin/python3") and _exists_within(root, "bin/python3")
    assert _exists_within(root, "home/agent")
    assert not _exists_within(root, "home/etc/passwd")  # the host's /etc/passwd does not count
    (root / "loop").symlink_to("loop")
    assert not _exists_within(root, "loop/x")
