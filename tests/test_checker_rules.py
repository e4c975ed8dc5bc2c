"""The checker cannot be fooled: a task or style built to break each rule is rejected.

Each bad task or style below passed ``check`` / ``check_task`` before its rule existed:
an oracle acting outside the legal actions, a plugin style whose reader breaks on ``"``, a
task that draws from Python's or NumPy's global random state.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from harness_gym import Action, ActionSpec, Harness, Param, StepResult, Task
from harness_gym.analysis.ceiling import seed_ceiling
from harness_gym.core import checker, tools
from harness_gym.core.checker import HARD_STRINGS, TASK_RULES, check_harness, check_task
from harness_gym.core.env import HarnessEnv
from harness_gym.core.tools import TOOL_STYLES, ToolStyle, register_tool_style


class PickLargest(Task):
    """Select the largest of five numbers, then submit (a task that keeps every rule)."""

    task_id = "RulesPickLargest"
    description = "Select the largest of five numbers, then submit."
    field_names = ("instruction", "numbers", "selected")
    action_specs = (
        ActionSpec("pick", "Select a number by its position.", (Param("index", "int", "Position."),)),
        ActionSpec("submit", "Submit the selected number."),
    )
    max_steps = 6

    def reset(self, rng: np.random.Generator) -> None:
        self.numbers = [int(n) for n in rng.choice(100, size=5, replace=False)]
        self.selected: int | None = None
        self.done = self.won = False

    def fields(self) -> dict[str, Any]:
        return {"instruction": "Pick the largest.", "numbers": list(self.numbers), "selected": self.selected}

    def legal_actions(self) -> list[Action]:
        if self.done:
            return []
        return [*(Action.of("pick", index=i) for i in range(5)), Action.of("submit")]

    def check(self, action: Action) -> str | None:
        if action.name == "pick" and not 0 <= action["index"] < 5:
            return "index must be 0 to 4"
        if action.name == "submit" and self.selected is None:
            return "select a number before submitting"
        return None

    def step(self, action: Action) -> StepResult:
        if action.name == "pick":
            self.selected = action["index"]
        else:
            self.done = True
            self.won = self.numbers[self.selected] == max(self.numbers)
        return StepResult(reward=float(self.won), terminated=self.done, success=self.won)

    def oracle(self) -> Action:
        best = self.numbers.index(max(self.numbers))
        return Action.of("submit") if self.selected == best else Action.of("pick", index=best)

    def state(self) -> dict[str, Any]:
        return {"numbers": self.numbers, "selected": self.selected, "done": self.done, "won": self.won}


class HiddenOracle(PickLargest):
    """Its legal actions never offer the largest number, though ``check`` accepts picking it."""

    task_id = "RulesHiddenOracle"

    def legal_actions(self) -> list[Action]:
        best = self.numbers.index(max(self.numbers))
        return [a for a in super().legal_actions() if a != Action.of("pick", index=best)]


class NoLegalActions(PickLargest):
    """Lists no legal action at all while its oracle wins: the exact ceiling search says 0."""

    task_id = "RulesNoLegalActions"

    def legal_actions(self) -> list[Action]:
        return []


class PythonGlobalRandom(PickLargest):
    """Draws its numbers from Python's global ``random``, not from the rng it is given."""

    task_id = "RulesPythonGlobalRandom"

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self.numbers = random.sample(range(100), 5)


class NumpyGlobalRandom(PickLargest):
    """Draws its numbers from NumPy's global state."""

    task_id = "RulesNumpyGlobalRandom"

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self.numbers = [int(n) for n in np.random.choice(100, size=5, replace=False)]


class NoisyStep(PickLargest):
    """Same instance per seed, but picking shuffles the numbers with Python's global ``random``."""

    task_id = "RulesNoisyStep"

    def step(self, action: Action) -> StepResult:
        if action.name == "pick" and random.random() < 0.5:
            self.numbers = self.numbers[::-1]
            self.selected = None
            return StepResult(reward=0.0, terminated=False, success=False)
        return super().step(action)


class Typing(PickLargest):
    """PickLargest with a free-text action, so a tool style must carry any string."""

    task_id = "RulesTyping"
    action_specs = (
        *PickLargest.action_specs,
        ActionSpec("note", "Write a note.", (Param("text", "str", "The note."),)),
    )

    def legal_actions(self) -> list[Action]:
        legal = super().legal_actions()
        return [*legal, Action.of("note", text="largest")] if legal else legal

    def step(self, action: Action) -> StepResult:
        if action.name == "note":
            return StepResult(reward=0.0, terminated=False, success=False)
        return super().step(action)


class StringHash(PickLargest):
    """Orders its numbers by ``hash()`` of their names: another PYTHONHASHSEED, another instance."""

    task_id = "RulesStringHash"

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self.numbers = sorted(self.numbers, key=lambda n: hash(f"n{n}"))


class SetOrder(PickLargest):
    """Lays its numbers out in the order of a set of strings (hash order)."""

    task_id = "RulesSetOrder"

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        order = list({f"k{n}" for n in self.numbers})
        self.numbers = [int(k[1:]) for k in order]


class Tagging(PickLargest):
    """PickLargest with a ``list[str]`` argument (a correct task: every harness must pass)."""

    task_id = "RulesTagging"
    action_specs = (
        *PickLargest.action_specs,
        ActionSpec("tag", "Tag the numbers.", (Param("labels", "list[str]", "The labels."),)),
    )

    def legal_actions(self) -> list[Action]:
        legal = super().legal_actions()
        return [*legal, Action.of("tag", labels=("big", "small"))] if legal else legal

    def step(self, action: Action) -> StepResult:
        if action.name == "tag":
            return StepResult(reward=0.0, terminated=False, success=False)
        return super().step(action)


# -- a plugin style whose reader breaks on a double quote ---------------------------------------

_ARG = re.compile(r'\s+([A-Za-z_]\w*)=("[^"]*"|-?\d+)')


def _write_naive(tool: str, args: Sequence[tuple[str, Any]]) -> str:
    return "/" + tool + "".join(f' {k}="{v}"' if isinstance(v, str) else f" {k}={v}" for k, v in args)


def _read_naive(text: str) -> tuple[str, dict[str, Any]]:
    head = re.match(r"/([A-Za-z_]\w*)", text)
    if head is None:
        raise ValueError("expected /tool arg=value ...")
    args: dict[str, Any] = {}
    pos = head.end()
    while pos < len(text):
        m = _ARG.match(text, pos)
        if m is None:
            raise ValueError(f"cannot read an argument at {text[pos : pos + 20]!r}")
        raw = m.group(2)
        args[m.group(1)] = raw[1:-1] if raw.startswith('"') else int(raw)
        pos = m.end()
    return head.group(1), args


NAIVE = ToolStyle("naive_quotes", _write_naive, _read_naive, 'Reply /tool arg="value".')


def _read_first_line(text: str) -> tuple[str, dict[str, Any]]:
    return _read_naive(text.strip().splitlines()[0])  # the defect: the rest of the reply is dropped


FIRST_LINE = ToolStyle("first_line", _write_naive, _read_first_line, 'Reply /tool arg="value".')


@pytest.fixture
def naive_style() -> Iterator[str]:
    saved = dict(tools.STYLES), dict(tools._ALL_STYLES)
    register_tool_style(NAIVE)
    yield NAIVE.name
    for registry, before in zip((tools.STYLES, tools._ALL_STYLES), saved, strict=True):
        registry.clear()
        registry.update(before)


# -- the rules ----------------------------------------------------------------------------------


def test_the_good_task_passes_every_rule() -> None:
    report = check_task(PickLargest, seeds=range(6), ceiling=seed_ceiling)
    assert report.ok and set(report.checks) == set(TASK_RULES)
    assert check_harness(Harness(tool_style="python"), Typing, seeds=range(3)).ok


def test_an_oracle_outside_the_legal_actions_is_rejected() -> None:
    # The defect: the search over legal actions says 0, the oracle scores 1, and check passed.
    assert seed_ceiling(HiddenOracle, Harness(), 0) == (0.0, "exact")
    env = HarnessEnv(HiddenOracle)
    env.reset(seed=0)
    reward = 0.0
    for _ in range(3):
        _, reward, terminated, _, _ = env.step(env.oracle_action())
        if terminated:
            break
    assert reward == 1.0
    report = check_task(HiddenOracle, seeds=range(5), ceiling=seed_ceiling, raise_on_failure=False)
    # oracle_optimal fails too: the oracle beats the exact ceiling the search computed.
    assert {f.check for f in report.failures} == {"oracle_legal", "oracle_optimal"}
    [legal] = [f for f in report.failures if f.check == "oracle_legal"]
    assert "is not among the legal actions" in legal.message
    assert TASK_RULES["oracle_legal"] in legal.message
    harness_report = check_harness(Harness(), HiddenOracle, seeds=range(3), raise_on_failure=False)
    assert {f.check for f in harness_report.failures} == {"oracle_legal"}


@pytest.mark.parametrize("style", TOOL_STYLES)
def test_a_list_argument_passes_the_schema_check_and_its_hard_strings_round_trip(style: str) -> None:
    # The defect: the action's tuple was validated as a JSON-schema array and failed on every
    # harness; and hard strings were never tried inside lists.
    report = check_harness(Harness(tool_style=style), Tagging, seeds=range(2), raise_on_failure=False)
    assert report.ok, [str(f) for f in report.failures]
    assert report.checks["round_trip"] >= len(HARD_STRINGS) * 2


@pytest.mark.parametrize("task", [StringHash, SetOrder])
def test_an_instance_built_from_hash_order_is_rejected(task: type[Task]) -> None:
    report = check_task(task, seeds=range(4), raise_on_failure=False)
    [failure] = [f for f in report.failures if f.check == "seed_decides"]
    assert "PYTHONHASHSEED" in failure.message and "different instances" in failure.message
    assert check_task(PickLargest, seeds=range(4)).ok  # the same rule passes a correct task


def test_a_style_whose_reader_drops_a_second_action_is_rejected() -> None:
    saved = dict(tools.STYLES), dict(tools._ALL_STYLES)
    register_tool_style(FIRST_LINE)
    try:
        report = check_harness(
            Harness(tool_style="first_line"), PickLargest, seeds=range(2), raise_on_failure=False
        )
    finally:
        for registry, before in zip((tools.STYLES, tools._ALL_STYLES), saved, strict=True):
            registry.clear()
            registry.update(before)
    assert any("the reader drops the rest" in f.message for f in report.failures), report.failures
    assert check_harness(Harness(tool_style="command"), PickLargest, seeds=range(2)).ok


def test_an_oracle_above_the_exact_ceiling_is_rejected() -> None:
    # The defect: ceiling 0.0 "exact" beside an oracle scoring 1.0, and check_task passed.
    assert seed_ceiling(NoLegalActions, Harness(), 0) == (0.0, "exact")
    report = check_task(NoLegalActions, seeds=range(4), ceiling=seed_ceiling, raise_on_failure=False)
    above = [f for f in report.failures if f.check == "oracle_optimal"]
    assert above and "exact ceiling is 0" in above[0].message
    assert "legal_actions() empty or incomplete" in above[0].message
    harness_report = check_harness(
        Harness(tool_style="xml"), NoLegalActions, range(2), ceiling=seed_ceiling, raise_on_failure=False
    )
    assert any("no policy can beat the exact ceiling" in f.message for f in harness_report.failures)


def test_a_style_whose_reader_breaks_on_quotes_is_rejected(naive_style: str, monkeypatch) -> None:
    harness = Harness(tool_style=naive_style)
    # The legal actions on the way hold no quote: without hard strings the style passes ...
    monkeypatch.setattr(checker, "HARD_STRINGS", ())
    assert check_harness(harness, Typing, seeds=range(3)).ok
    monkeypatch.undo()
    # ... with them it fails, naming the text that does not come back.
    report = check_harness(harness, Typing, seeds=range(3), raise_on_failure=False)
    failures = [f for f in report.failures if f.check == "round_trip"]
    assert failures and all("must round-trip" in f.message for f in failures)
    assert any('"' in f.message and "note" in f.message for f in failures)
    assert failures[0].levels == {"tool_style": naive_style}
    assert {f.check for f in report.failures} == {"round_trip"}


@pytest.mark.parametrize("style", ["json", "xml", "python", "python_positional", "command", "bracket"])
@pytest.mark.parametrize("parser", ["strict", "lenient"])
def test_built_in_styles_round_trip_every_hard_string(style: str, parser: str) -> None:
    env = HarnessEnv(Typing, Harness(tool_style=style, parser=parser))
    for text in HARD_STRINGS:
        action = Action.of("note", text=text)
        assert env.bound.parse(env.format_action(action)) == action


@pytest.mark.parametrize("task", [PythonGlobalRandom, NumpyGlobalRandom])
def test_a_task_drawing_from_global_random_is_rejected(task: type[Task]) -> None:
    # The defect: every other task rule passes (the seeds still give varied instances).
    report = check_task(task, seeds=range(5), ceiling=seed_ceiling, raise_on_failure=False)
    assert [f.check for f in report.failures] == ["seed_decides"]
    assert "built different instances" in report.failures[0].message
    harness_report = check_harness(Harness(), task, seeds=range(3), raise_on_failure=False)
    assert "determinism" in {f.check for f in harness_report.failures}


def test_dynamics_drawing_from_global_random_are_rejected() -> None:
    report = check_task(NoisyStep, seeds=range(8), raise_on_failure=False)
    failed = [f for f in report.failures if f.check == "seed_decides"]
    assert failed and "different oracle episode" in failed[0].message


def test_the_checker_puts_the_global_random_state_back() -> None:
    random.seed(5)
    np.random.seed(5)
    expected = random.random(), np.random.random()
    random.seed(5)
    np.random.seed(5)
    check_task(PickLargest, seeds=range(3))
    check_harness(Harness(), PickLargest, seeds=range(2))
    assert (random.random(), np.random.random()) == expected
