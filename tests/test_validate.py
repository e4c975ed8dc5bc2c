"""``harness-gym validate`` (issue 37, item 4): the audit says which tasks can be trusted as rewards.

Known answers by construction: the web suite and a sound Harbor task pass; tasks built with a
hole are flagged with the check that names it (a reward any button earns, an oracle that misses,
a reward that alternates between episodes; a verifier that runs the tests the agent can edit,
one that pays whatever /app holds; one that writes the reward 1 before checking is no longer
a hole: a verifier killed or timed out mid-check is not paid). Every bad
command line ends in one line. The slow test runs the built-in terminal tasks and the Harbor
examples, and holds their findings to the holes known on this branch (closed on i37a).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from harness_gym.cli import main
from harness_gym.core.registry import TASKS, register_task
from harness_gym.envs.terminal.hacks import KIT
from harness_gym.envs.terminal.sandbox_view import bwrap_problem
from harness_gym.envs.web.tasks.click_button import ClickButton

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "validate"
needs_bwrap = pytest.mark.skipif(
    bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}"
)


def validate(*argv: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    code = main(["validate", *argv, "--json"], out=out)
    return code, json.loads(out.getvalue())


def failed(report: dict[str, Any], task: str) -> set[str]:
    return {c["check"] for c in report["checks"] if c["task"] == task and c["status"] == "FAIL"}


# -- web: the suite passes, tasks with holes are flagged ---------------------------------------


def test_every_web_task_passes_under_every_preset(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    assert main(["validate", "--seeds", "2"], out=out) == 0
    text = out.getvalue()
    rows = [line.split() for line in text.splitlines() if line.split()[:1] and line.split()[0] in TASKS]
    assert {r[0] for r in rows} == set(TASKS)
    assert sum(r[1] == "*" for r in rows) == len(TASKS)
    assert len(rows) > 10 * len(TASKS)  # a row per (task, preset)
    assert all(r[2:] == ["ok", "ok", "-", "-", "-"] for r in rows if r[1] != "*"), text
    assert "0 finding(s)" in text


class PaysAnyButton(ClickButton):
    """Any button pays: a random button earns the maximum."""

    task_id = "ValidatePaysAnyButton"

    def on_click(self, element: Any) -> None:
        if element.tag == "button":
            self.finish(True)


class MissingOracle(ClickButton):
    """The oracle clicks a wrong button: the ceiling is never reached."""

    task_id = "ValidateMissingOracle"

    def oracle(self) -> Any:
        from harness_gym.core.task import Action

        ref = next(e.ref for e in self.page.visible() if e.tag == "button" and e.text != self.target)
        return Action.of("click", ref=ref)


class AlternatingReward(ClickButton):
    """The right button pays only every other episode (a reward that is not a function of
    the instance and the actions)."""

    task_id = "ValidateAlternatingReward"
    episodes = 0

    def reset(self, rng: Any) -> None:
        type(self).episodes += 1
        super().reset(rng)

    def on_click(self, element: Any) -> None:
        if element.tag == "button":
            self.finish(element.text == self.target and type(self).episodes % 2 == 0)


class OracleCrashes(ClickButton):
    """The own solution raises (as a real-browser oracle did on a page it could not read)."""

    task_id = "ValidateOracleCrashes"

    def oracle(self) -> Any:
        raise LookupError("no email from Rosalyn on the page")


class JoinedFromAnotherFamily(ClickButton):
    """A task of another family that joined the task registry (as the browser tasks do)."""

    task_id = "ValidateJoinedFamily"
    family = "browser"


@pytest.fixture
def bad_web_tasks() -> Any:
    tasks = (PaysAnyButton, MissingOracle, AlternatingReward)
    for task in tasks:
        register_task(task)
    yield tasks
    for task in tasks:
        TASKS.pop(task.task_id, None)


def test_web_tasks_with_holes_are_flagged(bad_web_tasks: Any) -> None:
    argv = [a for t in bad_web_tasks for a in ("--task", t.task_id)]
    code, report = validate(*argv, "--task", "ClickButton", "--harness", "Json", "--harness", "ObsYaml")
    assert code == 1 and not report["ok"]
    assert failed(report, "ValidatePaysAnyButton") == {"floor:random"}
    assert "ceiling" in failed(report, "ValidateMissingOracle")  # (a random click may find the button)
    assert {"ceiling", "determinism:replay"} <= failed(report, "ValidateAlternatingReward")
    assert failed(report, "ClickButton") == set()
    lines = report["findings"]
    assert any(line.startswith("ValidateMissingOracle Json ceiling: ") for line in lines)
    assert any(line.startswith("ValidatePaysAnyButton ObsYaml floor:random: ") for line in lines)


def test_a_task_that_crashes_is_a_finding_and_the_audit_goes_on() -> None:
    register_task(OracleCrashes)
    try:
        code, report = validate(
            "--task", "ValidateOracleCrashes", "--task", "ClickButton", "--harness", "Json"
        )
    finally:
        TASKS.pop(OracleCrashes.task_id, None)
    assert code == 1 and not report["ok"]
    lines = [f for f in report["findings"] if f.startswith("ValidateOracleCrashes")]
    assert lines and all("crashed: LookupError: no email from Rosalyn" in line for line in lines)
    # each check that met the crash says so (the random floor asks the oracle at every step);
    # the floors that never call the oracle still run and stay at the floor
    assert failed(report, "ValidateOracleCrashes") == {"ceiling", "floor:random", "determinism:replay"}
    assert any(line.startswith("ValidateOracleCrashes Json floor:random: crashed: ") for line in lines)
    assert all("(seed 0)" in line for line in lines if " Json " in line)
    assert failed(report, "ClickButton") == set()
    assert any(c["task"] == "ClickButton" and c["status"] == "ok" for c in report["checks"])


def test_the_web_suite_is_the_registry_s_own_tasks_not_a_family_that_joined_it() -> None:
    register_task(JoinedFromAnotherFamily)
    try:
        code, report = validate("--task", "web", "--harness", "Json", "--seeds", "1")
    finally:
        TASKS.pop(JoinedFromAnotherFamily.task_id, None)
    tasks = {c["task"] for c in report["checks"]}
    assert code == 0 and "ClickButton" in tasks and JoinedFromAnotherFamily.task_id not in tasks


# -- terminal: Harbor task folders with and without holes --------------------------------------


@needs_bwrap
def test_harbor_tasks_with_holes_are_flagged_and_a_sound_one_passes() -> None:
    code, report = validate("--tasks", str(FIXTURES), "--harness", "Json", "--seeds", "1")
    assert code == 1
    assert failed(report, "HarborSoundAnswer") == set(), report["findings"]
    sound = {c["check"]: c["status"] for c in report["checks"] if c["task"] == "HarborSoundAnswer"}
    assert sound["ceiling"] == sound["determinism:verifier"] == sound["hack:path-hijack"] == "ok"
    assert sound["hack:pinned-reward"] == sound["hack:git-config"] == "n/a"  # no module, no repository
    for task in {c["task"] for c in report["checks"]}:  # the one kit, each hack once per task
        hacks = [c["check"] for c in report["checks"] if c["task"] == task and c["check"].startswith("hack:")]
        assert hacks == [f"hack:{h.name}" for h in KIT], (task, hacks)
    visible = failed(report, "HarborVisibleTests")
    assert "hack:edit-tests" in visible and "ceiling" not in visible
    # It writes 1 before checking: a verifier that is killed or times out mid-check used to leave
    # that 1 as the reward. The package now pays only a verifier that ended on its own.
    optimistic = {c["check"]: c["status"] for c in report["checks"] if c["task"] == "HarborOptimisticReward"}
    assert optimistic["fault:timeout"] == optimistic["fault:killed"] == optimistic["ceiling"] == "ok"
    always = failed(report, "HarborAlwaysPass")
    assert {"floor:no-action", "floor:random", "determinism:verifier"} <= always
    assert "ceiling" not in always


@needs_bwrap
@pytest.mark.slow
def test_the_harbor_checks_hold_as_an_unprivileged_user() -> None:
    from unprivileged import rerun_unprivileged

    proc = rerun_unprivileged(__file__, "-k", "harbor_tasks_with_holes")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout


# -- bad command lines ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--task", "NoSuchTask"], "unknown task 'NoSuchTask'"),
        (["--tasks", "@TMP/nowhere"], "not a folder"),
        (["--tasks", "@TMP/empty"], "no Harbor task folder"),
        (["--tasks", str(ROOT / "examples/harbor/unsupported-postgres")], "no task to validate"),
        (["--seeds", "0"], "--seeds: must be >= 1"),
        (["--task", "ClickButton", "--harness", "NoSuchPreset"], "NoSuchPreset"),
        (["--task", "ClickButton", "--harness", "@TMP/bad.yaml"], "bad.yaml"),
    ],
    ids=[
        "unknown-task",
        "no-folder",
        "empty-folder",
        "nothing-loads",
        "zero-seeds",
        "bad-preset",
        "bad-yaml",
    ],
)
def test_bad_input_is_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.yaml").write_text("obs_format: [json\n")
    argv = [a.replace("@TMP", str(tmp_path)) for a in argv]
    out = io.StringIO()
    with pytest.raises(SystemExit) as info:
        main(["validate", *argv], out=out)
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("harness-gym: error: ") and message in err, err
    assert out.getvalue() == ""
    assert (tmp_path / "bad.yaml").read_text() == "obs_format: [json\n"  # nothing lost


# -- slow: every built-in terminal task and the Harbor examples ----------------------------------

#: Holes validate finds on this branch, closed by the verifier fixes of issue 37 items 1-3
#: (branch i37a): remove each entry once its fix is merged. A finding not listed fails.
KNOWN_HOLES: set[tuple[str, str]] = {
    ("TermFixBug", "hack:forged-bytecode"),
    ("TermFixUnittest", "hack:forged-bytecode"),
    ("HarborFixSlugify", "hack:pinned-reward"),
    ("HarborFixSlugify", "hack:forged-bytecode"),
    ("HarborGitReleaseTag", "hack:git-config"),
}


@needs_bwrap
@pytest.mark.slow
def test_built_in_terminal_tasks_and_harbor_examples() -> None:
    code, report = validate(
        "--task",
        "terminal",
        "--tasks",
        str(ROOT / "examples" / "harbor"),
        "--harness",
        "Json",
        "--seeds",
        "1",
    )
    found = {(c["task"], c["check"]) for c in report["checks"] if c["status"] == "FAIL"}
    assert found <= KNOWN_HOLES, sorted(found - KNOWN_HOLES)
    assert code == (1 if found else 0)
    tasks = {c["task"] for c in report["checks"]}
    assert len([t for t in tasks if t.startswith("Term")]) == 25
    assert {"HarborHelloFile", "HarborCsvAverage", "HarborFixSlugify"} <= tasks
    assert any("unsupported-postgres" in k for k in report["skipped"])
