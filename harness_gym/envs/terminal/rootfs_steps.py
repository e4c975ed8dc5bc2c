"""A Dockerfile's steps as a root file system build takes them, and what cannot be built.

:class:`BuildStep` is one ``RUN``, ``COPY``, ``ENV``, ``WORKDIR`` or ``USER`` (the Dockerfile
itself is read by :mod:`harness_gym.envs.terminal.dockerfile`). :func:`check_buildable` says
before anything is built what the steps need that cannot be had: a base with no Debian
mapping, a URL outside the package registries (:func:`registry_hosts`), a GPU, a copy from
another stage or from outside the build context. :func:`build_environment` is what every
``RUN`` gets of the host's configuration: its package index and CA bundle, nothing else.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
from collections.abc import Sequence
from configparser import ConfigParser
from dataclasses import dataclass
from pathlib import Path

from harness_gym.envs.terminal.rootfs_base import Base, Unbuildable, debian_mirror, map_base

STEP_KINDS = ("RUN", "COPY", "ENV", "WORKDIR", "USER")


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


#: Where the build sandbox sees the host's CA bundle.
CA_IN_BUILD = "/run/harness-gym/ca-certificates.crt"


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
                copy_sources(step, context)
    return base


def copy_sources(step: BuildStep, context: Path) -> list[str]:
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
