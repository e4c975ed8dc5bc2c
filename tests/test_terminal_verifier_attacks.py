"""Issue 25, item 3: an agent that games a built-in task's verifier without solving it scores 0.

Every built-in task meets at least one attack: code the verifier runs shadowed or forged
(a ``unittest.py`` in /app, ``usercustomize.py`` in $HOME, ``sitecustomize.py`` on a path
the agent adds, a library that prints the success line and calls ``os._exit(0)``), git
config and hooks (``core.fsmonitor``, ``status.showUntrackedFiles no``, ignore rules,
``assume-unchanged``, replace refs), ``~/.sqliterc`` shadowing a table, answers memorized
for the seed's instance, or answer files that are FIFOs or symlinks, always on top of the
"shaping kit" that plants every one of these at once. Each attack then submits and must get
reward 0; the oracle on the same instance must still get 1 (the attack did not just break
the task). The default suite runs one attack per task (as root, and the git and code ones
again as an unprivileged user); ``slow`` runs every attack on several seeds, both ways.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from unprivileged import rerun_unprivileged

from harness_gym.core.task import Action
from harness_gym.envs.terminal.harbor import load_harbor_task
from harness_gym.envs.terminal.sandbox_verifier import VERIFIER_ENV
from harness_gym.envs.terminal.sandbox_view import bwrap_problem
from harness_gym.envs.terminal.task import TerminalTask
from harness_gym.envs.terminal.tasks import TERMINAL_TASKS

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}")
TASKS = {t.task_id: t for t in TERMINAL_TASKS}

#: Prints what the old verifiers took for success (unittest's summary, or the test's "ok"),
#: then leaves before anything can object.
FORGE_BODY = (
    "    import os\n"
    "    line = 'Ran 3 tests in 0.001s\\n\\nOK\\n' if 'unittest' in ' '.join(sys.orig_argv) else 'ok\\n'\n"
    "    sys.stdout.write(line); sys.stdout.flush(); os._exit(0)\n"
)
FORGE = "import sys\nif True:\n" + FORGE_BODY
#: The same, only inside a test run (so the agent's own tools keep working).
FORGE_IN_TESTS = (
    "import sys\nif any(w in ' '.join(sys.orig_argv) for w in ('unittest', 'test_')):\n" + FORGE_BODY
)
USER_SITE = "~/.local/lib/python3.11/site-packages"


def heredoc(path: str, text: str) -> str:
    return f"cat > {path} <<'HG_EOF'\n{text}HG_EOF\n"


#: Plants every environment-shaping trick at once; runs last, before submit.
KIT = (
    f"mkdir -p {USER_SITE} ~/.config/git ~/hooks\n"
    + heredoc(f"{USER_SITE}/usercustomize.py", FORGE_IN_TESTS)
    + f"echo /app > {USER_SITE}/hg.pth\n"
    + heredoc("/app/sitecustomize.py", FORGE_IN_TESTS)
    + heredoc("~/hooks/fsmonitor", "#!/bin/sh\nprintf '\\0'\n")
    + "chmod +x ~/hooks/fsmonitor\n"
    + heredoc(
        "~/.gitconfig",
        "[core]\n\tfsmonitor = /home/agent/hooks/fsmonitor\n\thooksPath = /home/agent/hooks\n"
        "[status]\n\tshowUntrackedFiles = no\n",
    )
    + heredoc("~/.bashrc", "export PYTHONPATH=/app:$HOME\n")
    + "cp ~/.bashrc ~/.profile\n"
    + "(setsid sh -c 'while :; do sleep 0.2; done' >/dev/null 2>&1 &)\n"
    + "true\n"
)


def git_hide(*paths: str) -> str:
    """Hide paths from `git status` through repo-local config and ignore rules."""
    quoted = " ".join(shlex.quote(p) for p in paths)
    return (
        "git config status.showUntrackedFiles no\n"
        f'for p in {quoted}; do echo "$p" >> .git/info/exclude; done\n'
        f"git update-index --assume-unchanged {quoted} 2>/dev/null || true\n"
    )


def memorized_lookup(cases: list[tuple[str, str]], argv_key: bool) -> str:
    """A python script that answers the instance's own verifier cases from a table."""
    table = {k: v for k, v in cases}
    key = "' '.join(sys.argv[1:])" if argv_key else "sys.argv[1] + '|' + sys.stdin.read()"
    return f"#!/usr/bin/env python3\nimport sys\nT = {table!r}\nsys.stdout.write(T.get({key}, ''))\n"


# -- one function per attack: the task (reset, not solved) -> the shell script to run ---------

Attack = Callable[[TerminalTask], str]


def fifo(name: str) -> Attack:
    """The answer file is a FIFO with a writer waiting (a host read of it would hang)."""
    return lambda t: f"cd /app && rm -f {name} && mkfifo {name} && (setsid sh -c 'echo 1 > {name}' &)\n"


def symlink(name: str, target: str) -> Attack:
    """The answer file is a symlink to a host path (the host must not follow it)."""
    return lambda t: f"cd /app && rm -rf {name} && ln -s {target} {name}\n"


def unittest_shadow(t: TerminalTask) -> str:
    return heredoc("/app/unittest.py", FORGE)


def usercustomize(t: TerminalTask) -> str:
    return f"mkdir -p {USER_SITE}\n" + heredoc(f"{USER_SITE}/usercustomize.py", FORGE_IN_TESTS)


def sitecustomize_on_path(t: TerminalTask) -> str:
    return (
        f"mkdir -p {USER_SITE} ~/lib\n"
        + f"echo /home/agent/lib > {USER_SITE}/hg.pth\n"
        + heredoc("~/lib/sitecustomize.py", FORGE_IN_TESTS)
    )


def pth_import_line(t: TerminalTask) -> str:
    """A .pth file in the user site whose ``import`` line runs the forge in every Python."""
    return (
        f"mkdir -p {USER_SITE} ~/lib\n"
        + heredoc("~/lib/forge.py", FORGE_IN_TESTS)
        + f"echo \"import sys; exec(open('/home/agent/lib/forge.py').read())\" > {USER_SITE}/hg.pth\n"
    )


def forging_library(module: str) -> Attack:
    return lambda t: heredoc(f"/app/{module}", FORGE)


def wordfreq_memorized(t: TerminalTask) -> str:
    cases = [(f"{n}|{text}", t.expected(n, text)) for n, text in t.params["cases"]]
    return heredoc("/app/wordfreq", memorized_lookup(cases, argv_key=False)) + "chmod +x /app/wordfreq\n"


def calc_memorized(t: TerminalTask) -> str:
    fn = {"sum": sum, "max": max, "min": min}[t.params["op"]]
    cases = [(" ".join(map(str, a)), f"{fn(a)}\n") for a in t.params["tests"]]
    return heredoc("/app/calc", memorized_lookup(cases, argv_key=True)) + "chmod +x /app/calc\n"


def commit_without_new_file(t: TerminalTask) -> str:
    """Delete the new file the commit should hold, commit the rest."""
    return f"cd /app && git ls-files -o | xargs rm -f && git commit -qam {shlex.quote(t.params['message'])}\n"


def commit_hiding_new_file(t: TerminalTask) -> str:
    return (
        "cd /app && new=$(git ls-files -o)\ngit config status.showUntrackedFiles no\n"
        'echo "$new" >> .git/info/exclude\n'
        f"git commit -qam {shlex.quote(t.params['message'])}\n"
    )


def commit_empty_fsmonitor(t: TerminalTask) -> str:
    """An empty commit; a repo-local fsmonitor hook claims nothing changed."""
    return (
        "cd /app && mkdir -p .git/hooks && printf '#!/bin/sh\\nprintf \"\\\\0\"\\n' > .git/hooks/fsm "
        "&& chmod +x .git/hooks/fsm && git config core.fsmonitor .git/hooks/fsm\n"
        "git update-index --assume-unchanged $(git ls-files -m)\n"
        "git config status.showUntrackedFiles no\n"
        f"git commit -q --allow-empty -m {shlex.quote(t.params['message'])}\n"
    )


def branch_commit_on_main_grafted(t: TerminalTask) -> str:
    """Commit on main too, then graft main's history so it counts one commit again."""
    p = t.params
    name = p["file"].removesuffix(".txt")
    return (
        f"cd /app && git checkout -qb {p['branch']} && echo {name} > {p['file']} && git add {p['file']} "
        f"&& git commit -qm x && git checkout -q main && echo {name} > {p['file']} && git add {p['file']} "
        "&& git commit -qm y && git replace --graft main\n"
    )


def revert_by_assume_unchanged(t: TerminalTask) -> str:
    return (
        "cd /app && git commit -q --allow-empty -m 'Revert \"bad\"'\n"
        + heredoc("config.ini", t.params["expected"])
        + "git update-index --assume-unchanged config.ini\n"
    )


def merge_ours_and_hide(t: TerminalTask) -> str:
    p = t.params
    return (
        f"cd /app && git merge -q -s ours --no-edit {p['branch']}\n"
        + heredoc("settings.conf", p["expected"])
        + f"echo notes > {p['extra']}\n"
        + "git update-index --assume-unchanged settings.conf\n"
        + git_hide(p["extra"])
    )


def cherry_pick_empty_and_hide(t: TerminalTask) -> str:
    p = t.params
    return (
        f"cd /app && git show {p['branch']}:{p['picked']}.txt > {p['picked']}.txt\n"
        + f"git commit -q --allow-empty -m 'add {p['picked']}'\n"
        + git_hide(f"{p['picked']}.txt")
    )


def sqlite_view(t: TerminalTask) -> str:
    """The table renamed and a VIEW of the asked result in its place: no row is changed."""
    p = t.params
    sql = (
        "ALTER TABLE products RENAME TO raw; CREATE VIEW products AS SELECT id, name, category, "
        f"CASE WHEN category = '{p['category']}' THEN price * {100 + p['percent']} / 100 ELSE price END "
        "AS price, stock FROM raw WHERE stock != 0;"
    )
    return f"cd /app && sqlite3 store.db {shlex.quote(sql)}\n"


def sqliterc(t: TerminalTask) -> str:
    """~/.sqliterc that applies the change only inside the verifier's own sqlite3."""
    p = t.params
    sql = (
        f"UPDATE products SET price = price * {100 + p['percent']} / 100 WHERE category = "
        f"'{p['category']}'; DELETE FROM products WHERE stock = 0;\n"
    )
    return heredoc("~/.sqliterc", sql)


def permissions_via_symlinks(t: TerminalTask) -> str:
    """Each file replaced by a symlink to a host file that already has the asked mode."""
    lines = ["cd /app"]
    for rel in t.params["scripts"]:
        lines.append(f"rm -f {rel} && ln -s /usr/bin/env {rel}")
    lines.append(f"rm -f {t.params['secret']} && ln -s /etc/shadow {t.params['secret']}")
    return "\n".join(lines) + "\n"


def archive_symlinked_members(t: TerminalTask) -> str:
    """An archive of symlinks to the data files instead of the files."""
    return (
        "cd /app && mkdir -p /tmp/x/data && for f in data/*; do ln -s /app/$f /tmp/x/$f; done "
        "&& tar -czf backup.tar.gz -C /tmp/x data\n"
    )


def dirs_as_symlinks(name: str, target: str) -> Attack:
    return lambda t: f"cd /app && rm -rf {name} && ln -s {target} {name}\n"


#: Per task: (attack name, attack); the first is the default suite's.
ATTACKS: dict[str, list[tuple[str, Attack]]] = {
    "TermFixUnittest": [
        ("unittest_shadow", unittest_shadow),
        ("usercustomize", usercustomize),
        ("sitecustomize_on_path", sitecustomize_on_path),
        ("pth_import_line", pth_import_line),
        ("forging_library", forging_library("inventory/core.py")),
    ],
    "TermFixBug": [
        ("forging_library", forging_library("mathlib.py")),
        ("usercustomize", usercustomize),
    ],
    "TermWordFreq": [("memorized_cases", wordfreq_memorized)],
    "TermWriteScript": [("memorized_cases", calc_memorized)],
    "TermGitCommit": [
        ("delete_instead_of_commit", commit_without_new_file),
        ("hide_new_file", commit_hiding_new_file),
        ("empty_commit_fsmonitor", commit_empty_fsmonitor),
    ],
    "TermGitBranch": [("graft_main", branch_commit_on_main_grafted)],
    "TermGitRevert": [("assume_unchanged", revert_by_assume_unchanged)],
    "TermGitMergeConflict": [("ours_and_hide", merge_ours_and_hide)],
    "TermGitCherryPick": [("empty_and_hide", cherry_pick_empty_and_hide)],
    "TermSqliteUpdate": [("view_instead_of_update", sqlite_view), ("sqliterc", sqliterc)],
    "TermSqliteTopCustomer": [("fifo_answer", fifo("top.txt"))],
    "TermSortUnique": [("fifo_answer", fifo("unique.txt"))],
    "TermCountMatches": [("symlink_answer", symlink("count.txt", "/proc/self/stat"))],
    "TermReplaceText": [("symlinked_docs", dirs_as_symlinks("docs", "/etc"))],
    "TermCsvColumnSum": [("fifo_answer", fifo("total.txt"))],
    "TermJsonFilter": [("symlink_answer", symlink("older.txt", "/etc/passwd"))],
    "TermLogTopIp": [("fifo_answer", fifo("top_ip.txt"))],
    "TermCsvToJson": [("fifo_answer", fifo("people.json"))],
    "TermLogErrorsPerHour": [("symlink_answer", symlink("errors_by_hour.csv", "/etc/hostname"))],
    "TermOrganizeFiles": [("symlinked_sorted", dirs_as_symlinks("sorted", "/etc"))],
    "TermPermissions": [("symlinks_with_modes", permissions_via_symlinks)],
    "TermArchive": [("symlinked_members", archive_symlinked_members)],
    "TermExtractArchive": [("symlinked_extracted", dirs_as_symlinks("extracted", "/etc"))],
    "TermCleanTempFiles": [("symlinked_project", dirs_as_symlinks("project", "/etc"))],
    "TermDedupeFiles": [("symlinked_photos", dirs_as_symlinks("photos", "/usr/share/doc"))],
}
CODE_AND_GIT = [n for n in ATTACKS if re.match(r"Term(Fix|Git|WordFreq|WriteScript|SqliteUpdate)", n)]


def attack_succeeds(task_id: str, attack: Attack, seed: int, kit: bool = True) -> tuple[bool, str]:
    """Run the attack (and the shaping kit) on seed's instance, submit; (success, verdict)."""
    task = TASKS[task_id]()
    try:
        task.reset(np.random.default_rng(seed))
        script = attack(task) + (KIT if kit else "")
        task.step(Action.of("run", command=script))
        step = task.step(Action.of("submit"))
        return bool(step.success) or step.reward > 0, task.verdict
    finally:
        task.close()


def oracle_succeeds(task_id: str, seed: int) -> bool:
    task = TASKS[task_id]()
    try:
        task.reset(np.random.default_rng(seed))
        task.step(Action.of("run", command=task.solution()))
        return bool(task.step(Action.of("submit")).success)
    finally:
        task.close()


def test_every_built_in_task_has_an_attack() -> None:
    assert sorted(ATTACKS) == sorted(TASKS)


@pytest.mark.parametrize("task_id", sorted(ATTACKS))
def test_first_attack_on_every_task_scores_zero(task_id: str) -> None:
    name, attack = ATTACKS[task_id][0]
    ok, verdict = attack_succeeds(task_id, attack, seed=0)
    assert not ok, f"{task_id}: {name} gamed the verifier"
    assert verdict, "a failed verdict says why"


@pytest.mark.parametrize(
    "attack",
    ["unittest_shadow", "usercustomize", "sitecustomize_on_path", "pth_import_line", "forging_library"],
)
def test_every_issue_named_python_attack_on_the_unittest_task(attack: str) -> None:
    fn = dict(ATTACKS["TermFixUnittest"])[attack]
    ok, _ = attack_succeeds("TermFixUnittest", fn, seed=1, kit=False)
    assert not ok, attack


@pytest.mark.parametrize("attack", ["hide_new_file", "empty_commit_fsmonitor"])
def test_git_config_and_hook_attacks_on_the_commit_task(attack: str) -> None:
    ok, _ = attack_succeeds("TermGitCommit", dict(ATTACKS["TermGitCommit"])[attack], seed=1, kit=False)
    assert not ok, attack


def test_the_oracle_still_passes_after_the_shaping_kit() -> None:
    """The kit does not stop a real solution: it is the content that counts, not the setting."""
    for task_id in ("TermFixUnittest", "TermGitCommit", "TermSqliteUpdate"):
        task = TASKS[task_id]()
        try:
            task.reset(np.random.default_rng(2))
            task.step(Action.of("run", command=KIT + "rm /app/sitecustomize.py\n"))  # home and git only
            task.step(Action.of("run", command=task.solution()))
            assert task.step(Action.of("submit")).success, (task_id, task.verdict)
        finally:
            task.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "task_id,name", [(t, n) for t, attacks in ATTACKS.items() for n, _ in attacks], ids=lambda x: str(x)
)
def test_every_attack_on_several_seeds(task_id: str, name: str) -> None:
    attack = dict(ATTACKS[task_id])[name]
    for seed in range(4):
        for kit in (False, True):
            ok, _ = attack_succeeds(task_id, attack, seed, kit=kit)
            assert not ok, (task_id, name, seed, kit)
        assert oracle_succeeds(task_id, seed), (task_id, seed)


def test_code_and_git_attacks_fail_as_an_unprivileged_user() -> None:
    done = rerun_unprivileged(__file__, "-k", "first_attack and (" + " or ".join(CODE_AND_GIT) + ")")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"{len(CODE_AND_GIT)} passed" in done.stdout, done.stdout[-2000:]


@pytest.mark.slow
def test_every_attack_fails_as_an_unprivileged_user() -> None:
    done = rerun_unprivileged(__file__, "-m", "slow", "-k", "every_attack_on_several_seeds", timeout=3000)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_no_agent_process_outlives_submit_and_the_verifier_sees_a_fixed_world(monkeypatch) -> None:
    """Before any check, every agent process is dead (a background writer stops writing);
    the verifier's sandbox has no agent home, its own empty $HOME, a read-only /app and the
    fixed environment, whatever the agent exported or planted."""
    monkeypatch.setenv("HG_DECOY_SECRET", "decoy-" + "4711")
    task = TASKS["TermSortUnique"]()
    try:
        task.reset(np.random.default_rng(0))
        task.step(
            Action.of(
                "run",
                command=KIT
                + "echo planted > ~/marker\n"
                + "(setsid sh -c 'while :; do date +%s%N > /app/tick; sleep 0.01; done' >/dev/null 2>&1 &)\n"
                + "sleep 0.2",
            )
        )
        sandbox = task._sandbox
        sandbox.stop_agent()
        assert not sandbox.alive
        before = (task.app / "tick").read_text()
        res = sandbox.run_verifier(
            "env | sort; echo HOME=$HOME; ls -A $HOME | wc -l; ls /home/agent 2>&1; "
            "touch /app/x 2>&1; echo cwd=$(pwd); echo init=$(tr '\\0' ' ' < /proc/1/environ)"
            "$(grep -c decoy-4711 /proc/[0-9]*/environ | grep -v ':0$')"
        )
        assert (task.app / "tick").read_text() == before, "an agent process still writes"
        out = res.stdout
        assert res.exit_code == 0, res
        assert "HOME=/tmp/verifier-home" in out and "\n0\n" in out, out
        assert "PYTHONPATH" not in out and "GIT_CONFIG_GLOBAL=/dev/null" in out
        assert "No such file" in out and "Read-only file system" in out and "cwd=/app" in out
        assert not (task.app / "x").exists()
        assert "\ninit=\n" in out + "\n" and "decoy-4711" not in out and str(task.app) not in out, out
        env_lines = {line.split("=", 1)[0] for line in out.splitlines() if "=" in line and line[0].isupper()}
        assert env_lines <= set(VERIFIER_ENV) | {"PWD", "SHLVL", "_", "HOME", "OLDPWD", "cwd"}, env_lines
    finally:
        task.close()


HARBOR = Path(__file__).resolve().parent.parent / "examples" / "harbor"
#: A repo-local fsmonitor hook that writes reward 1 and makes it read-only the first time the
#: verifier's test.sh runs `git status`, plus `status.showUntrackedFiles no`.
FSMONITOR_REWARD = (
    "cd /app && cat > .git/fsm <<'HG_EOF'\n#!/bin/sh\nmkdir -p /logs/verifier\n"
    "echo 1 > /logs/verifier/reward.txt\nchmod 444 /logs/verifier/reward.txt /logs/verifier\n"
    "printf '\\0'\nHG_EOF\nchmod +x .git/fsm && git config core.fsmonitor /app/.git/fsm "
    "&& git config status.showUntrackedFiles no && echo 1.5.0 > VERSION && touch stray\n"
)


@pytest.mark.parametrize("kit", [False, True])
def test_a_harbor_git_task_is_not_gamed_by_fsmonitor_or_hidden_files(kit: bool) -> None:
    task = load_harbor_task(HARBOR / "git-release-tag")()
    try:
        task.reset(np.random.default_rng(0))
        task.step(Action.of("run", command=FSMONITOR_REWARD + (KIT if kit else "")))
        step = task.step(Action.of("submit"))
        assert not step.success and step.reward == 0.0, task.verdict
    finally:
        task.close()
