"""Root file systems built from a Dockerfile's steps, without a container registry.

``build_rootfs(base, steps, context)`` makes the file system a task's ``environment/Dockerfile``
describes and returns a :class:`RootFS` whose ``path`` a :class:`~.sandbox.Sandbox` runs over
(read-only, with a fresh writable ``/app``):

* ``FROM`` is mapped to the nearest Debian base (:func:`map_base`: ``debian:*``, ``ubuntu:*``,
  ``python:X.Y*``, ``buildpack-deps:*``, the toolchain images ``gcc``, ``golang``, ``node``,
  ``eclipse-temurin`` and ``openjdk`` (:data:`TOOLCHAINS`: the suite whose own package of the
  tool is nearest) and Terminal-Bench's ``t-bench/python-3-13`` / ``ubuntu-24-04`` images);
  the base is made with ``mmdebstrap`` from Debian's package registry (nothing is pulled
  from a container registry) and cached on its own;
* ``RUN`` lines run at build time as root (Docker's default capabilities only) in a
  bubblewrap sandbox over the file system being built, sharing the host's network, which
  reaches only the package registries (apt, pip and uv are pointed at the host's mirror and
  CA bundle); a ``RUN`` naming a URL outside the package registries is :class:`Unbuildable`
  before anything is built;
* ``COPY`` copies build-context files in (inside the build sandbox, so no symlink the build
  made can point a copy at the host); ``ENV``, ``WORKDIR`` and ``USER`` apply to later steps
  and are recorded for episodes (:attr:`RootFS.env`, ``workdir``, ``user``);
* the result is cached by content hash (base, steps, the bytes of every copied file) under
  :func:`cache_dir`; a failing step raises :class:`BuildFailed` naming its Dockerfile line.

The Dockerfile itself is parsed elsewhere (``envs/terminal/dockerfile.py``); this module
takes :class:`BuildStep` values.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from configparser import ConfigParser
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Bumped whenever what a given recipe builds changes (it is part of every cache key).
RECIPE_VERSION = 1
STEP_KINDS = ("RUN", "COPY", "ENV", "WORKDIR", "USER")
#: Overrides the cache folder (default: ``$XDG_CACHE_HOME/harness-gym/rootfs``).
CACHE_VARIABLE = "HARNESS_GYM_ROOTFS_CACHE"
#: Overrides the Debian mirror the bases and ``apt-get`` use.
MIRROR_VARIABLE = "HARNESS_GYM_DEBIAN_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: Extra host names (comma-separated) a ``RUN`` may name in a URL.
REGISTRY_HOSTS_VARIABLE = "HARNESS_GYM_REGISTRY_HOSTS"
#: Package registries a ``RUN`` may fetch from (the Debian mirror and pip's index are added).
REGISTRY_HOSTS = (
    "deb.debian.org",
    "security.debian.org",
    "ftp.debian.org",
    "pypi.org",
    "pypi.python.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
)
#: Debian suites a base can be: (version, Python 3 minor it ships).
DEBIAN_SUITES = {"bullseye": ("11", "3.9"), "bookworm": ("12", "3.11"), "trixie": ("13", "3.13")}
DEBIAN_ALIASES = {
    "11": "bullseye",
    "12": "bookworm",
    "13": "trixie",
    "latest": "trixie",
    "stable": "trixie",
    "oldstable": "bookworm",
    "testing": "trixie",
    "sid": "trixie",
    "unstable": "trixie",
}
#: Ubuntu releases and the Debian suite whose packages are nearest (Ubuntu imports Debian's).
UBUNTU_TO_DEBIAN = {
    "18.04": "bullseye",
    "bionic": "bullseye",
    "20.04": "bullseye",
    "focal": "bullseye",
    "22.04": "bookworm",
    "jammy": "bookworm",
    "24.04": "trixie",
    "noble": "trixie",
    "24.10": "trixie",
    "oracular": "trixie",
    "25.04": "trixie",
    "plucky": "trixie",
    "25.10": "trixie",
    "questing": "trixie",
    "latest": "trixie",
    "rolling": "trixie",
}
#: What every base holds beyond Debian's ``apt`` variant (the sandbox's runner needs python3).
BASE_PACKAGES = ("python3", "ca-certificates")
#: What a ``python:X`` image adds: pip, venv and ``python`` on the path.
PYTHON_PACKAGES = ("python3-pip", "python3-venv", "python-is-python3")
BUILDPACK_PACKAGES = ("curl", "wget", "gnupg", "git", "build-essential", "procps")


@dataclass(frozen=True)
class Toolchain:
    """An official language image Debian also packages: what each suite ships of it."""

    tool: str  # what the build log calls it
    versions: Mapping[str, str]  # suite -> the version of the tool that suite ships
    packages: Mapping[str, tuple[str, ...]]  # suite -> what to install for it


def _same(packages: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    return {suite: packages for suite in DEBIAN_SUITES}


#: ``FROM gcc|golang|eclipse-temurin|openjdk|node:VERSION`` -> the suite whose own package of
#: the tool is nearest to VERSION (each image is buildpack-deps plus the tool).
TOOLCHAINS = {
    "gcc": Toolchain("gcc", {"bullseye": "10", "bookworm": "12", "trixie": "14"}, _same(BUILDPACK_PACKAGES)),
    "golang": Toolchain(
        "Go",
        {"bullseye": "1.15", "bookworm": "1.19", "trixie": "1.24"},
        _same((*BUILDPACK_PACKAGES, "golang-go")),
    ),
    "node": Toolchain(
        "Node.js",
        {"bullseye": "12", "bookworm": "18", "trixie": "20"},
        _same((*BUILDPACK_PACKAGES, "nodejs", "npm")),
    ),
    "eclipse-temurin": Toolchain(
        "Java",
        {"bullseye": "11", "bookworm": "17", "trixie": "21"},
        {
            suite: (*BUILDPACK_PACKAGES, f"openjdk-{java}-jdk-headless")
            for suite, java in {"bullseye": "11", "bookworm": "17", "trixie": "21"}.items()
        },
    ),
}
TOOLCHAINS["openjdk"] = TOOLCHAINS["eclipse-temurin"]
#: Capabilities a ``RUN`` keeps (Docker's default set); everything else is dropped.
BUILD_CAPS = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
)
#: Docker's default ``PATH`` of an image.
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Where the build sandbox sees the host's CA bundle and the build context.
CA_IN_BUILD = "/run/harness-gym/ca-certificates.crt"
CONTEXT_IN_BUILD = "/run/harness-gym/context"
#: Mount points an episode's sandbox binds over (made in every built file system).
MOUNT_POINTS = ("opt/harness-gym/runner.py", "opt/harness-gym/command-limits.sh")
MOUNT_DIRS = ("app", "home/agent", "opt/harness-gym")
STEP_TIMEOUT = 3600.0
LOG_TAIL_CHARS = 3000


class Unbuildable(ValueError):
    """A task's environment needs what cannot be had here; ``reason`` says what."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BuildFailed(RuntimeError):
    """A build step failed: ``step_index`` (0 is the base), the Dockerfile ``line`` as
    written, its ``line_number`` (0 when unknown) and the tail of the build log."""

    def __init__(self, step_index: int, line: str, log_tail: str, line_number: int = 0) -> None:
        where = f"line {line_number}: " if line_number else ""
        super().__init__(f"build failed at step {step_index} ({where}{line}): {log_tail.strip()[-600:]}")
        self.step_index, self.line, self.log_tail, self.line_number = step_index, line, log_tail, line_number


@dataclass(frozen=True)
class BuildStep:
    """One Dockerfile step: ``kind`` (RUN, COPY, ENV, WORKDIR, USER) and its arguments.

    RUN: ``(shell command,)``; COPY: ``(source, ..., destination)`` with sources relative to
    the build context (globs allowed; ``--chown=U:G`` kept); ENV: ``("KEY=VALUE", ...)``;
    WORKDIR: ``(path,)``; USER: ``(user[:group],)``. Arguments are taken as given: the
    Dockerfile reader has already unquoted them and expanded ``$VAR`` (ENV, ARG).
    ``line`` is the Dockerfile line number and ``text`` the line as written (for errors)."""

    kind: str
    args: tuple[str, ...]
    line: int = 0
    text: str = ""

    def __post_init__(self) -> None:
        if self.kind not in STEP_KINDS:
            raise ValueError(f"BuildStep kind must be one of {STEP_KINDS}, not {self.kind!r}")
        if isinstance(self.args, str):
            object.__setattr__(self, "args", (self.args,))
        object.__setattr__(self, "args", tuple(str(a) for a in self.args))
        if not self.args:
            raise ValueError(f"a {self.kind} step needs arguments")

    @property
    def shown(self) -> str:
        """The step as the Dockerfile wrote it (or a rendering of it)."""
        return self.text or f"{self.kind} {' '.join(self.args)}"


@dataclass(frozen=True)
class Base:
    """The Debian base a ``FROM`` image maps to; ``note`` says how (for the build log)."""

    image: str
    suite: str
    python: str
    packages: tuple[str, ...]
    note: str
    python_image: bool = False

    def recipe(self, mirror: str) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "packages": sorted(self.packages),
            "python_image": self.python_image,
            "mirror": mirror,
            "variant": "apt",
            "version": RECIPE_VERSION,
        }


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


# -- FROM mapping ------------------------------------------------------------------------


def _split_image(image: str) -> tuple[str, str]:
    """(repository, tag) of an image reference, registry host and digest dropped."""
    ref = image.strip().split("@", 1)[0]
    name, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]  # a registry host
    if parts[:2] == ["docker", "library"]:  # a mirror of Docker Hub: public.ecr.aws/docker/library/X
        parts = parts[2:]
    if parts and parts[0] == "library":
        parts = parts[1:]
    return "/".join(parts).lower(), (tag or "latest").lower()


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def _toolchain_base(image: str, chain: Toolchain, tag: str, packages: tuple[str, ...]) -> Base:
    """The suite whose own package of the tool is nearest to the tag's version (ties: the newer);
    a tag without a version takes its suite suffix, else the newest suite."""
    found = re.match(r"(\d+(?:\.\d+)?)", tag)
    named = next((s for s in DEBIAN_SUITES if s in tag.split("-")), None) or next(
        (UBUNTU_TO_DEBIAN[w] for w in tag.split("-") if w in UBUNTU_TO_DEBIAN), None
    )
    if found:
        want = _version_key(found.group(1))
        suite = min(
            chain.versions,
            key=lambda s: (
                tuple(abs(a - b) for a, b in zip(_version_key(chain.versions[s]), want)),
                -int(DEBIAN_SUITES[s][0]),
            ),
        )
    else:
        suite = named or "trixie"
    have = chain.versions[suite]
    note = f"FROM {image} -> Debian {suite} ({DEBIAN_SUITES[suite][0]}) with its {chain.tool} {have}"
    said = []
    if found and _version_key(found.group(1))[: len(_version_key(have))] != _version_key(have):
        said.append(f"nearest to the image's {found.group(1)}")
    if named and named != suite:
        said.append(f"not the image's {named}: its {chain.tool} decides")
    if said:
        note += f" ({'; '.join(said)})"
    return Base(image, suite, DEBIAN_SUITES[suite][1], packages + chain.packages[suite], note)


def _python_suite(minor: str) -> str:
    """The Debian suite whose Python 3 is nearest to ``3.<minor>`` (ties: the newer)."""
    want = int(minor)
    return min(
        DEBIAN_SUITES,
        key=lambda s: (abs(int(DEBIAN_SUITES[s][1].split(".")[1]) - want), -int(DEBIAN_SUITES[s][0])),
    )


def map_base(image: str) -> Base:
    """The Debian base nearest to ``image`` (a ``FROM`` argument), or :class:`Unbuildable`."""
    repo, tag = _split_image(image)
    short = repo.rsplit("/", 1)[-1]
    packages = BASE_PACKAGES
    suffix_suite = next((s for s in DEBIAN_SUITES if s in tag.split("-")), None)
    if repo == "scratch":
        raise Unbuildable("FROM scratch: an empty image has no Debian base to map to")
    tb = re.fullmatch(r"(python|ubuntu|debian)-(\d+)-(\d+)", short) if "t-bench" in repo else None
    if tb:  # Terminal-Bench's own base images: ghcr.io/laude-institute/t-bench/python-3-13
        repo, tag = tb.group(1), f"{tb.group(2)}.{tb.group(3)}"
    if repo == "debian":
        name = tag.split("-")[0]
        suite = name if name in DEBIAN_SUITES else DEBIAN_ALIASES.get(name.split(".")[0])
        if suite is None:
            raise Unbuildable(
                f"FROM {image}: no Debian suite {name!r} to build (known: {', '.join(DEBIAN_SUITES)})"
            )
        note = f"FROM {image} -> Debian {suite} ({DEBIAN_SUITES[suite][0]})"
        return Base(image, suite, DEBIAN_SUITES[suite][1], packages, note)
    if repo == "ubuntu":
        name = tag.split("-")[0]
        suite = UBUNTU_TO_DEBIAN.get(name)
        if suite is None:
            raise Unbuildable(f"FROM {image}: no Debian suite is mapped to Ubuntu {name!r}")
        note = (
            f"FROM {image} -> Debian {suite} ({DEBIAN_SUITES[suite][0]}), the nearest Debian base "
            "(Ubuntu's packages come from Debian; most names match)"
        )
        return Base(image, suite, DEBIAN_SUITES[suite][1], packages, note)
    if repo == "python":
        found = re.match(r"(\d+)(?:\.(\d+))?", tag)
        if tag in ("latest", "slim", *DEBIAN_SUITES) or tag.startswith(("slim-", "bookworm", "trixie")):
            found = None
            minor = DEBIAN_SUITES[suffix_suite or "trixie"][1].split(".")[1]
        elif not found:
            raise Unbuildable(f"FROM {image}: cannot read a Python version from the tag {tag!r}")
        else:
            if found.group(1) != "3":
                raise Unbuildable(f"FROM {image}: Python {found.group(1)} is not in any Debian suite")
            minor = found.group(2) or DEBIAN_SUITES["trixie"][1].split(".")[1]
        suite = suffix_suite or _python_suite(minor)
        have = DEBIAN_SUITES[suite][1]
        note = f"FROM {image} -> Debian {suite} ({DEBIAN_SUITES[suite][0]}) with its Python {have}"
        if have != f"3.{minor}":
            note += f" (nearest to the asked 3.{minor})"
        return Base(image, suite, have, packages + PYTHON_PACKAGES, note, python_image=True)
    if repo == "buildpack-deps":
        name = tag.split("-")[0]
        suite = name if name in DEBIAN_SUITES else DEBIAN_ALIASES.get(name) or UBUNTU_TO_DEBIAN.get(name)
        if suite is None:
            raise Unbuildable(f"FROM {image}: no Debian suite {name!r} to build")
        note = f"FROM {image} -> Debian {suite} with curl, wget, git, build-essential"
        return Base(image, suite, DEBIAN_SUITES[suite][1], packages + BUILDPACK_PACKAGES, note)
    if repo in TOOLCHAINS:
        return _toolchain_base(image, TOOLCHAINS[repo], tag, packages)
    raise Unbuildable(
        f"FROM {image}: a registry image that maps to no Debian base (nothing is pulled from a "
        "container registry; debian, ubuntu, python, buildpack-deps, gcc, golang, node, "
        "eclipse-temurin and openjdk images are built from Debian's packages)"
    )


# -- what cannot be built --------------------------------------------------------------------

URL = re.compile(r"\b(?:https?|ftp|git|ssh)://(?:[^@/\s'\"]+@)?([A-Za-z0-9.-]+)", re.IGNORECASE)
SCP_URL = re.compile(r"\bgit@([A-Za-z0-9.-]+):")


def registry_hosts() -> set[str]:
    """Host names a ``RUN`` may name in a URL: the package registries reachable here."""
    hosts = set(REGISTRY_HOSTS)
    for url in (debian_mirror(), *pip_indexes()):
        host = URL.search(url)
        if host:
            hosts.add(host.group(1).lower())
    extra = os.environ.get(REGISTRY_HOSTS_VARIABLE, "")
    hosts.update(h.strip().lower() for h in extra.split(",") if h.strip())
    return hosts


def unbuildable_reason(image: str, steps: Sequence[BuildStep], context: Path | None = None) -> str | None:
    """Why ``image`` + ``steps`` cannot be built here (``None`` when they can)."""
    try:
        check_buildable(image, steps, context)
    except Unbuildable as err:
        return err.reason
    return None


def check_buildable(image: str, steps: Sequence[BuildStep], context: Path | None = None) -> Base:
    """The mapped base, or :class:`Unbuildable` saying what the steps need that cannot be had:
    a base image with no Debian mapping, a URL outside the package registries, a copy from
    another build stage or from outside the context."""
    base = map_base(image)
    allowed = registry_hosts()
    for step in steps:
        if not isinstance(step, BuildStep):
            raise TypeError(f"steps must be BuildStep values, not {type(step).__name__}")
        if step.kind == "RUN":
            for pattern in (URL, SCP_URL):
                for found in pattern.finditer(step.args[0]):
                    host = found.group(1).lower().rstrip(".")
                    if host not in allowed and not any(host.endswith("." + h) for h in allowed):
                        raise Unbuildable(
                            f"{step.shown}: fetches from {host}, outside the package registries "
                            f"({', '.join(sorted(allowed))}); set {REGISTRY_HOSTS_VARIABLE} "
                            "if it is reachable"
                        )
            if re.search(r"\bnvidia-smi\b|\bcuda-toolkit\b", step.args[0]):
                raise Unbuildable(f"{step.shown}: needs a GPU, which the sandbox does not have")
        elif step.kind == "COPY":
            if any(a.startswith("--from") for a in step.args):
                raise Unbuildable(
                    f"{step.shown}: copies from another build stage (multi-stage builds are not built)"
                )
            if context is not None:
                _copy_sources(step, context)
    return base


def _copy_sources(step: BuildStep, context: Path) -> list[str]:
    """The context-relative paths a COPY's sources match (globs expanded), checked."""
    sources = [a for a in step.args[:-1] if not a.startswith("--")]
    if not sources or step.args[-1].startswith("--"):
        raise Unbuildable(f"{step.shown}: COPY needs a source and a destination")
    base = context.resolve()
    out = []
    for source in sources:
        if "://" in source:
            raise Unbuildable(f"{step.shown}: copies from a URL ({source}), which needs the network")
        matches = (
            sorted(glob.glob(glob.escape(str(base)) + "/" + source.lstrip("/")))
            if any(c in source for c in "*?[")
            else [str(base / source.lstrip("/"))]
        )
        if not matches or not all(os.path.lexists(m) for m in matches):
            raise Unbuildable(f"{step.shown}: {source} is not in the build context")
        for match in matches:
            real = Path(match).resolve()
            if not real.is_relative_to(base):
                raise Unbuildable(f"{step.shown}: {source} lies outside the build context")
            out.append(os.path.relpath(match, base))
    return out


# -- host configuration the build follows ----------------------------------------------------


def debian_mirror() -> str:
    return os.environ.get(MIRROR_VARIABLE) or DEFAULT_MIRROR


def _pip_config() -> ConfigParser:
    """pip's configuration files as pip reads them (site, XDG, user, ``PIP_CONFIG_FILE``)."""
    config = ConfigParser(strict=False, interpolation=None)
    dirs = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":")
    home = Path.home()
    files = ["/etc/pip.conf", *(os.path.join(d, "pip", "pip.conf") for d in dirs)]
    files += [str(home / ".pip" / "pip.conf"), str(home / ".config" / "pip" / "pip.conf")]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(os.environ["PIP_CONFIG_FILE"])
    with contextlib.suppress(Exception):
        config.read(files)
    return config


def _pip_setting(config: ConfigParser, name: str) -> str | None:
    env = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if env:
        return env
    for section in ("install", "global"):
        if config.has_option(section, name):
            return config.get(section, name)
    return None


def pip_indexes() -> list[str]:
    config = _pip_config()
    out = []
    for name in ("index-url", "extra-index-url"):
        value = _pip_setting(config, name)
        if value:
            out += [v for v in value.split() if re.match(r"https?://", v)]
    return out


def ca_bundle() -> str | None:
    """The host's CA bundle (pip's ``cert``, ``SSL_CERT_FILE`` or Debian's), for the build's
    fetches: a registry mirror or a TLS proxy may need the host's own CA."""
    config = _pip_config()
    for candidate in (
        _pip_setting(config, "cert"),
        os.environ.get("SSL_CERT_FILE"),
        os.environ.get("REQUESTS_CA_BUNDLE"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and os.path.isfile(candidate):
            return candidate
    return None


def build_environment() -> dict[str, str]:
    """Variables every build step gets beyond the Dockerfile's own: the host's package index
    and CA bundle for pip, uv, curl, git and requests (nothing else of the host's)."""
    env = {"DEBIAN_FRONTEND": "noninteractive", "PIP_ROOT_USER_ACTION": "ignore"}
    config = _pip_config()
    for name in ("index-url", "extra-index-url", "trusted-host"):
        value = _pip_setting(config, name)
        if value and name != "trusted-host":  # the host's own folders are not in the build
            value = " ".join(v for v in value.split() if re.match(r"https?://", v))
        if value:
            env["PIP_" + name.upper().replace("-", "_")] = value
    for name in ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_EXTRA_INDEX_URL", "UV_INDEX"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    if "PIP_INDEX_URL" in env and not any(k.startswith("UV_") for k in env):
        env["UV_DEFAULT_INDEX"] = env["PIP_INDEX_URL"]
    if ca_bundle():
        for name in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"):
            env[name] = CA_IN_BUILD
    return env


# -- the cache -------------------------------------------------------------------------------


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
            for rel in _copy_sources(step, context):
                digest.update(rel.encode() + b"\0")
                _hash_tree(Path(context) / rel, digest)
    return digest.hexdigest()[:32]


def _base_key(base: Base) -> str:
    return hashlib.sha256(json.dumps(base.recipe(debian_mirror()), sort_keys=True).encode()).hexdigest()[:32]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
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
        _remove(folder)
        removed.append(folder.name)
    if bases and (cache / "bases").is_dir():
        for folder in sorted((cache / "bases").iterdir()):
            _remove(folder)
            removed.append("bases/" + folder.name)
    return removed


def _remove(path: Path) -> None:
    from harness_gym.envs.terminal.episode_dirs import remove_tree

    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    else:
        path.unlink(missing_ok=True)


# -- building --------------------------------------------------------------------------------


class _Log:
    """The build log: a file, the module's logger, and the tail kept for errors."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file = open(path, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
        self.tail = ""

    def say(self, text: str) -> None:
        log.info("%s", text)
        self.write(f"# {text}\n")

    def write(self, text: str) -> None:
        self.file.write(text)
        self.file.flush()
        self.tail = (self.tail + text)[-LOG_TAIL_CHARS:]

    def close(self) -> None:
        self.file.close()


def _run_logged(argv: list[str], logbook: _Log, timeout: float, env: Mapping[str, str] | None = None) -> int:
    """Run ``argv`` with its output into the log; its exit code (124 on timeout)."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(env) if env is not None else {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
        cwd="/",
        start_new_session=True,
    )
    assert proc.stdout is not None
    expired: list[bool] = []

    def kill() -> None:  # also when the step hangs without printing anything
        expired.append(True)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, 9)

    timer = threading.Timer(timeout, kill)
    timer.daemon = True
    timer.start()
    try:
        for raw in proc.stdout:
            logbook.write(raw.decode("utf-8", "replace"))
        code = proc.wait()
    finally:
        timer.cancel()
    if expired:
        logbook.write(f"\n(timed out after {timeout:g} s)\n")
        return 124
    return code


def _require_tools() -> None:
    if os.geteuid() != 0:
        raise Unbuildable(
            "building a root file system needs root (mmdebstrap --mode=root, and RUN steps as root "
            "with Docker's capabilities); run `harness-gym rootfs build` as root, then use the cache "
            f"({CACHE_VARIABLE}) as any user"
        )
    for tool, package in (("mmdebstrap", "mmdebstrap"), ("bwrap", "bubblewrap")):
        if shutil.which(tool) is None:
            raise Unbuildable(
                f"building a root file system needs `{tool}`: apt-get install {package} "
                "(scripts/system-deps.sh)"
            )


def build_base(base: Base, cache: Path | None = None, logbook: _Log | None = None) -> Path:
    """The root of ``base`` made with mmdebstrap (cached under ``bases/``)."""
    _require_tools()
    folder = Path(cache or cache_dir()) / "bases" / _base_key(base)
    root = folder / "root"
    with _locked(folder.parent / f".lock-{folder.name}"):
        if (folder / "recipe.json").is_file() and root.is_dir():
            return root
        tmp = folder.parent / f".tmp-{folder.name}-{os.getpid()}"
        _remove(tmp)
        tmp.mkdir(parents=True)
        own = logbook or _Log(folder.parent / f"{folder.name}.log")
        own.say(
            f"making Debian {base.suite} with mmdebstrap from {debian_mirror()}: {', '.join(base.packages)}"
        )
        argv = [
            "mmdebstrap",
            "--mode=root",
            "--variant=apt",
            "--format=directory",
            f"--include={','.join(base.packages)}",
            base.suite,
            str(tmp / "root"),
            debian_mirror(),
        ]
        code = _run_logged(argv, own, STEP_TIMEOUT)
        if code != 0:
            _remove(tmp)
            raise BuildFailed(0, f"FROM {base.image} (mmdebstrap {base.suite})", own.tail)
        if base.python_image:  # python:X images let pip and uv install into the system Python
            for marker in (tmp / "root" / "usr" / "lib").glob("python3*/EXTERNALLY-MANAGED"):
                marker.unlink()
        (tmp / "recipe.json").write_text(json.dumps(base.recipe(debian_mirror()), indent=1))
        _remove(folder)
        tmp.rename(folder)
        if logbook is None:
            own.close()
        return root


def _env_pairs(step: BuildStep) -> list[tuple[str, str]]:
    out = []
    args = list(step.args)
    if len(args) >= 2 and "=" not in args[0]:  # the legacy form: ENV KEY value words
        return [(args[0], " ".join(args[1:]))]
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not key:
            raise Unbuildable(f"{step.shown}: ENV needs KEY=VALUE")
        out.append((key, value))
    return out


def _absolute(path: str, workdir: str) -> str:
    return os.path.normpath(path if path.startswith("/") else os.path.join(workdir, path))


class _Builder:
    """Runs the steps over one file system being built."""

    def __init__(self, root: Path, context: Path | None, logbook: _Log, timeout: float) -> None:
        self.root, self.context, self.log, self.timeout = root, context, logbook, timeout
        self.env: dict[str, str] = {"PATH": IMAGE_PATH}
        self.workdir, self.user = "/", "root"

    def sandbox(self, command: str, *, context: bool = False, as_user: bool = True) -> int:
        """Run ``command`` with ``/bin/sh -c`` as root over the build's root, host network."""
        args = ["bwrap", "--bind", str(self.root), "/", "--dev", "/dev", "--proc", "/proc"]
        # /tmp is the image's own (as in `docker build`: a COPY into /tmp is there for the next
        # RUN); /run is private (the CA bundle and the context are mounted there)
        (self.root / "tmp").mkdir(mode=0o1777, exist_ok=True)
        args += ["--tmpfs", "/run"]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        args += ["--hostname", "buildkitsandbox", "--die-with-parent", "--new-session", "--clearenv"]
        args += ["--cap-drop", "ALL"]
        for cap in BUILD_CAPS:
            args += ["--cap-add", cap]
        if os.path.isfile("/etc/resolv.conf"):
            args += ["--ro-bind", os.path.realpath("/etc/resolv.conf"), "/etc/resolv.conf"]
        bundle = ca_bundle()
        if bundle:
            args += ["--ro-bind", bundle, CA_IN_BUILD]
        if context and self.context is not None:
            args += ["--ro-bind", str(self.context), CONTEXT_IN_BUILD]
        env = {"HOME": "/root", "HOSTNAME": "buildkitsandbox", **build_environment(), **self.env}
        for key, value in env.items():
            args += ["--setenv", key, value]
        workdir = self.workdir if (self.root / self.workdir.lstrip("/")).is_dir() else "/"
        args += ["--chdir", workdir, "--"]
        if as_user and self.user not in ("root", "0", "0:0"):
            args += ["setpriv", *_setpriv_ids(self.root, self.user), "--init-groups", "--"]
        args += ["/bin/sh", "-c", command]
        return _run_logged(args, self.log, self.timeout)

    def step(self, index: int, step: BuildStep) -> None:
        self.log.say(f"step {index}: {step.shown}")
        if step.kind == "RUN":
            code = self.sandbox(step.args[0])
        elif step.kind == "ENV":
            self.env.update(_env_pairs(step))
            code = 0
        elif step.kind == "WORKDIR":
            self.workdir = _absolute(step.args[0], self.workdir)
            code = self.sandbox(f"mkdir -p -- {_quote(self.workdir)}", as_user=False)
        elif step.kind == "USER":
            self.user = step.args[0]
            try:
                _setpriv_ids(self.root, self.user)
            except LookupError as err:
                raise BuildFailed(index, step.shown, str(err), step.line) from None
            code = 0
        else:
            code = self.copy(step)
        if code != 0:
            raise BuildFailed(index, step.shown, self.log.tail or f"exit code {code}", step.line)

    def copy(self, step: BuildStep) -> int:
        assert self.context is not None, "COPY needs a build context"
        sources = _copy_sources(step, self.context)
        dest = step.args[-1]
        target = _absolute(dest, self.workdir)
        into = dest.endswith("/") or len(sources) > 1
        lines = []
        for rel in sources:
            src = f"{CONTEXT_IN_BUILD}/{rel}"
            if (self.context / rel).is_dir() and not (self.context / rel).is_symlink():
                lines.append(
                    f"mkdir -p -- {_quote(target)} && "
                    f"cp -R -P --preserve=mode,timestamps -- {_quote(src)}/. {_quote(target)}/"
                )
            elif into:
                lines.append(
                    f"mkdir -p -- {_quote(target)} && "
                    f"cp -P --preserve=mode,timestamps -- {_quote(src)} {_quote(target)}/"
                )
            else:
                lines.append(
                    f"mkdir -p -- {_quote(os.path.dirname(target))} && "
                    f"cp -P --preserve=mode,timestamps -- {_quote(src)} {_quote(target)}"
                )
        chown = next((a.split("=", 1)[1] for a in step.args if a.startswith("--chown=")), None)
        if chown:
            lines.append(f"chown -R -- {_quote(chown)} {_quote(target)}")
        return self.sandbox(" && ".join(lines), context=True, as_user=False)

    def finish(self) -> None:
        """Make the mount points an episode's sandbox binds over. Inside the build sandbox:
        a path the steps made a symlink (``/opt -> /etc``) then resolves in the built system,
        never on the host."""
        dirs = " ".join(_quote("/" + d) for d in MOUNT_DIRS)
        files = " ".join(_quote("/" + f) for f in MOUNT_POINTS)
        script = (
            f'set -e; for d in {dirs}; do if [ -L "$d" ]; then rm -f "$d"; fi; mkdir -p "$d"; done; '
            f'for f in {files}; do rm -rf "$f"; : > "$f"; chmod 444 "$f"; done; '
            "chmod 755 /opt/harness-gym /home/agent"
        )
        code = self.sandbox(script, as_user=False)
        if code != 0:
            raise BuildFailed(0, "(the sandbox's mount points)", self.log.tail or f"exit code {code}")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _setpriv_ids(root: Path, user: str) -> list[str]:
    """``setpriv`` options for ``user[:group]`` (names looked up in the built /etc)."""
    name, _, group = user.partition(":")

    def lookup(table: str, key: str) -> str | None:
        if key.isdigit():
            return key
        with contextlib.suppress(OSError):
            for line in (root / "etc" / table).read_text().splitlines():
                parts = line.split(":")
                if parts and parts[0] == key and len(parts) > 3:
                    return parts[2] if table == "group" else f"{parts[2]}:{parts[3]}"
        return None

    found = lookup("passwd", name)
    if found is None:
        raise LookupError(f"no user {name!r} in the built /etc/passwd")
    uid, _, gid = found.partition(":")
    if group:
        gid = lookup("group", group) or ""
    return [f"--reuid={uid}", f"--regid={gid or uid}"]


def build_rootfs(
    base: str,
    steps: Sequence[BuildStep],
    context: str | os.PathLike[str] | None,
    *,
    progress: bool = True,
    cache: str | os.PathLike[str] | None = None,
    step_timeout: float = STEP_TIMEOUT,
    on_log: Callable[[str], None] | None = None,
) -> RootFS:
    """The root file system ``FROM base`` + ``steps`` make (built once, then from the cache).

    Raises :class:`Unbuildable` when it needs what cannot be had, :class:`BuildFailed`
    naming the failing step. A progress bar shows the steps, the time and the cache size."""
    from harness_gym.progress import progress_bar

    context_path = Path(context).resolve() if context is not None else None
    steps = list(steps)
    key = cache_key(base, steps, context_path)
    mapped = map_base(base)
    cache_path = Path(cache or cache_dir())
    folder = cache_path / key
    with _locked(cache_path / f".lock-{key}"):
        if (folder / "meta.json").is_file() and (folder / "root").is_dir():
            (folder / "last-used").touch()
            return RootFS.load(folder)
        _require_tools()
        tmp = cache_path / f".tmp-{key}-{os.getpid()}"
        _remove(tmp)
        tmp.mkdir(parents=True)
        logbook = _Log(tmp / "build.log")
        start = time.monotonic()
        bar = progress_bar(len(steps) + 1, f"rootfs {key[:8]}", unit="step", enabled=progress)
        try:
            logbook.say(mapped.note)
            if on_log:
                on_log(mapped.note)
            base_root = build_base(mapped, cache_path, logbook)
            _tick(bar, cache_path)
            root = tmp / "root"
            done = subprocess.run(
                ["cp", "-a", "--reflink=auto", "--", str(base_root), str(root)],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise BuildFailed(0, f"FROM {base}", done.stderr)
            builder = _Builder(root, context_path, logbook, step_timeout)
            for index, step in enumerate(steps, start=1):
                builder.step(index, step)
                _tick(bar, cache_path)
            builder.finish()
            seconds = time.monotonic() - start
            built = RootFS(
                key=key,
                path=folder / "root",
                image=base,
                base={"suite": mapped.suite, "python": mapped.python, "note": mapped.note},
                env=dict(builder.env),
                workdir=builder.workdir,
                user=builder.user,
                steps=[s.shown for s in steps],
                build_seconds=round(seconds, 2),
                size_bytes=disk_usage(root),
                created=time.time(),
            )
            logbook.say(f"built in {seconds:.1f} s, {built.size_bytes / 1e6:.0f} MB")
            (tmp / "meta.json").write_text(json.dumps(built.meta(), indent=1))
        except BaseException:
            logbook.close()
            failed = cache_path / f"{key}.failed.log"
            with contextlib.suppress(OSError):
                shutil.copyfile(logbook.path, failed)
            _remove(tmp)
            raise
        finally:
            if bar is not None:
                bar.close()
        logbook.close()
        _remove(folder)
        tmp.rename(folder)
        (folder / "last-used").touch()
        (cache_path / f"{key}.failed.log").unlink(missing_ok=True)
        return RootFS.load(folder)


def _tick(bar: Any, cache: Path) -> None:
    if bar is not None:
        bar.set_postfix_str(f"cache {disk_usage(cache) / 1e9:.2f} GB", refresh=False)
        bar.update(1)
