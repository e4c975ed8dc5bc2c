"""Re-run a test file as an unprivileged user (the terminal attack suites run as root and not).

``rerun_unprivileged(path, "-k", ...)`` creates the user ``hgunpriv`` when it is missing
(``useradd``), then runs pytest on ``path`` under ``runuser`` with the same ``PYTHONPATH``
and returns the completed process. The interpreter is this one when that user may run it,
else the system ``python3`` of the same minor version with this one's site-packages on its
path (a virtual environment under root's 0700 home cannot be run by anyone else). It skips
when the caller is not root (the file already runs unprivileged) or no such user or
interpreter can be had.
"""

from __future__ import annotations

import os
import pwd
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

USER = "hgunpriv"


def unprivileged_user() -> str:
    """The name of an unprivileged user to run as (created when missing); skips if impossible."""
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: this run is the unprivileged one")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        if shutil.which("useradd") is None:
            pytest.skip("no useradd here to create an unprivileged user")
        made = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            capture_output=True,
            text=True,
        )
        if made.returncode != 0 and "already exists" not in made.stderr:
            pytest.skip(f"cannot create an unprivileged user: {made.stderr.strip()}")
    if shutil.which("runuser") is None:
        pytest.skip("no runuser here to run as an unprivileged user")
    return USER


def interpreter_for(user: str) -> tuple[str, list[str]]:
    """(python, extra sys.path entries) that ``user`` can run with this one's packages."""
    if subprocess.run(["runuser", "-u", user, "--", "test", "-x", sys.executable]).returncode == 0:
        return sys.executable, []
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(version, path="/usr/bin:/bin") or ""
    if not system or subprocess.run(["runuser", "-u", user, "--", "test", "-x", system]).returncode != 0:
        pytest.skip(f"{user} can run neither {sys.executable} nor a system {version}")
    return system, [p for p in site.getsitepackages() if os.path.isdir(p)]


def rerun_unprivileged(
    path: str | Path, *pytest_args: str, timeout: float = 900
) -> subprocess.CompletedProcess:
    """Run pytest on ``path`` as the unprivileged user; the output is in the result."""
    user = unprivileged_user()
    root = Path(__file__).resolve().parent.parent
    python, extra = interpreter_for(user)
    paths = [p for p in os.environ.get("PYTHONPATH", str(root)).split(os.pathsep) if p] + extra
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join(paths),
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
    }
    argv = [
        "runuser",
        "-u",
        user,
        "--",
        "env",
        "-i",
        *(f"{k}={v}" for k, v in env.items()),
        python,
        "-m",
        "pytest",
        "-p",
        "no:xdist",
        "-p",
        "no:cacheprovider",
        "-q",
        "--rootdir",
        str(root),
        str(path),
        *pytest_args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd="/tmp")
