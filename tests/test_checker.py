"""check_harness finds what breaks the contract, and names the factor levels involved."""

from __future__ import annotations

import io
import itertools

import pytest

from harness_gym import PRESETS, Harness, make_env
from harness_gym.cli import main
from harness_gym.core.checker import HarnessCheckError, check_harness, is_pure_presentation
from harness_gym.core.formats import RENDERERS, register_format
from harness_gym.core.space import DEFAULT_SPACE
from harness_gym.envs.web.tasks import EnterText
from harness_gym.wrappers import DropTools, RestyleTools


@pytest.mark.parametrize("preset", list(PRESETS))
def test_presets_pass_on_every_task(preset: str) -> None:
    for task in ("ClickTab", "EmailInbox", "UseAutocomplete"):
        report = check_harness(preset, task, seeds=range(4))
        assert report.ok and report.checks["round_trip"] > 0 and report.checks["oracle"] == 4


def test_checks_a_wrapped_env() -> None:
    report = check_harness(RestyleTools(make_env("LoginUser"), "command"), seeds=range(3))
    assert report.harness.tool_style == "command" and report.ok


def test_a_nondeterministic_renderer_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = itertools.count()
    monkeypatch.setitem(RENDERERS, "flaky", lambda fields: f"{next(counter)} {fields}")
    with pytest.raises(HarnessCheckError) as err:
        check_harness(Harness(obs_format="flaky", tool_style="xml"), "ClickButton", seeds=range(2))
    failure = err.value.report.failures[0]
    assert failure.check == "determinism" and failure.levels["obs_format"] == "flaky"
    assert "obs_format=flaky" in str(err.value)


def test_a_broken_round_trip_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_gym.core import tools

    real = tools.Toolbox._format

    def lossy(self, action):  # corrupts the first string argument of a python-style call
        text = real(self, action)
        return text.replace("'", "'x", 1) if self.style == "python" else text

    monkeypatch.setattr(tools.Toolbox, "_format", lossy)
    report = check_harness(
        Harness(tool_style="python", tool_naming="synonyms"),
        EnterText,
        seeds=range(2),
        raise_on_failure=False,
    )
    assert not report.ok
    kinds = {f.check for f in report.failures}
    assert "round_trip" in kinds
    rt = next(f for f in report.failures if f.check == "round_trip")
    assert rt.levels == {"tool_style": "python", "tool_naming": "synonyms"}


def test_dropped_tools_skip_the_oracle_comparison_and_bad_specs_fail_bind() -> None:
    report = check_harness(DropTools(make_env("EnterText"), ["type"]), seeds=range(3))
    assert report.ok and "oracle" not in report.checks
    assert not is_pure_presentation(Harness(step_budget=2), EnterText)
    assert is_pure_presentation(Harness(step_budget=50), EnterText)
    report = check_harness({"field_order": ["title"]}, "EnterText", raise_on_failure=False)
    assert [f.check for f in report.failures] == ["bind"]
    with pytest.raises(TypeError, match="pass the task"):
        check_harness(Harness())


def test_balanced_subset_of_the_default_space_passes() -> None:
    for i, harness in enumerate(DEFAULT_SPACE.balanced(2)):
        assert check_harness(harness, ["NavigateTree", "BookFlight", "ClickOption"][i % 3], seeds=range(2)).ok


def test_register_format_then_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(RENDERERS, "plain", RENDERERS["key_value"])
    register_format("plain", RENDERERS["plain"])
    assert check_harness(Harness(obs_format="plain"), "ClickLink", seeds=range(2)).ok


def test_cli_check() -> None:
    out = io.StringIO()
    assert (
        main(
            ["check", "--task", "ClickButton", "--task", "EnterText", "--harness", "all", "--seeds", "2"],
            out=out,
        )
        == 0
    )
    from harness_gym.core.presets import PRESETS

    assert f"{2 * len(PRESETS)} ok, 0 with failures" in out.getvalue()
    with pytest.raises(SystemExit, match="unknown task"):
        main(["check", "--task", "Nope"], out=io.StringIO())
