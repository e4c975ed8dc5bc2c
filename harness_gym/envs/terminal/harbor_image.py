"""What a Harbor task's ``environment/Dockerfile`` asks of the sandbox.

:func:`read_environment` reads the Dockerfile (parsed by
:mod:`harness_gym.envs.terminal.dockerfile`) into an :class:`ImagePlan`. When it only copies
files into ``/app`` and runs commands the host's base tools have (no package install, no
network, no service), the instance is made on the host's system: the files written into a
fresh ``/app``, the ``RUN`` lines run in the sandbox at reset. Anything else is listed in
``ImagePlan.needs_build`` and becomes build steps for a root file system
(:func:`image_build_steps`, checked buildable; :mod:`harness_gym.envs.terminal.rootfs`).
What no build could give (services, a compose file, multi-stage copies, a URL, a base with
no Debian mapping) is an :class:`~harness_gym.envs.terminal.harbor_format.UnsupportedHarborTask`.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_gym.envs.terminal import dockerfile as df
from harness_gym.envs.terminal.harbor_format import UnsupportedHarborTask

#: Files copied into an instance at most (a build context is small in the tasks this takes).
MAX_CONTEXT_BYTES = 32 << 20


#: Commands that install packages: they need a root file system built from the Dockerfile.
PACKAGE_TOOLS = frozenset(
    "apt-get apt aptitude dpkg pip pip3 pipx uv uvx poetry conda mamba micromamba npm npx yarn pnpm "
    "gem cargo rustup apk yum dnf zypper snap brew bun deno".split()
)
#: Commands that fetch from the network.
NETWORK_TOOLS = frozenset("curl wget ssh scp rsync ftp nc".split())
#: Commands that start services.
SERVICE_TOOLS = frozenset("service systemctl docker dockerd supervisord".split())
#: Shell builtins and keywords (never looked up on the host).
SHELL_WORDS = frozenset(
    ". : [ [[ ]] alias bg bind break builtin caller cd command compgen complete continue declare dirs "
    "disown echo enable eval exec exit export false fc fg getopts hash help history jobs kill let "
    "local logout mapfile popd printf pushd pwd read readarray readonly return set shift shopt source "
    "suspend test times trap true type typeset ulimit umask unalias unset wait case esac for in do "
    "done if then else elif fi while until function select time { } ! fi".split()
)
#: Instructions that only describe the image (nothing to reproduce).
DESCRIPTIVE = frozenset({"LABEL", "MAINTAINER", "EXPOSE", "VOLUME", "STOPSIGNAL", "SHELL", "ARG"})
#: Shells a plain ``ENTRYPOINT`` may name (it then only wraps Harbor's ``sleep infinity``).
PLAIN_SHELLS = frozenset({"bash", "sh", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/usr/bin/env"})
#: A ``CMD`` that only keeps a container alive (what Harbor runs in its place).
IDLE_COMMANDS = frozenset({"sleep", "tail", "true", "/bin/true", "cat"})


HOST_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


@dataclass
class ImagePlan:
    """What a Dockerfile asks for, as this loader reads it."""

    base_image: str = ""
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    executables: list[str] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)
    #: Why the instance needs a root file system built from the Dockerfile (empty: it does not).
    needs_build: list[str] = field(default_factory=list)
    instructions: list[df.Instruction] = field(default_factory=list)


# -- environment/ ----------------------------------------------------------------------------


def read_environment(folder: Path, workdir_override: str | None = None) -> ImagePlan:
    """What ``environment/Dockerfile`` asks for (:class:`ImagePlan`); rejects what no build
    could give (services, a compose file, multi-stage copies, a URL), and lists in
    ``needs_build`` what only a built root file system gives."""
    env_dir = folder / "environment"
    plan = ImagePlan(env={"PATH": df.DEFAULT_PATH})
    for compose in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
        if (env_dir / compose).exists():
            raise UnsupportedHarborTask(
                f"{folder.name}: environment/{compose} defines services (containers beside the task's), "
                "which the sandbox does not run",
                "service",
            )
    dockerfile = env_dir / "Dockerfile"
    if not dockerfile.is_file():
        raise UnsupportedHarborTask(f"{folder.name}: missing environment/Dockerfile", "missing-files")
    try:
        instructions = df.parse_dockerfile(dockerfile.read_text(encoding="utf-8"))
    except (df.DockerfileError, UnicodeDecodeError) as err:
        raise UnsupportedHarborTask(f"{folder.name}: environment/Dockerfile: {err}", "dockerfile") from None
    plan.instructions = instructions
    patterns = df.read_dockerignore(env_dir)
    variables: dict[str, str] = {}
    stages = 0
    for ins in instructions:
        where = f"{folder.name}: environment/Dockerfile {ins}"[:200]
        if ins.kind not in df.KNOWN:
            raise UnsupportedHarborTask(f"{where}: unknown Dockerfile instruction {ins.kind}", "dockerfile")
        try:
            if ins.kind == "ARG":
                for key, value in df.parse_assignments(ins, variables).items():
                    variables.setdefault(key, value)
            elif ins.kind == "FROM":
                stages += 1
                if stages > 1:
                    raise UnsupportedHarborTask(f"{where}: a multi-stage build", "multi-stage")
                words = df.expand(ins.args, variables).split()
                plan.base_image = words[0] if words else ""
            elif ins.kind == "ENV":
                for key, value in df.parse_assignments(ins, {**variables, **plan.env}).items():
                    plan.env[key] = value
            elif ins.kind == "WORKDIR":
                plan.workdir = df.join_dest(
                    plan.workdir, df.expand(ins.args.strip(), {**variables, **plan.env})
                )
                if plan.workdir.rstrip("/") != "/app":
                    plan.needs_build.append(f"{ins}: the host-tools sandbox works in /app")
            elif ins.kind == "USER":
                plan.user = df.expand(ins.args.strip(), {**variables, **plan.env})
            elif ins.kind in ("COPY", "ADD"):
                _copy(env_dir, ins, plan, patterns, {**variables, **plan.env}, where)
            elif ins.kind == "RUN":
                _run(ins, plan, where)
            elif ins.kind in ("ENTRYPOINT", "CMD"):
                words = ins.words()
                if words and words[0] not in PLAIN_SHELLS | (IDLE_COMMANDS if ins.kind == "CMD" else set()):
                    raise UnsupportedHarborTask(
                        f"{where}: {ins.kind} {words[0]} starts a program with the container (a "
                        "service: Harbor replaces CMD with `sleep infinity`, and the sandbox runs no "
                        "service), so the task's tests would find nothing serving",
                        "service",
                    )
            elif ins.kind in ("HEALTHCHECK", "ONBUILD"):
                raise UnsupportedHarborTask(
                    f"{where}: {ins.kind} is for a service or a derived image", "service"
                )
        except df.DockerfileError as err:
            raise UnsupportedHarborTask(f"{where}: {err}", "dockerfile") from None
    if workdir_override:
        plan.workdir = df.join_dest(plan.workdir, str(workdir_override))
        if plan.workdir.rstrip("/") != "/app":
            plan.needs_build.append(
                f"task.toml workdir {workdir_override}: the host-tools sandbox works in /app"
            )
    if plan.workdir == "/" and not plan.needs_build:
        plan.workdir = "/app"
    return plan


def _run(ins: df.Instruction, plan: ImagePlan, where: str) -> None:
    """A ``RUN`` line: kept as a set-up command when the host's tools can run it without
    network, else a reason for a build."""
    script = ins.args
    heredoc_only = re.fullmatch(r"\s*(<<-?[\"']?\w+[\"']?\s*)+", ins.args or "")
    if ins.heredocs:
        script = (
            "\n".join(ins.heredocs.values()) if heredoc_only else re.sub(r"<<-?[\"']?\w+[\"']?", "", ins.args)
        )
    form = ins.exec_form
    if form is not None:
        script = shlex.join(form)
    if ins.flags.get("mount") or ins.flags.get("network"):
        plan.needs_build.append(f"{ins}: RUN --mount/--network needs a build")
        return
    for words in df.shell_commands(script):
        cmd = os.path.basename(words[0])
        if cmd in ("python", "python3") and words[1:3] == ["-m", "pip"]:
            cmd = "pip"
        if cmd == "git" and len(words) > 1 and words[1] in ("clone", "fetch", "pull", "submodule"):
            cmd = f"git {words[1]}"
        if cmd in PACKAGE_TOOLS:
            plan.needs_build.append(f"{ins}: runs {cmd!r}, which installs packages")
            return
        if cmd in NETWORK_TOOLS or cmd.startswith("git "):
            plan.needs_build.append(f"{ins}: runs {cmd!r}, which fetches from the network")
            return
        if cmd in SERVICE_TOOLS:
            plan.needs_build.append(f"{ins}: runs {cmd!r}, which starts a service")
            return
        if cmd in SHELL_WORDS or "/" in words[0] or "$" in words[0]:
            continue
        if shutil.which(cmd, path=HOST_PATH) is None:
            plan.needs_build.append(f"{ins}: runs {cmd!r}, which the host's base tools lack")
            return
    if ins.heredocs and heredoc_only:
        body = "\n".join(ins.heredocs.values())
        plan.setup.append(
            f"cd {shlex.quote(plan.workdir)} && {_exports(plan.env)}bash -c {shlex.quote(body)}"
        )
    elif ins.heredocs:
        plan.needs_build.append(f"{ins}: a here-document fed to a command needs a build")
    else:
        where_run = plan.workdir if plan.workdir != "/" else "/app"
        plan.setup.append(f"cd {shlex.quote(where_run)} && {_exports(plan.env)}{script}")


def _exports(env: dict[str, str]) -> str:
    extra = {k: v for k, v in env.items() if k != "PATH" or v != df.DEFAULT_PATH}
    return "".join(f"export {k}={shlex.quote(v)}; " for k, v in extra.items())


def _copy(
    env_dir: Path,
    ins: df.Instruction,
    plan: ImagePlan,
    patterns: list[tuple[bool, re.Pattern[str]]],
    variables: dict[str, str],
    where: str,
) -> None:
    """A ``COPY``/``ADD``: files written into ``/app`` (globs, ``.dockerignore``, here-docs,
    local archives unpacked by ``ADD``); a copy elsewhere is a reason for a build."""
    if "from" in ins.flags:
        raise UnsupportedHarborTask(f"{where}: COPY --from needs another image or stage", "multi-stage")
    words = [df.expand(w, variables) for w in ins.words()]
    if len(words) < 2:
        raise UnsupportedHarborTask(f"{where}: {ins.kind} needs a source and a destination", "dockerfile")
    *sources, dest = words
    if any("://" in s or s.startswith("git@") for s in sources):
        raise UnsupportedHarborTask(f"{where}: {ins.kind} from a URL needs the network", "network")
    target = df.join_dest(plan.workdir if plan.workdir != "/" else "/", dest)
    if not (target.rstrip("/") == "/app" or target.startswith("/app/")):
        plan.needs_build.append(f"{ins}: copies to {target}, outside /app")
        return
    rel_dest = target.rstrip("/").removeprefix("/app").lstrip("/")
    heredoc_sources = [s for s in sources if s.startswith("<<")]
    for marker in heredoc_sources:
        name = re.sub(r"^<<-?[\"']?(\w+)[\"']?$", r"\1", marker)
        body = ins.heredocs.get(name, "")
        rel = f"{rel_dest}/{name}" if (dest.endswith("/") or len(sources) > 1) else rel_dest
        plan.files[rel.lstrip("/")] = body.encode()
    sources = [s for s in sources if not s.startswith("<<")]
    matched = [m for s in sources for m in df.context_sources(env_dir, s, patterns)]
    into_dir = dest.endswith("/") or len(matched) > 1 or rel_dest == ""
    base = env_dir.resolve()
    for source in matched:
        src = env_dir / source
        if not src.resolve().is_relative_to(base):
            raise UnsupportedHarborTask(f"{where}: {source} leaves environment/", "symlink")
        if src.is_symlink():
            raise UnsupportedHarborTask(f"{where}: {source} is a symlink", "symlink")
        if ins.kind == "ADD" and src.is_file() and df.is_archive(source):
            _unpack(src, rel_dest, plan, where)
            continue
        for entry in df.context_files(env_dir, source, patterns):
            path = src / entry if entry else src
            if path.is_symlink():
                raise UnsupportedHarborTask(f"{where}: {source}/{entry} is a symlink", "symlink")
            if not entry:
                rel = f"{rel_dest}/{src.name}" if into_dir else rel_dest
            else:
                rel = "/".join(x for x in (rel_dest, entry) if x)
            plan.files[rel.lstrip("/")] = path.read_bytes()
            if os.stat(path).st_mode & 0o111 or ins.flags.get("chmod", "").endswith(("5", "7")):
                plan.executables.append("/app/" + rel.lstrip("/"))
            _check_size(plan, where)


def _unpack(archive: Path, rel_dest: str, plan: ImagePlan, where: str) -> None:
    """``ADD`` of a local tar archive: its regular files and folders, unpacked (links and
    paths leaving the destination refused)."""
    try:
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = os.path.normpath(member.name.lstrip("/"))
                if name == "." or name.startswith(".."):
                    continue
                if member.isdir():
                    plan.files["/".join(x for x in (rel_dest, name) if x) + "/"] = b""
                elif member.isfile():
                    data = tar.extractfile(member)
                    rel = "/".join(x for x in (rel_dest, name) if x)
                    plan.files[rel] = data.read() if data else b""
                    if member.mode & 0o111:
                        plan.executables.append(f"/app/{rel}")
                    _check_size(plan, where)
                else:
                    raise UnsupportedHarborTask(
                        f"{where}: {archive.name} holds a link or device ({member.name})", "symlink"
                    )
    except (tarfile.TarError, OSError, io.UnsupportedOperation) as err:
        raise UnsupportedHarborTask(f"{where}: cannot unpack {archive.name} ({err})", "dockerfile") from None


def _check_size(plan: ImagePlan, where: str) -> None:
    if sum(len(v) for v in plan.files.values()) > MAX_CONTEXT_BYTES:
        raise UnsupportedHarborTask(
            f"{where}: the build context is larger than {MAX_CONTEXT_BYTES >> 20} MB", "too-large"
        )


#: Registry paths in front of Docker Hub's official images (``public.ecr.aws/docker/library/python``).
MIRRORED_LIBRARY = re.compile(r"^(?:[a-z0-9.-]+\.[a-z]+(?::\d+)?/)?(?:docker/)?library/")


def check_base(name: str, plan: ImagePlan) -> None:
    """The ``FROM`` image must map to a Debian base (:func:`~harness_gym.envs.terminal.rootfs_base.map_base`;
    toolchain images such as ``golang`` or ``eclipse-temurin`` map to the suite whose own package
    of the tool is nearest, said in the build log)."""
    from harness_gym.envs.terminal.rootfs_base import Unbuildable, map_base

    plan.base_image = MIRRORED_LIBRARY.sub("", plan.base_image)
    try:
        map_base(plan.base_image)
    except Unbuildable as err:
        raise UnsupportedHarborTask(
            f"{name}: environment/Dockerfile: {err.reason}", "registry-image"
        ) from None


def image_build_steps(folder: Path, plan: ImagePlan) -> tuple[Any, ...]:
    """The Dockerfile as :class:`~harness_gym.envs.terminal.rootfs_steps.BuildStep` values, checked
    buildable (a mapped base, URLs inside the package registries); rejects what cannot be built."""
    from harness_gym.envs.terminal.rootfs_base import Unbuildable
    from harness_gym.envs.terminal.rootfs_steps import BuildStep, check_buildable

    where = f"{folder.name}: environment/Dockerfile"
    workdir = plan.workdir.rstrip("/") or "/"
    if workdir.split("/")[1] in ("tmp", "dev", "proc", "sys", "run"):
        raise UnsupportedHarborTask(
            f"{where}: the working directory is {plan.workdir}, inside a folder each episode "
            "makes afresh; the episode's writable folder is /app",
            "workdir",
        )
    env_dir = folder / "environment"
    patterns = df.read_dockerignore(env_dir)
    variables: dict[str, str] = {"PATH": df.DEFAULT_PATH}
    current = "/"
    steps: list[Any] = []
    try:
        _convert(plan, env_dir, patterns, variables, current, steps)
    except df.DockerfileError as err:
        raise UnsupportedHarborTask(f"{where}: {err}", "dockerfile") from None
    if workdir != "/" and workdir != "/app" and not workdir.startswith("/app/"):
        # The episode's one writable folder is /app: the image's working directory becomes a
        # link to it, holding what the build left there.
        quoted = shlex.quote(workdir)
        steps.append(
            BuildStep(
                "RUN",
                (
                    f"set -e; mkdir -p /app; if [ -d {quoted} ] && [ ! -L {quoted} ]; then "
                    f"cp -a {quoted}/. /app/ && rm -rf {quoted}; fi; "
                    f"mkdir -p $(dirname {quoted}); ln -sfn /app {quoted}",
                ),
                0,
                f"(harness-gym) WORKDIR {workdir} -> /app",
            )
        )
    try:
        check_buildable(plan.base_image, steps, env_dir)
    except Unbuildable as err:
        raise UnsupportedHarborTask(f"{where}: {err.reason}", "unbuildable") from None
    return tuple(steps)


def _convert(
    plan: ImagePlan,
    env_dir: Path,
    patterns: list[tuple[bool, re.Pattern[str]]],
    variables: dict[str, str],
    current: str,
    steps: list[Any],
) -> None:
    """Append the build steps of ``plan``'s instructions to ``steps``."""
    from harness_gym.envs.terminal.rootfs_steps import BuildStep

    for ins in plan.instructions:
        shown = f"{ins.kind} {ins.args}"[:300]

        def step(kind: str, *args: str, ins: df.Instruction = ins, shown: str = shown) -> None:
            steps.append(BuildStep(kind, tuple(args), ins.line, shown))

        if ins.kind == "ARG":
            for key, value in df.parse_assignments(ins, variables).items():
                variables.setdefault(key, value)
        elif ins.kind == "ENV":
            pairs = df.parse_assignments(ins, variables)
            variables.update(pairs)
            step("ENV", *(f"{k}={v}" for k, v in pairs.items()))
        elif ins.kind == "WORKDIR":
            current = df.join_dest(current, df.expand(ins.args.strip(), variables))
            step("WORKDIR", current)
        elif ins.kind == "USER":
            step("USER", df.expand(ins.args.strip(), variables))
        elif ins.kind == "RUN":
            step("RUN", _run_script(ins))
        elif ins.kind in ("COPY", "ADD"):
            _copy_steps(env_dir, ins, patterns, variables, current, step, len(steps))


def _run_script(ins: df.Instruction) -> str:
    """The shell text a ``RUN`` runs: its exec form joined, a here-document-only ``RUN``'s
    body, or the command with its here-documents written inline."""
    form = ins.exec_form
    if form is not None:
        return shlex.join(form)
    if not ins.heredocs:
        return ins.args
    if re.fullmatch(r"\s*(<<-?[\"']?\w+[\"']?\s*)+", ins.args):
        return "\n".join(ins.heredocs.values())
    tail = "".join(f"{body}{name}\n" for name, body in ins.heredocs.items())
    return re.sub(r"<<-?[\"']?(\w+)[\"']?", r"<<'\1'", ins.args) + "\n" + tail


def _copy_steps(
    env_dir: Path,
    ins: df.Instruction,
    patterns: list[tuple[bool, re.Pattern[str]]],
    variables: dict[str, str],
    workdir: str,
    step: Any,
    index: int,
) -> None:
    """A ``COPY``/``ADD`` as build steps: globs and ``.dockerignore`` applied here, a
    here-document written by a ``RUN``, a local archive unpacked by ``tar``."""
    words = [df.expand(w, variables) for w in ins.words()]
    if len(words) < 2:
        raise UnsupportedHarborTask(
            f"{env_dir.parent.name}: {ins}: needs a source and a destination", "dockerfile"
        )
    *sources, dest = words
    target = df.join_dest(workdir, dest)
    flags = [f"--chown={ins.flags['chown']}"] if ins.flags.get("chown") else []
    into = dest.endswith("/") or len(sources) > 1
    for source in sources:
        if source.startswith("<<"):
            name = re.sub(r"^<<-?[\"']?(\w+)[\"']?$", r"\1", source)
            path = f"{target.rstrip('/')}/{name}" if into else target
            body = ins.heredocs.get(name, "")
            step(
                "RUN",
                f"mkdir -p {shlex.quote(os.path.dirname(path))} && "
                f"cat > {shlex.quote(path)} <<'HG_EOF'\n{body}HG_EOF",
            )
            continue
        if "://" in source or source.startswith("git@"):
            raise UnsupportedHarborTask(
                f"{env_dir.parent.name}: {ins}: {ins.kind} from a URL needs the network", "network"
            )
        for match in df.context_sources(env_dir, source, patterns):
            if ins.kind == "ADD" and (env_dir / match).is_file() and df.is_archive(match):
                stash = f"/opt/.hg-add-{index}"
                step("COPY", match, f"{stash}/")
                name = shlex.quote(f"{stash}/{os.path.basename(match)}")
                step(
                    "RUN",
                    f"mkdir -p {shlex.quote(target)} && tar -xf {name} -C {shlex.quote(target)} "
                    f"&& rm -rf {stash}",
                )
                continue
            files = df.context_files(env_dir, match, patterns)
            whole = (env_dir / match).is_dir() and len(files) == _count_files(env_dir / match)
            if not (env_dir / match).is_dir() or whole:
                many = into or len(sources) > 1
                step("COPY", *flags, match, f"{target.rstrip('/')}/" if many else target)
                continue
            for rel in files:  # .dockerignore leaves some of the folder out: file by file
                dest_file = f"{target.rstrip('/')}/{rel}"
                step("COPY", *flags, f"{match.rstrip('/')}/{rel}" if match != "." else rel, dest_file)


def _count_files(folder: Path) -> int:
    return sum(
        len(files) + sum(os.path.islink(os.path.join(d, x)) for x in dirs)
        for d, dirs, files in os.walk(folder)
    )
