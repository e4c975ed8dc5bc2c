"""Git tasks and a bug fix: commit, branch, revert, make a failing test pass.

Set-up and checks that need ``git`` run inside a sandbox (a repository's config could
otherwise run code on the host). The checks trust nothing the agent could have configured:
git runs in the verifier's sandbox (no agent home, ``GIT_CONFIG_GLOBAL=/dev/null``, no
system config, replace refs off) with hooks and fsmonitor switched off on the command line,
reads only content-addressed objects (``cat-file``, ``ls-tree``, ``rev-parse``), and
compares what the commits hold, and what the working tree holds (hashed on the host, so no
ignore rule, ``assume-unchanged`` bit or ``status.*`` setting can hide a file), with what
the task asks, against the commit ids recorded right after set-up.
"""

from __future__ import annotations

import hashlib
import os
import stat

import numpy as np

from harness_gym.envs.terminal.episode_dirs import walk_tree
from harness_gym.envs.terminal.task import TerminalTask
from harness_gym.envs.terminal.tasks.words import WORDS, pick

GIT_INIT = (
    "git init -q -b main && git config user.email agent@example.com && git config user.name agent "
    "&& git add -A && git commit -qm 'initial commit'"
)


#: git for checks: no hooks, no fsmonitor, no pager, the repository named explicitly.
GIT = (
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.untrackedCache=false "
    "--no-pager --git-dir=/app/.git --work-tree=/app"
)


def blob_id(data: bytes) -> str:
    """The git object id (SHA-1) of a blob holding ``data``."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()  # noqa: S324 - git's id


class _GitTask(TerminalTask):
    def prefetch(self, *args: str) -> None:
        """Run these git commands in one verifier sandbox; :meth:`git` then answers them (until
        the next prefetch: each verify starts with one, so no answer outlives its check)."""
        runs = self.sh_many([f"{GIT} {a}" for a in args], timeout=10)
        self._git_answers = {
            a: (out if code == 0 else None) for a, (code, out) in zip(args, runs, strict=True)
        }

    def git(self, args: str) -> str | None:
        """stdout of ``git args`` (``None`` when it fails), prefetched or run now."""
        answers = getattr(self, "_git_answers", {})
        if args in answers:
            return answers[args]
        res = self.sh(f"{GIT} {args}", timeout=10)
        return res.stdout if res.exit_code == 0 else None

    def after_setup(self) -> None:
        """Record every ref's commit (the agent has not run anything yet)."""
        assert self._sandbox is not None
        res = self._sandbox.run(
            "git for-each-ref --format='%(refname) %(objectname)' refs/heads && git rev-parse HEAD",
            timeout=30,
        )
        *refs, head = res.stdout.splitlines() or [""]
        self.baseline = dict(line.split(maxsplit=1) for line in refs)
        self.baseline["HEAD"] = head.strip()

    def commit(self, rev: str) -> tuple[list[str], str] | None:
        """(parents, message) of commit ``rev``, read from the object itself."""
        text = self.git(f"cat-file commit {rev}")
        if text is None:
            return None
        head, _, message = text.partition("\n\n")
        parents = [line.split()[1] for line in head.splitlines() if line.startswith("parent ")]
        return parents, message

    def on_main(self) -> bool:
        ref = self.git("symbolic-ref -q HEAD")
        return ref is not None and ref.strip() == "refs/heads/main"

    def tree(self, rev: str) -> dict[str, str] | None:
        """path -> blob id of every file in ``rev``'s tree."""
        text = self.git(f"ls-tree -r -z --full-tree {rev}")
        if text is None:
            return None
        out = {}
        for entry in text.split("\0"):
            if entry:
                meta, _, path = entry.partition("\t")
                out[path] = meta.split()[2]
        return out

    def worktree(self) -> dict[str, str]:
        """path -> blob id of every file of /app outside .git, hashed on the host."""
        out: dict[str, str] = {}
        for path in walk_tree(self.app):
            rel = os.path.relpath(path, self.app)
            if rel == ".git" or rel.startswith(".git/"):
                continue
            try:
                st = os.lstat(path)
                if stat.S_ISDIR(st.st_mode):
                    continue
                if stat.S_ISLNK(st.st_mode):
                    out[rel] = blob_id(os.fsencode(os.readlink(path)))
                elif stat.S_ISREG(st.st_mode):
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                    with os.fdopen(fd, "rb") as f:
                        out[rel] = blob_id(f.read())
                else:
                    out[rel] = "not a file"
            except OSError:
                out[rel] = "unreadable"
        return out

    def same_tree(self, what: str, got: dict[str, str] | None, want: dict[str, str]) -> str:
        """Why ``got`` is not ``want`` (empty when it is)."""
        if got is None:
            return f"{what} cannot be read"
        wrong = sorted(p for p in set(got) | set(want) if got.get(p) != want.get(p))
        return f"{what} differs from what was asked at {wrong[:5]}" if wrong else ""

    def clean_at(self, rev: str) -> tuple[dict[str, str] | None, str]:
        """The tree of ``rev``, and why the working tree is not exactly that tree."""
        tree = self.tree(rev)
        if tree is None:
            return None, f"cannot read the tree of {rev}"
        why = self.same_tree("the working tree", self.worktree(), tree)
        return tree, ("the working tree is not clean: " + why) if why else ""


def blobs(files: dict[str, str]) -> dict[str, str]:
    return {path: blob_id(text.encode()) for path, text in files.items()}


class TermGitCommit(_GitTask):
    task_id = "TermGitCommit"
    description = "Commit the pending changes of a git repository with a given message."

    def build(self, rng: np.random.Generator) -> None:
        words = pick(rng, WORDS, 4)
        self.files = {f"{w}.txt": f"{w} v1\n" for w in words[:3]}
        message = f"update {words[0]} and add {words[3]}"
        self.setup = [GIT_INIT, f"echo '{words[0]} v2' > {words[0]}.txt && echo new > {words[3]}.txt"]
        tree = {**self.files, f"{words[0]}.txt": f"{words[0]} v2\n", f"{words[3]}.txt": "new\n"}
        self.params = {"message": message, "tree": tree}
        self.instruction = (
            f"/app is a git repository with uncommitted changes (one modified file, one new file). "
            f"Commit all of them in one commit with the message '{message}'. The working tree must end clean."
        )

    def solution(self) -> str:
        return f"cd /app && git add -A && git commit -qm '{self.params['message']}'"

    def verify(self) -> tuple[bool, str]:
        self.prefetch("cat-file commit HEAD", "ls-tree -r -z --full-tree HEAD")
        head = self.commit("HEAD")
        if head is None:
            return False, "not a git repository"
        parents, message = head
        if message.strip() != self.params["message"]:
            return False, f"last commit message is {message.strip()[:100]!r}"
        if parents != [self.baseline["HEAD"]]:
            return False, "expected exactly one new commit on top of the initial one"
        why = self.same_tree("the new commit", self.tree("HEAD"), blobs(self.params["tree"]))
        if why:
            return False, why
        return False if (why := self.clean_at("HEAD")[1]) else True, why


class TermGitBranch(_GitTask):
    task_id = "TermGitBranch"
    description = "Create a branch, commit a file on it, and return to main."

    def build(self, rng: np.random.Generator) -> None:
        w = pick(rng, WORDS, 2)
        self.files = {"README.md": f"# {w[0]}\n"}
        self.setup = [GIT_INIT]
        self.params = {"branch": f"feature/{w[1]}", "file": f"{w[1]}.txt"}
        self.instruction = (
            f"In the git repository /app, create a branch '{self.params['branch']}' from main, "
            f"commit on it a new file {self.params['file']} containing the line '{w[1]}', then switch "
            "back to main. main must not change."
        )

    def solution(self) -> str:
        p = self.params
        name = p["file"].removesuffix(".txt")
        return (
            f"cd /app && git checkout -qb {p['branch']} && echo {name} > {p['file']} && git add {p['file']} "
            f"&& git commit -qm 'add {p['file']}' && git checkout -q main"
        )

    def verify(self) -> tuple[bool, str]:
        p = self.params
        self.prefetch(
            "symbolic-ref -q HEAD",
            "rev-parse --verify --quiet refs/heads/main",
            f"ls-tree -r -z --full-tree refs/heads/{p['branch']}",
            f"merge-base --is-ancestor refs/heads/main refs/heads/{p['branch']}",
        )
        if not self.on_main():
            return False, "HEAD is not main"
        main = self.git("rev-parse --verify --quiet refs/heads/main")
        if main is None or main.strip() != self.baseline["refs/heads/main"]:
            return False, "main changed"
        tree = self.tree(f"refs/heads/{p['branch']}")
        name = p["file"].removesuffix(".txt")
        if tree is None or tree.get(p["file"]) not in (blob_id(name.encode()), blob_id(f"{name}\n".encode())):
            return False, f"{p['file']} is not committed on {p['branch']}"
        if self.git(f"merge-base --is-ancestor refs/heads/main refs/heads/{p['branch']}") is None:
            return False, f"{p['branch']} does not start from main"
        return True, ""


class TermGitRevert(_GitTask):
    task_id = "TermGitRevert"
    description = "Undo a bad commit with git revert (history kept)."

    def build(self, rng: np.random.Generator) -> None:
        w = pick(rng, WORDS, 3)
        self.files = {"config.ini": f"[main]\nname = {w[0]}\nlevel = {int(rng.integers(1, 9))}\n"}
        self.setup = [
            GIT_INIT,
            f"echo 'extra = {w[1]}' >> config.ini && git commit -qam 'add {w[1]} setting'",
            f"sed -i 's/name = .*/name = {w[2]}/' config.ini && git commit -qam 'rename to {w[2]}'",
        ]
        expected = self.files["config.ini"] + f"extra = {w[1]}\n"
        self.params = {"bad": f"rename to {w[2]}", "expected": expected}
        self.instruction = (
            f"In the git repository /app the latest commit ('rename to {w[2]}') was a mistake. Undo "
            "it with a new revert commit (do not rewrite history). The working tree must end clean."
        )

    def solution(self) -> str:
        return "cd /app && git revert --no-edit HEAD >/dev/null"

    def verify(self) -> tuple[bool, str]:
        self.prefetch("cat-file commit HEAD", "ls-tree -r -z --full-tree HEAD")
        head = self.commit("HEAD")
        if head is None:
            return False, "not a git repository"
        if head[0] != [self.baseline["HEAD"]]:
            return False, "expected one new commit on top of the bad one (history kept plus a revert)"
        why = self.same_tree(
            "the revert commit", self.tree("HEAD"), blobs({"config.ini": self.params["expected"]})
        )
        if why:
            return False, why + " (config.ini is not as before the bad commit)"
        return False if (why := self.clean_at("HEAD")[1]) else True, why


class TermFixBug(TerminalTask):
    task_id = "TermFixBug"
    description = "Fix a bug in a small Python module so that its test passes."

    BUGS = (
        (
            "total",
            "def total(xs):\n    return sum(xs[1:])\n",
            "def total(xs):\n    return sum(xs)\n",
            "assert total([{a}, {b}, {c}]) == {a} + {b} + {c}",
        ),
        (
            "largest",
            "def largest(xs):\n    return sorted(xs)[0]\n",
            "def largest(xs):\n    return sorted(xs)[-1]\n",
            "assert largest([{a}, {b}, {c}]) == max({a}, {b}, {c})",
        ),
        (
            "mean",
            "def mean(xs):\n    return sum(xs) // len(xs)\n",
            "def mean(xs):\n    return sum(xs) / len(xs)\n",
            "assert mean([{a}, {b}, {c}]) == ({a} + {b} + {c}) / 3",
        ),
    )

    def build(self, rng: np.random.Generator) -> None:
        name, buggy, fixed, check = self.BUGS[int(rng.integers(0, len(self.BUGS)))]
        a, b, c = (int(x) for x in rng.integers(1, 100, size=3))
        while name == "mean" and (a + b + c) % 3 == 0:
            c += 1
        if name == "largest" and min(a, b, c) == max(a, b, c):
            c += 1
        test = f"from mathlib import {name}\n\n{check.format(a=a, b=b, c=c)}\nprint('ok')\n"
        self.files = {"mathlib.py": buggy, "test_mathlib.py": test}
        self.params = {
            "name": name,
            "fixed": fixed,
            "test_sha": hashlib.sha256(test.encode()).hexdigest(),
            "args": [a, b, c],
        }
        self.instruction = (
            "The test /app/test_mathlib.py fails (run it with `python3 test_mathlib.py` in /app). "
            "Fix the bug in /app/mathlib.py so that it passes. Do not change the test."
        )

    def solution(self) -> str:
        return f"cd /app && cat > mathlib.py <<'EOF'\n{self.params['fixed']}EOF"

    def verify(self) -> tuple[bool, str]:
        """The test's own call and fresh ones drawn now, run in the verifier's isolated Python;
        the values are compared here (a module that prints "ok" and exits proves nothing)."""
        test = self.read("test_mathlib.py")
        if test is None or hashlib.sha256(test.encode()).hexdigest() != self.params["test_sha"]:
            return False, "the test was changed"
        rng = self.verify_rng()
        cases = [self.params["args"], *([int(x) for x in rng.integers(1, 100, size=3)] for _ in range(4))]
        name = self.params["name"]
        check = (
            f"from mathlib import {name}\nRESULT = []\nfor xs in PAYLOAD:\n    try:\n"
            f"        RESULT.append([True, {name}(xs)])\n    except Exception as err:\n"
            "        RESULT.append([False, type(err).__name__])\n"
        )
        got, why = self.python_check(check, cases)
        if not isinstance(got, list) or len(got) != len(cases):
            return False, f"the test fails: {why or 'not every case was answered'}"
        reference: dict = {}
        exec(self.params["fixed"], reference)  # noqa: S102 - the task's own correct source
        for xs, answer in zip(cases, got, strict=True):
            if answer != [True, reference[name](list(xs))]:
                return False, f"the test fails: {name}({xs}) gave {answer!r}"
        return True, ""


class TermGitMergeConflict(_GitTask):
    task_id = "TermGitMergeConflict"
    description = "Merge a branch into main and resolve a one-line conflict as instructed."
    max_steps = 10

    def build(self, rng: np.random.Generator) -> None:
        w = pick(rng, WORDS, 5)
        key = ["color", "mode", "owner", "region"][int(rng.integers(0, 4))]
        size = int(rng.integers(1, 100))
        conf = f"name = {w[0]}\n{key} = {w[1]}\nsize = {size}\n"
        branch = f"feature/{w[2]}"
        ours, theirs = w[3], w[4]
        side = "main" if rng.random() < 0.5 else "branch"
        self.files = {"settings.conf": conf}
        self.setup = [
            GIT_INIT,
            f"git checkout -qb {branch} && sed -i 's/^{key} = .*/{key} = {theirs}/' settings.conf "
            f"&& echo '{w[2]} notes' > {w[2]}.md && git add -A && git commit -qm 'set {key} to {theirs}' "
            f"&& git checkout -q main && sed -i 's/^{key} = .*/{key} = {ours}/' settings.conf "
            f"&& git commit -qam 'set {key} to {ours}'",
        ]
        kept = ours if side == "main" else theirs
        self.params = {
            "branch": branch,
            "side": side,
            "expected": conf.replace(f"{key} = {w[1]}", f"{key} = {kept}"),
            "extra": f"{w[2]}.md",
            "extra_text": f"{w[2]} notes\n",
        }
        which = "main's value" if side == "main" else f"the value from {branch}"
        self.instruction = (
            f"In the git repository /app, merge the branch '{branch}' into main. The merge "
            f"conflicts in settings.conf on the '{key}' line: resolve it by keeping {which} "
            f"('{kept}') and everything else unchanged, then commit the merge (a merge commit "
            "with both parents). The working tree must end clean, on main."
        )

    def solution(self) -> str:
        p = self.params
        side = "--ours" if p["side"] == "main" else "--theirs"
        return (
            f"cd /app && git merge -q {p['branch']} >/dev/null 2>&1; git checkout {side} settings.conf "
            "&& git add settings.conf && git commit -q --no-edit"
        )

    def verify(self) -> tuple[bool, str]:
        p = self.params
        self.prefetch(
            "cat-file commit HEAD",
            "symbolic-ref -q HEAD",
            "ls-tree -r -z --full-tree HEAD",
        )
        head = self.commit("HEAD")
        if head is None:
            return False, "not a git repository"
        if not self.on_main():
            return False, "HEAD is not main"
        if len(head[0]) != 2:
            return False, "HEAD is not a merge commit"
        if head[0] != [self.baseline["refs/heads/main"], self.baseline[f"refs/heads/{p['branch']}"]]:
            return False, f"HEAD is not a merge of main and {p['branch']}"
        want = blobs({"settings.conf": p["expected"], p["extra"]: p["extra_text"]})
        why = self.same_tree("the merge commit", self.tree("HEAD"), want)
        if why:
            return False, why + f" (settings.conf resolved as asked, {p['extra']} from the branch)"
        return False if (why := self.clean_at("HEAD")[1]) else True, why


class TermGitCherryPick(_GitTask):
    task_id = "TermGitCherryPick"
    description = "Bring exactly one commit of another branch onto main."

    def build(self, rng: np.random.Generator) -> None:
        w = pick(rng, WORDS, 5)
        picked = int(rng.integers(0, 3))
        self.files = {"README.md": f"# {w[0]}\n"}
        commits = " && ".join(
            f"echo '{name} {int(rng.integers(0, 1000))}' > {name}.txt && git add {name}.txt "
            f"&& git commit -qm 'add {name}'"
            for name in w[2:5]
        )
        self.setup = [GIT_INIT, f"git checkout -qb {w[1]} && {commits} && git checkout -q main"]
        self.params = {
            "branch": w[1],
            "picked": w[2 + picked],
            "others": [w[2 + i] for i in range(3) if i != picked],
        }
        self.instruction = (
            f"In the git repository /app, the branch '{w[1]}' has three commits. Apply only the "
            f"commit 'add {w[2 + picked]}' on top of main (one new commit on main with the same "
            "message), without the other two. Stay on main; the working tree must end clean."
        )

    def solution(self) -> str:
        p = self.params
        return (
            f"cd /app && git cherry-pick $(git log --format=%H --grep='^add {p['picked']}$' {p['branch']}) "
            ">/dev/null"
        )

    def verify(self) -> tuple[bool, str]:
        p = self.params
        main_sha, branch_sha = self.baseline["refs/heads/main"], self.baseline[f"refs/heads/{p['branch']}"]
        self.prefetch(
            "cat-file commit HEAD",
            "symbolic-ref -q HEAD",
            f"ls-tree -r -z --full-tree {main_sha}",
            f"ls-tree -r -z --full-tree {branch_sha}",
            "ls-tree -r -z --full-tree HEAD",
        )
        head = self.commit("HEAD")
        if head is None:
            return False, "not a git repository"
        parents, message = head
        if not self.on_main() or parents != [self.baseline["refs/heads/main"]]:
            return False, "expected main with exactly one new commit"
        if message.strip() != f"add {p['picked']}":
            return False, f"the new commit is {message.strip()[:100]!r}"
        main, branch = (
            self.tree(main_sha),
            self.tree(branch_sha),
        )
        if main is None or branch is None:
            return False, "the original commits are gone"
        name = f"{p['picked']}.txt"
        why = self.same_tree("the new commit", self.tree("HEAD"), {**main, name: branch[name]})
        if why:
            return False, why + f" ({name} as on {p['branch']}, and nothing else of it)"
        return False if (why := self.clean_at("HEAD")[1]) else True, why
