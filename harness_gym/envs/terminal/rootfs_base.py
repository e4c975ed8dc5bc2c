"""The Debian base a Dockerfile's ``FROM`` maps to (nothing is pulled from a container registry).

:func:`map_base` maps ``debian:*``, ``ubuntu:*``, ``python:X.Y*``, ``buildpack-deps:*``, the
toolchain images ``gcc``, ``golang``, ``node``, ``eclipse-temurin`` and ``openjdk``
(:data:`TOOLCHAINS`: the suite whose own package of the tool is nearest) and Terminal-Bench's
``t-bench/python-3-13`` / ``ubuntu-24-04`` images to a :class:`Base`: a Debian suite and the
packages it gets. The base is then made with ``mmdebstrap`` from Debian's package registry
(:func:`debian_mirror`; :func:`harness_gym.envs.terminal.rootfs.build_base`); anything else is
:class:`Unbuildable`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Bumped whenever what a given recipe builds changes (it is part of every cache key).
RECIPE_VERSION = 1


#: Overrides the Debian mirror the bases and ``apt-get`` use.
MIRROR_VARIABLE = "HARNESS_GYM_DEBIAN_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org/debian"


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


class Unbuildable(ValueError):
    """A task's environment needs what cannot be had here; ``reason`` says what."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


def debian_mirror() -> str:
    return os.environ.get(MIRROR_VARIABLE) or DEFAULT_MIRROR
