"""File and directory tasks: organizing files, permissions, archives, writing a script."""

from __future__ import annotations

import io
import os
import stat
import tarfile

import numpy as np

from harness_gym.envs.terminal.task import TerminalTask
from harness_gym.envs.terminal.tasks.words import WORDS, pick


class TermOrganizeFiles(TerminalTask):
    task_id = "TermOrganizeFiles"
    description = "Move files into one directory per file extension."

    def build(self, rng: np.random.Generator) -> None:
        exts = ["txt", "csv", "log", "md"]
        files = {}
        for word in pick(rng, WORDS, int(rng.integers(5, 10))):
            ext = exts[int(rng.integers(0, len(exts)))]
            files[f"inbox/{word}.{ext}"] = f"{word}\n"
        self.files = files
        self.params = {"names": sorted(k.split("/", 1)[1] for k in files)}
        self.instruction = (
            "Move every file of /app/inbox into a directory named after its extension under "
            "/app/sorted (e.g. /app/inbox/a.txt -> /app/sorted/txt/a.txt). /app/inbox must end empty."
        )

    def solution(self) -> str:
        return 'cd /app && for f in inbox/*; do e="${f##*.}"; mkdir -p sorted/$e; mv "$f" sorted/$e/; done'

    def verify(self) -> tuple[bool, str]:
        for name in self.params["names"]:
            ext = name.rsplit(".", 1)[1]
            if self.read(f"sorted/{ext}/{name}") != f"{name.rsplit('.', 1)[0]}\n":
                return False, f"sorted/{ext}/{name} is missing"
        inbox = self.app / "inbox"
        if inbox.is_dir() and any(inbox.iterdir()):
            return False, "inbox is not empty"
        return True, ""


class TermPermissions(TerminalTask):
    task_id = "TermPermissions"
    description = "Set file modes: make scripts executable and a secret private."

    def build(self, rng: np.random.Generator) -> None:
        scripts = [f"bin/{w}.sh" for w in pick(rng, WORDS, int(rng.integers(2, 4)))]
        secret = f"secrets/{WORDS[int(rng.integers(0, len(WORDS)))]}.key"
        self.files = {s: f"#!/bin/sh\necho {s}\n" for s in scripts}
        self.files[secret] = "s3cr3t\n"
        self.params = {"scripts": scripts, "secret": secret}
        self.instruction = (
            "Make every .sh file in /app/bin executable by everyone (mode 755), and make "
            f"/app/{secret} readable and writable by its owner only (mode 600)."
        )

    def solution(self) -> str:
        return f"cd /app && chmod 755 bin/*.sh && chmod 600 {self.params['secret']}"

    def verify(self) -> tuple[bool, str]:
        for rel in [*self.params["scripts"], self.params["secret"]]:
            path = self.app / rel
            if path.is_symlink() or not path.is_file():
                return False, f"{rel} is missing"
            want = 0o600 if rel == self.params["secret"] else 0o755
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            if mode != want:
                return False, f"{rel} has mode {mode:o}, not {want:o}"
        return True, ""


class TermArchive(TerminalTask):
    task_id = "TermArchive"
    description = "Pack a directory into a gzip-compressed tar archive."

    def build(self, rng: np.random.Generator) -> None:
        names = pick(rng, WORDS, int(rng.integers(3, 7)))
        self.files = {f"data/{n}.txt": f"{n} {int(rng.integers(0, 1000))}\n" for n in names}
        self.files["notes.txt"] = "not part of the archive\n"
        self.params = {"members": sorted(k for k in self.files if k.startswith("data/"))}
        self.instruction = (
            "Create /app/backup.tar.gz, a gzip-compressed tar archive of the directory /app/data, "
            "with member paths starting with data/ (e.g. data/x.txt). Keep /app/data in place."
        )

    def solution(self) -> str:
        return "cd /app && tar -czf backup.tar.gz data"

    def verify(self) -> tuple[bool, str]:
        path = self.app / "backup.tar.gz"
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 1 << 20:
            return False, "backup.tar.gz is missing"
        try:
            with tarfile.open(fileobj=io.BytesIO(path.read_bytes()), mode="r:gz") as tar:
                files = {m.name.removeprefix("./"): m for m in tar.getmembers() if m.isfile()}
                for rel in self.params["members"]:
                    member = files.get(rel)
                    if member is None:
                        return False, f"{rel} is not in the archive"
                    data = tar.extractfile(member)
                    if data is None or data.read().decode(errors="replace") != self.files[rel]:
                        return False, f"{rel} differs in the archive"
        except (tarfile.TarError, OSError, EOFError) as err:
            return False, f"not a gzip tar archive: {err}"
        for rel in self.params["members"]:
            if self.read(rel) != self.files[rel]:
                return False, f"{rel} was not kept"
        return True, ""


class TermWriteScript(TerminalTask):
    task_id = "TermWriteScript"
    description = "Write an executable script with a specified command-line interface."

    def build(self, rng: np.random.Generator) -> None:
        op = ["sum", "max", "min"][int(rng.integers(0, 3))]
        tests = [[int(x) for x in rng.integers(-50, 100, size=int(rng.integers(2, 6)))] for _ in range(3)]
        self.files = {"README": "Write your script here.\n"}
        self.params = {"op": op, "tests": tests}
        self.instruction = (
            f"Write an executable script /app/calc that takes integers as command-line arguments "
            f"and prints their {op} (one integer, newline-terminated) to standard output. For "
            f"example `/app/calc 3 -1 7`."
        )

    def solution(self) -> str:
        body = {"sum": "sum(v)", "max": "max(v)", "min": "min(v)"}[self.params["op"]]
        return (
            "cd /app && printf '%s\\n' '#!/usr/bin/env python3' 'import sys' "
            f"'v = [int(a) for a in sys.argv[1:]]' 'print({body})' > calc && chmod +x calc"
        )

    def verify(self) -> tuple[bool, str]:
        fn = {"sum": sum, "max": max, "min": min}[self.params["op"]]
        for args in self.params["tests"]:
            res = self.sh("/app/calc " + " ".join(str(a) for a in args), timeout=5)
            if res.exit_code != 0 or res.stdout.strip() != str(fn(args)):
                return False, f"/app/calc {args} printed {res.stdout.strip()!r} (exit {res.exit_code})"
        return True, ""
