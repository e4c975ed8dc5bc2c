"""Git tasks and a bug fix: commit, branch, revert, make a failing test pass.

Set-up and checks that need ``git`` run inside the sandbox (a repository's config could
otherwise run code on the host).
"""

from __future__ import annotations

import hashlib

import numpy as np

from harness_gym.envs.terminal.task import TerminalTask
from harness_gym.envs.terminal.tasks.words import WORDS, pick

GIT_INIT = (
    "git init -q -b main && git config user.email agent@example.com && git config user.name agent "
    "&& git add -A && git commit -qm 'initial commit'"
)


class _GitTask(TerminalTask):
    def git(self, args: str) -> str | None:
        res = self.sh(f"git --no-pager {args}", timeout=10)
        return res.stdout if res.exit_code == 0 else None


class TermGitCommit(_GitTask):
    task_id = "TermGitCommit"
    description = "Commit the pending changes of a git repository with a given message."

    def build(self, rng: np.random.Generator) -> None:
        words = pick(rng, WORDS, 4)
        self.files = {f"{w}.txt": f"{w} v1\n" for w in words[:3]}
        message = f"update {words[0]} and add {words[3]}"
        self.setup = [GIT_INIT, f"echo '{words[0]} v2' > {words[0]}.txt && echo new > {words[3]}.txt"]
        self.params = {"message": message}
        self.instruction = (
            f"/app is a git repository with uncommitted changes (one modified file, one new file). "
            f"Commit all of them in one commit with the message '{message}'. The working tree must end clean."
        )

    def solution(self) -> str:
        return f"cd /app && git add -A && git commit -qm '{self.params['message']}'"

    def verify(self) -> tuple[bool, str]:
        subject = self.git("log -1 --format=%s")
        status = self.git("status --porcelain")
        count = self.git("rev-list --count HEAD")
        if subject is None or status is None or count is None:
            return False, "not a git repository"
        if subject.strip() != self.params["message"]:
            return False, f"last commit message is {subject.strip()!r}"
        if status.strip():
            return False, "the working tree is not clean"
        if count.strip() != "2":
            return False, "expected exactly one new commit"
        return True, ""


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
        head = self.git("rev-parse --abbrev-ref HEAD")
        if head is None or head.strip() != "main":
            return False, f"HEAD is {head!r}, not main"
        shown = self.git(f"show {p['branch']}:{p['file']}")
        if shown is None or shown.strip() != p["file"].removesuffix(".txt"):
            return False, f"{p['file']} is not committed on {p['branch']}"
        main_count = self.git("rev-list --count main")
        if main_count is None or main_count.strip() != "1":
            return False, "main changed"
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
        count = self.git("rev-list --count HEAD")
        status = self.git("status --porcelain")
        if count is None or status is None:
            return False, "not a git repository"
        if count.strip() != "4":
            return False, f"expected 4 commits (history kept plus a revert), found {count.strip()}"
        if status.strip():
            return False, "the working tree is not clean"
        if self.read("config.ini") != self.params["expected"]:
            return False, "config.ini is not as before the bad commit"
        return True, ""


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
        self.params = {"name": name, "fixed": fixed, "test_sha": hashlib.sha256(test.encode()).hexdigest()}
        self.instruction = (
            "The test /app/test_mathlib.py fails (run it with `python3 test_mathlib.py` in /app). "
            "Fix the bug in /app/mathlib.py so that it passes. Do not change the test."
        )

    def solution(self) -> str:
        return f"cd /app && cat > mathlib.py <<'EOF'\n{self.params['fixed']}EOF"

    def verify(self) -> tuple[bool, str]:
        test = self.read("test_mathlib.py")
        if test is None or hashlib.sha256(test.encode()).hexdigest() != self.params["test_sha"]:
            return False, "the test was changed"
        res = self.sh("cd /app && python3 test_mathlib.py", timeout=10)
        ok = res.exit_code == 0 and res.stdout.strip().endswith("ok")
        return ok, "" if ok else f"the test fails: {res.stderr[-300:]}"


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
        head = self.git("rev-parse --abbrev-ref HEAD")
        parents = self.git("rev-list --parents -n 1 HEAD")
        status = self.git("status --porcelain")
        if head is None or parents is None or status is None:
            return False, "not a git repository"
        if head.strip() != "main":
            return False, f"HEAD is {head.strip()!r}, not main"
        if len(parents.split()) != 3:
            return False, "HEAD is not a merge commit"
        if self.sh(f"cd /app && git merge-base --is-ancestor {p['branch']} HEAD", timeout=10).exit_code:
            return False, f"{p['branch']} is not merged into main"
        if status.strip():
            return False, "the working tree is not clean"
        if self.read("settings.conf") != p["expected"]:
            return False, "settings.conf is not resolved as asked"
        if self.read(p["extra"]) is None:
            return False, f"{p['extra']} from the branch is missing"
        return True, ""


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
        head = self.git("rev-parse --abbrev-ref HEAD")
        subject = self.git("log -1 --format=%s")
        count = self.git("rev-list --count HEAD")
        status = self.git("status --porcelain")
        if None in (head, subject, count, status):
            return False, "not a git repository"
        if head.strip() != "main" or count.strip() != "2":
            return (
                False,
                f"expected main with exactly one new commit (on {head.strip()}, {count.strip()} commits)",
            )
        if subject.strip() != f"add {p['picked']}":
            return False, f"the new commit is {subject.strip()!r}"
        if status.strip():
            return False, "the working tree is not clean"
        want = self.git(f"show {p['branch']}:{p['picked']}.txt")
        if want is None or self.read(f"{p['picked']}.txt") != want:
            return False, f"{p['picked']}.txt is not as on {p['branch']}"
        if any(self.exists(f"{o}.txt") for o in p["others"]):
            return False, "other commits of the branch were applied too"
        return True, ""
