"""File and directory tasks: organizing files, permissions, archives, writing a script."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import tarfile

import numpy as np

from harness_gym.envs.terminal.episode_dirs import walk_tree
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
        fn = {"sum": sum, "max": max, "min": min}[op]
        example = [int(x) for x in rng.integers(-9, 30, size=3)]
        shown = " ".join(map(str, example))
        self.files = {"README": f"Write your script here.\nExample: /app/calc {shown} prints {fn(example)}\n"}
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
        rng = self.verify_rng()  # and inputs drawn now, which no agent can have memorized
        fresh = [[int(x) for x in rng.integers(-50, 100, size=int(rng.integers(2, 6)))] for _ in range(2)]
        cases = [*self.params["tests"], *fresh]
        runs = self.sh_many(["/app/calc " + " ".join(str(a) for a in args) for args in cases])
        for args, (code, stdout) in zip(cases, runs, strict=True):
            if code != 0 or stdout.strip() != str(fn(args)):
                return False, f"/app/calc {args} printed {stdout.strip()[:200]!r} (exit {code})"
        return True, ""


def targz(members: dict[str, str]) -> bytes:
    """A gzip-compressed tar archive of ``members`` (path -> text), byte-identical per input."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


class TermExtractArchive(TerminalTask):
    task_id = "TermExtractArchive"
    description = "Extract only the files of one kind from a tar.gz archive into a flat directory."

    def build(self, rng: np.random.Generator) -> None:
        ext = ["cfg", "json", "sql"][int(rng.integers(0, 3))]
        names = pick(rng, WORDS, int(rng.integers(6, 11)))
        members, wanted = {}, {}
        for i, name in enumerate(names):
            kind = ext if i < 3 or rng.random() < 0.4 else ["txt", "md", "log"][int(rng.integers(0, 3))]
            sub = ["", "conf/", "deep/er/"][int(rng.integers(0, 3))]
            path = f"bundle/{sub}{name}.{kind}"
            members[path] = f"{name} = {int(rng.integers(0, 10_000))}\n"
            if kind == ext:
                wanted[f"{name}.{ext}"] = members[path]
        blob = targz(members)
        self.files = {"incoming/bundle.tar.gz": blob}
        self.params = {"ext": ext, "wanted": wanted, "sha": hashlib.sha256(blob).hexdigest()}
        self.instruction = (
            f"Extract every .{ext} file of /app/incoming/bundle.tar.gz (wherever it sits in the "
            f"archive) into /app/extracted, flat: /app/extracted/<name>.{ext}, no subdirectories "
            "and no other files there. Leave the archive in place."
        )

    def solution(self) -> str:
        ext = self.params["ext"]
        return (
            f"cd /app && t=$(mktemp -d) && tar -xzf incoming/bundle.tar.gz -C $t && mkdir -p extracted "
            f"&& find $t -name '*.{ext}' -exec cp {{}} extracted/ \\;"
        )

    def verify(self) -> tuple[bool, str]:
        path = self.app / "incoming/bundle.tar.gz"
        if (
            path.is_symlink()
            or not path.is_file()
            or hashlib.sha256(path.read_bytes()).hexdigest() != self.params["sha"]
        ):
            return False, "the archive was changed or removed"
        out = self.app / "extracted"
        if out.is_symlink() or not out.is_dir():
            return False, "/app/extracted is missing"
        found = sorted(p.name for p in out.iterdir())
        if found != sorted(self.params["wanted"]):
            return False, f"/app/extracted holds {found[:10]}"
        for name, text in self.params["wanted"].items():
            if self.read(f"extracted/{name}") != text:
                return False, f"extracted/{name} differs from the archive"
        return True, ""


class TermCleanTempFiles(TerminalTask):
    task_id = "TermCleanTempFiles"
    description = "Delete temporary files in a tree, then the directories left empty."

    def build(self, rng: np.random.Generator) -> None:
        files: dict[str, str] = {}
        dirs = ["project/", *(f"project/{w}/" for w in pick(rng, WORDS, 4))]
        dirs.append(dirs[1] + "cache/")
        for name in pick(rng, WORDS, int(rng.integers(8, 14))):
            where = dirs[int(rng.integers(0, len(dirs)))]
            kind = ["py", "txt", "tmp", "md~", "tmp", "cfg"][int(rng.integers(0, 6))]
            files[f"{where}{name}.{kind}"] = f"{name}\n"
        files[dirs[-1] + "x.tmp"] = "scratch\n"  # a directory that only holds temp files
        files["project/empty_already/"] = ""
        self.files = files
        keep = {k: v for k, v in files.items() if not k.endswith(("/", ".tmp", "~"))}
        self.params = {"keep": keep}
        self.instruction = (
            "Under /app/project, delete every file whose name ends in .tmp or ~, then delete every "
            "directory that is empty (including ones that became empty). Keep /app/project itself "
            "and every other file."
        )

    def solution(self) -> str:
        return (
            "cd /app && find project -type f \\( -name '*.tmp' -o -name '*~' \\) -delete "
            "&& find project -mindepth 1 -type d -empty -delete"
        )

    def verify(self) -> tuple[bool, str]:
        root = self.app / "project"
        if root.is_symlink() or not root.is_dir():
            return False, "/app/project is missing"
        found: set[str] = set()
        parents: set[str] = set()
        dirs: list[str] = []
        for path in walk_tree(root):  # iterative, never through a symlink
            parents.add(os.path.dirname(path))
            if os.path.isdir(path) and not os.path.islink(path):
                dirs.append(path)
            else:
                found.add(os.path.relpath(path, self.app))
        for path in dirs:
            if path not in parents:
                return False, f"{os.path.relpath(path, self.app)} is an empty directory"
        if found != set(self.params["keep"]):
            extra, missing = (
                sorted(found - set(self.params["keep"])),
                sorted(set(self.params["keep"]) - found),
            )
            return False, f"left over: {extra[:5]}, missing: {missing[:5]}"
        return True, ""


class TermDedupeFiles(TerminalTask):
    task_id = "TermDedupeFiles"
    description = "Remove duplicate files (by content), keeping the first name, and list the removed ones."

    def build(self, rng: np.random.Generator) -> None:
        names = pick(rng, WORDS, int(rng.integers(8, 14)))
        contents = [f"{w} {int(rng.integers(0, 1_000_000))}\n" for w in pick(rng, WORDS, 4)]
        files = {f"photos/{n}.dat": contents[int(rng.integers(0, len(contents)))] for n in names}
        if len(set(files.values())) == len(files):  # at least one duplicate
            files[f"photos/{names[-1]}.dat"] = files[f"photos/{names[0]}.dat"]
        groups: dict[str, list[str]] = {}
        for rel in sorted(files):
            groups.setdefault(files[rel], []).append(rel.split("/", 1)[1])
        removed = sorted(n for group in groups.values() for n in group[1:])
        self.files = files
        self.params = {"keep": sorted(g[0] for g in groups.values()), "removed": removed}
        self.instruction = (
            "Some files in /app/photos have identical content. In each group of identical files "
            "keep only the one whose name sorts first and delete the others. Write the names of "
            "the deleted files (just the names, e.g. x.dat), sorted, one per line, to /app/removed.txt."
        )

    def solution(self) -> str:
        return (
            'cd /app && python3 -c "import os; seen={}; gone=[]\n'
            "for n in sorted(os.listdir('photos')):\n"
            "    d=open('photos/'+n,'rb').read()\n"
            "    if d in seen: os.remove('photos/'+n); gone.append(n)\n"
            "    else: seen[d]=n\n"
            "open('removed.txt','w').write(''.join(g+chr(10) for g in sorted(gone)))\""
        )

    def verify(self) -> tuple[bool, str]:
        photos = self.app / "photos"
        if photos.is_symlink() or not photos.is_dir():
            return False, "/app/photos is missing"
        left = sorted(p.name for p in photos.iterdir())
        if left != self.params["keep"]:
            return False, f"/app/photos holds {left[:10]}"
        for name in left:
            if self.read(f"photos/{name}") != self.files[f"photos/{name}"]:
                return False, f"photos/{name} was changed"
        text = self.read("removed.txt")
        if text is None or text.split() != self.params["removed"]:
            return False, "removed.txt does not list the deleted files"
        return True, ""
