"""Harness search: known answers found, selection bias caught, ceilings flagged, resumable."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from harness_gym.analysis.search import SearchError, SearchSpec, run_search, search
from harness_gym.analysis.search.spec import rung_seed_counts
from harness_gym.analysis.search.stats import paired_difference, score
from harness_gym.analysis.sweep.spec import SweepError
from harness_gym.core.env import unwrap_harness_env
from harness_gym.core.harness import Harness
from harness_gym.core.presets import PRESETS
from harness_gym.core.space import HarnessSpace

pytest.importorskip("pandas")

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo-space.yaml"
FAST_TASKS = ["ClickButton", "EnterText", "LoginUser"]


# -- agents whose best harness is known by construction ---------------------------------------


class _Scripted:
    """Plays the oracle when ``wins(harness, task, seed)`` says so, else writes nonsense."""

    def __init__(self, env: gym.Env, wins: Any) -> None:
        self.env = unwrap_harness_env(env, "test agent")
        self.wins = wins

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, observation: str, info: dict[str, Any]) -> str:
        if self.wins(info["harness"], info["task_id"], info["seed"]):
            return self.env.oracle_action()
        return "no such tool ()"


def xml_only(env: gym.Env) -> _Scripted:
    """Succeeds under the XML tool style only."""
    return _Scripted(env, lambda h, task, seed: h["tool_style"] == "xml")


def coin(harness: dict[str, Any], task: str, seed: int) -> bool:
    blob = json.dumps([Harness.from_dict(harness).id, task, seed]).encode()
    return hashlib.sha256(blob).digest()[0] % 2 == 0


def indifferent(env: gym.Env) -> _Scripted:
    """Success is a fair coin per (harness, task, seed): no harness is better in expectation."""
    return _Scripted(env, coin)


def crashes_on_yaml_obs(env: gym.Env) -> Any:
    """The oracle, except that it raises under the YAML observation format."""
    inner = _Scripted(env, lambda h, task, seed: True)

    class Crashy:
        def reset(self, seed: int | None = None) -> None:
            pass

        def act(self, observation: str, info: dict[str, Any]) -> str:
            if info["harness"]["obs_format"] == "yaml":
                raise RuntimeError("this agent cannot read YAML")
            return inner.act(observation, info)

    return Crashy()


_INTERRUPT = {"after": -1}


def interrupting(env: gym.Env) -> Any:
    """The oracle; raises KeyboardInterrupt once, at the N-th act, when armed (a kill mid-search)."""
    inner = _Scripted(env, lambda h, task, seed: True)

    class Agent:
        def reset(self, seed: int | None = None) -> None:
            pass

        def act(self, observation: str, info: dict[str, Any]) -> str:
            if _INTERRUPT["after"] == 0:
                _INTERRUPT["after"] = -1
                raise KeyboardInterrupt
            if _INTERRUPT["after"] > 0:
                _INTERRUPT["after"] -= 1
            return inner.act(observation, info)

    return Agent()


def _preset(tool_style: str) -> str:
    """A preset speaking ``tool_style`` with canonical names (presets get renamed; find it)."""
    return next(
        name
        for name, h in PRESETS.items()
        if h.tool_style == tool_style and h.tool_naming == "canonical" and h.tool_channel == "text"
    )


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


SMALL = HarnessSpace(
    {
        "obs_format": ["json", "markdown", "yaml"],
        "field_order": ["canonical", "reversed"],
        "tool_style": ["json", "xml", "python", "command"],
        "parser": ["strict", "lenient"],
    }
)


# -- known answers -----------------------------------------------------------------------------


def test_scripted_agent_that_only_speaks_xml_is_given_xml(tmp_path: Path) -> None:
    result = search(
        xml_only,
        tmp_path,
        tasks=FAST_TASKS[:2],
        space=SMALL,
        budget=300,
        dev_seeds=6,
        test_seeds=8,
        ceiling=False,
        log=None,
    )
    assert result.chosen.tool_style == "xml"
    final = result.tables["final"].set_index("role")
    assert final.loc["chosen", "success"] == 1.0
    assert final.loc["default", "success"] == 0.0  # the default speaks JSON
    assert final.loc["chosen", "vs_default"] == 1.0 and final.loc["chosen", "significant"]
    assert result.dev_episodes <= 300
    imp = result.tables["improvements"]
    assert len(imp) >= 1 and imp["significant_on_test"].all()
    # The default's best one-factor change is the one that switches to XML.
    changes = result.tables["final"][result.tables["final"]["role"] == "one-factor change"]
    assert changes.iloc[0]["change"] == "tool_style=xml"


def test_styled_oracle_is_given_its_own_syntax_on_the_demo_space_within_a_fifth(tmp_path: Path) -> None:
    """The benchmark's known answer: oracle@<python preset> wants python tools, canonical names,
    no dropped tool; the search finds it for at most 1/5 of exhaustive evaluation's episodes."""
    spec = SearchSpec.build(
        "oracle@" + _preset("python"), FAST_TASKS[:2], DEMO, budget=500, dev_seeds=4, test_seeds=4
    )
    result = run_search(spec, tmp_path, log=None)
    levels = spec.space.levels_of(result.chosen)
    wanted = ("python", "canonical", "none")
    assert (levels["tool_style"], levels["tool_naming"], levels["drop_tools"]) == wanted
    assert result.dev_episodes * 5 <= spec.exhaustive_cost()
    final = result.tables["final"].set_index("role")
    assert final.loc["chosen", "success"] == 1.0
    assert final.loc["chosen", "steps"] < final.loc["default", "steps"]  # no wasted step on a parse error


def test_indifferent_agent_gains_on_dev_do_not_survive_on_test(tmp_path: Path) -> None:
    """Selection bias caught: the dev-best of many coin-flip harnesses looks better than the
    default on dev, but on unseen test seeds no improvement is significant."""
    # Nonsense ends the episode at once (invalid_action=end), so a lost coin costs one step.
    space = HarnessSpace(SMALL.to_dict()["factors"], base=Harness(invalid_action="end"))
    result = search(
        indifferent,
        tmp_path,
        tasks=FAST_TASKS,
        space=space,
        budget=600,
        dev_seeds=8,
        test_seeds=20,
        ceiling=False,
        log=None,
    )
    imp = result.tables["improvements"]
    assert len(imp) >= 1
    assert imp.iloc[0]["dev_success_to"] > imp.iloc[0]["dev_success_from"]  # what the search believed
    assert (imp["dev_success_to"] >= imp["dev_success_from"]).all()
    assert not imp["significant_on_test"].any()  # what the test seeds say
    chosen = result.tables["final"].set_index("role").loc["chosen"]
    assert chosen["vs_default_low"] < 0 < chosen["vs_default_high"]
    assert not chosen["significant"]


def test_dropped_tool_and_tight_budget_are_flagged_ceiling_limited(tmp_path: Path) -> None:
    space = HarnessSpace(
        {"drop_tools": [[], ["type"]], "step_budget": [None, 1], "obs_format": ["json", "yaml"]}
    )
    result = search(
        "oracle",
        tmp_path,
        tasks=["EnterText", "LoginUser"],
        space=space,
        budget=200,
        dev_seeds=3,
        test_seeds=4,
        top_changes=3,
        log=None,
    )
    final = result.tables["final"]
    by_change = final.set_index("change")
    assert by_change.loc["drop_tools=type", "ceiling_limited"]
    assert by_change.loc["step_budget=1", "ceiling_limited"]
    assert not by_change.loc["(default)", "ceiling_limited"]
    # The oracle reaches every ceiling: all of the loss is ceiling, none is mismatch.
    assert (final["mismatch"].abs() < 1e-9).all()
    limited = final[final["ceiling_limited"]]
    assert (limited["ceiling"] < 1).all() and (limited["success"] == limited["ceiling"]).all()
    assert not result.chosen.drop_tools and result.chosen.step_budget is None
    cands = result.tables["candidates"]
    assert set(cands[cands["ceiling_limited"]]["drop_tools"]) | set(
        cands[cands["ceiling_limited"]]["step_budget"]
    ) >= {"type", "1"}


# -- honesty by construction ------------------------------------------------------------------


def test_dev_and_test_seeds_never_overlap_and_test_comes_last(tmp_path: Path) -> None:
    with pytest.raises(SearchError, match="overlap at \\[3"):
        SearchSpec.build("oracle", "ClickButton", SMALL, budget=500, dev_seeds=5, test_seeds=[3, 9])
    result = search(
        xml_only, tmp_path, tasks="ClickButton", space=SMALL, budget=200, dev_seeds=4, test_seeds=5, log=None
    )
    rows = _rows(tmp_path)
    dev, test = set(result.spec.dev_seeds), set(result.spec.test_seeds)
    assert not dev & test
    assert {r["seed"] for r in rows} <= dev | test
    split = [r["seed"] in test for r in rows]
    first_test = split.index(True)
    assert all(split[first_test:]), "a dev episode ran after the search had seen a test episode"
    assert result.dev_episodes == sum(not s for s in split)


def test_yaml_written_loads_back_to_an_equal_harness(tmp_path: Path) -> None:
    result = search(
        xml_only,
        tmp_path,
        tasks="ClickButton",
        space=SMALL,
        budget=150,
        dev_seeds=3,
        test_seeds=3,
        local=False,
        log=None,
    )
    loaded = Harness.from_yaml(result.best_yaml)
    assert loaded == result.chosen and loaded.id == result.chosen.id
    env = gym.make("harness_gym/ClickButton-v0", harness=str(result.best_yaml))
    _, info = env.reset(seed=0)
    assert info["harness_id"] == result.chosen.id
    meta = json.loads((tmp_path / "search.json").read_text())
    assert meta["chosen_id"] == result.chosen.id and meta["status"] == "done"


def test_cost_columns_are_recorded(tmp_path: Path) -> None:
    result = search(
        xml_only,
        tmp_path,
        tasks="ClickButton",
        space=SMALL,
        budget=150,
        dev_seeds=2,
        test_seeds=2,
        local=False,
        log=None,
    )
    rows = [r for r in _rows(tmp_path) if r["error"] is None]
    for r in rows:
        assert r["actions"] == r["steps"]  # one action written per step
        assert r["obs_chars"] > 0 and r["action_chars"] > 0
    final = result.tables["final"]
    assert {"steps", "obs_chars", "action_chars", "tokens"} <= set(final.columns)
    # Markdown and YAML observations differ in length: the column sees the harness.
    by_format: dict[str, set[int]] = {}
    for r in rows:
        if r["seed"] == 0 and r["harness"]["tool_style"] == "json":
            by_format.setdefault(r["harness"]["obs_format"], set()).add(r["obs_chars"])
    assert len({min(v) for v in by_format.values()}) > 1


# -- statistics on known inputs ----------------------------------------------------------------


def test_paired_difference_and_score_on_known_rows() -> None:
    a = {("t", s): {"success": True, "error": None} for s in range(20)}
    b = {("t", s): {"success": s % 2 == 0, "error": None} for s in range(20)}
    same = paired_difference(a, a)
    assert same.mean == 0.0 and not same.significant and same.p_value == 1.0
    assert same.low < -0.05 and same.high > 0.05  # a tie over 20 pairs is not [0, 0]
    d = paired_difference(a, b)
    assert d.mean == 0.5 and d.low > 0 and d.significant
    assert (d.wins, d.losses) == (10, 0) and d.p_value == pytest.approx(2 / 2**10)
    # One win and no loss over 60 pairs is no evidence (the old Wilson-on-differences said yes).
    one = {("t", s): {"success": s == 0, "error": None} for s in range(60)}
    none = {("t", s): {"success": False, "error": None} for s in range(60)}
    d = paired_difference(one, none)
    assert (d.wins, d.losses, d.p_value) == (1, 0, 1.0) and not d.significant
    assert d.low < 0 < d.high
    crashed = {("t", s): {"success": None, "error": "boom", "steps": None} for s in range(4)}
    s = score(list(crashed.values()))
    assert s.success == 0.0 and s.errors == 4  # crashes count as failures
    assert rung_seed_counts(8, 16, 1, 16, 2) == [1]  # the budget pays one seed each, no more
    counts = rung_seed_counts(8, 16, 1, 10_000, 2)
    assert counts[-1] == 8 and counts == sorted(counts)


# -- bad input ---------------------------------------------------------------------------------


def test_empty_space_is_refused() -> None:
    with pytest.raises(SearchError, match="the space is empty"):
        SearchSpec.build("oracle", "ClickButton", HarnessSpace({}), budget=100)
    with pytest.raises(SearchError, match="the space is empty"):
        SearchSpec.build("oracle", "ClickButton", HarnessSpace({"obs_format": ["json"]}), budget=100)


def test_budget_below_one_episode_per_candidate_is_refused(tmp_path: Path) -> None:
    pool = len(SearchSpec.build("oracle", FAST_TASKS[:2], SMALL, budget=10_000).initial_pool())
    with pytest.raises(SearchError, match=f"at least {pool * 2}"):
        SearchSpec.build("oracle", FAST_TASKS[:2], SMALL, budget=pool * 2 - 1)
    assert not any(tmp_path.iterdir())  # refused before any folder or episode


def test_agent_that_crashes_on_some_harnesses_is_scored_with_its_crashes(tmp_path: Path) -> None:
    result = search(
        crashes_on_yaml_obs,
        tmp_path,
        tasks="ClickButton",
        space=SMALL,
        budget=200,
        dev_seeds=3,
        test_seeds=4,
        log=None,
    )
    rows = _rows(tmp_path)
    crashed = [r for r in rows if r["error"] is not None]
    assert crashed and all("cannot read YAML" in r["error"] for r in crashed)
    assert all(r["harness"]["obs_format"] == "yaml" for r in crashed)
    assert result.chosen.obs_format != "yaml"
    cands = result.tables["candidates"]
    xml = cands[cands["obs_format"] == "yaml"]
    assert len(xml) and (xml["success"] == 0).all() and (xml["errors"] == xml["n"]).all()


def test_interrupted_search_resumes_without_running_anything_twice(tmp_path: Path) -> None:
    kwargs = dict(tasks=FAST_TASKS[:2], space=SMALL, budget=300, dev_seeds=5, test_seeds=4, log=None)
    whole = search(interrupting, tmp_path / "whole", **kwargs)
    _INTERRUPT["after"] = 150
    with pytest.raises(KeyboardInterrupt):
        search(interrupting, tmp_path / "cut", **kwargs)
    partial = len(_rows(tmp_path / "cut"))
    assert 0 < partial < len(_rows(tmp_path / "whole"))
    from harness_gym.analysis.report import build_report

    unfinished = build_report(tmp_path / "cut").markdown.read_text()
    assert "has not finished; run the same command again to resume it" in unfinished
    with (tmp_path / "cut" / "episodes.jsonl").open("a") as fh:
        fh.write('{"index": 99999, "sweep_id": "half a li')  # a write torn by the kill
    resumed = search(interrupting, tmp_path / "cut", **kwargs)
    rows = _rows(tmp_path / "cut")
    keys = [(r["task_id"], r["harness_id"], r["seed"]) for r in rows]
    assert len(keys) == len(set(keys)), "an episode ran twice"
    assert resumed.episodes_resumed == partial and resumed.episodes_run == len(rows) - partial
    assert resumed.chosen == whole.chosen and resumed.dev_episodes == whole.dev_episodes
    whole_keys = [(r["task_id"], r["harness_id"], r["seed"]) for r in _rows(tmp_path / "whole")]
    assert sorted(keys) == sorted(whole_keys)
    again = search(interrupting, tmp_path / "cut", **kwargs)
    assert again.episodes_run == 0


def test_a_folder_of_another_search_is_refused(tmp_path: Path) -> None:
    search(
        xml_only,
        tmp_path,
        tasks="ClickButton",
        space=SMALL,
        budget=150,
        dev_seeds=2,
        test_seeds=2,
        local=False,
        log=None,
    )
    with pytest.raises(SearchError, match="holds another search.*budget"):
        search(
            xml_only,
            tmp_path,
            tasks="ClickButton",
            space=SMALL,
            budget=160,
            dev_seeds=2,
            test_seeds=2,
            local=False,
            log=None,
        )


AGENT_FILE = """
import time
from harness_gym.baselines.agents import OracleAgent

class Slow(OracleAgent):
    def act(self, observation, info):
        time.sleep(0.005)
        return super().act(observation, info)

def make(env):
    return Slow(env)
"""


@pytest.mark.slow
def test_cli_search_killed_with_sigkill_resumes_without_duplicates(tmp_path: Path) -> None:
    agent = tmp_path / "slow_agent.py"
    agent.write_text(AGENT_FILE)
    out = tmp_path / "run"
    argv = [
        "--agent", f"{agent}:make", "--tasks", "ClickButton", "--space", str(DEMO), "--budget", "120",
        "--dev-seeds", "2", "--test-seeds", "2", "--no-local", "--out", str(out),
    ]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness_gym.cli", "search", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    rows_file = out / "episodes.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if rows_file.exists() and len(rows_file.read_bytes().splitlines()) >= 20:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the search ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    before = len(rows_file.read_bytes().splitlines())
    assert before >= 20
    from harness_gym.cli import main

    main(["search", *argv, "--quiet"], out=open(os.devnull, "w"))
    rows = _rows(out)
    keys = [(r["task_id"], r["harness_id"], r["seed"]) for r in rows]
    assert len(keys) == len(set(keys))
    assert len(rows) >= before - 1  # a torn last line is the only thing a kill may lose


def test_cli_search_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness_gym.cli import CLIExit, main

    cases = [
        (["--budget", "3"], "less than one episode per candidate"),
        (["--space", str(tmp_path / "nope.yaml")], "file not found"),
        (["--default", "NoSuchPreset"], "--default takes a preset name"),
    ]
    for extra, message in cases:
        with pytest.raises(CLIExit) as err:
            main(
                [
                    "search",
                    "--agent",
                    "oracle",
                    "--tasks",
                    "ClickButton",
                    "--out",
                    str(tmp_path / "o"),
                    *extra,
                ]
            )  # noqa: E501
        assert err.value.code == 2 and message in str(err.value)
    assert not (tmp_path / "o" / "episodes.jsonl").exists()


def test_cli_search_writes_folder_and_report_section(tmp_path: Path) -> None:
    import io

    from harness_gym.cli import main

    space = tmp_path / "space.yaml"
    SMALL.save(space)
    out = io.StringIO()
    main(
        [
            "search",
            "--agent",
            "oracle@" + _preset("xml"),
            "--tasks",
            "ClickButton",
            "--space",
            str(space),
            "--budget",
            "200",
            "--dev-seeds",
            "3",
            "--test-seeds",
            "4",
            "--out",
            str(tmp_path / "s"),
            "--quiet",
            "--report",
        ],  # fmt: skip
        out=out,
    )
    text = out.getvalue()
    assert "chosen" in text and "best harness:" in text
    for name in ("best_harness.yaml", "final.csv", "improvements.csv", "trajectory.csv", "candidates.csv"):
        assert (tmp_path / "s" / name).exists()
    report = (tmp_path / "s" / "report" / "report.md").read_text()
    assert "## Harness search" in report and "search_trajectory.png" in report
    assert (tmp_path / "s" / "report" / "search_trajectory.png").stat().st_size > 1000
    # Recorded trajectories (default: the first dev seed and pairs whose outcome differs) and the
    # viewer the report links to.
    from harness_gym.rows import read_jsonl
    from harness_gym.rows.trajectories import read_trajectories

    rows = read_jsonl(tmp_path / "s" / "episodes.jsonl")
    stored = read_trajectories(tmp_path / "s")
    first_dev = min(int(r["seed"]) for r in rows)
    assert {r["index"] for r in rows if int(r["seed"]) == first_dev} <= set(stored)
    assert all(
        len(t["trajectory"]["steps"]) == t_row["steps"]
        for t, t_row in ((stored[r["index"]], r) for r in rows if r["index"] in stored)
    )
    assert (tmp_path / "s" / "view" / "index.html").exists() and "Episodes behind the numbers" in report


# -- model-backed agents: the batched path ------------------------------------------------------


class _BatchedOracle:
    """Answers in batches like a language model, and reports token counts like one."""

    batch_sizes: list[int] = []

    def __init__(self, env: gym.Env) -> None:
        self.env = unwrap_harness_env(env, "test agent")
        self.steps = 0

    def reset(self, seed: int | None = None) -> None:
        self.steps = 0

    def act(self, observation: str, info: dict[str, Any]) -> str:
        self.steps += 1
        return self.env.oracle_action()

    def episode_record(self) -> dict[str, Any]:
        return {
            "prompt_tokens": 100 * self.steps,
            "completion_tokens": 10 * self.steps,
            "llm_requests": self.steps,
        }

    @staticmethod
    def act_batch(agents: list[Any], observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
        _BatchedOracle.batch_sizes.append(len(agents))
        return [a.act(o, i) for a, o, i in zip(agents, observations, infos)]


def test_batched_agent_runs_in_flight_with_costs_and_tokens(tmp_path: Path) -> None:
    from dataclasses import dataclass

    from harness_gym.analysis.agent_spec import AgentSpec

    @dataclass(frozen=True)
    class BatchedSpec(AgentSpec):
        @property
        def batched(self) -> bool:  # as for llm / hf: / openai: specs
            return True

    _BatchedOracle.batch_sizes.clear()
    spec = BatchedSpec("batched-oracle", "callable", "test", obj=_BatchedOracle)
    result = search(
        spec,
        tmp_path,
        tasks="ClickButton",
        space=SMALL,
        budget=150,
        dev_seeds=2,
        test_seeds=2,
        local=False,
        log=None,
        in_flight=4,
    )
    assert max(_BatchedOracle.batch_sizes) == 4  # episodes really ran side by side
    rows = _rows(tmp_path)
    assert all(r["obs_chars"] > 0 and r["prompt_tokens"] == 100 * r["steps"] for r in rows)
    final = result.tables["final"]
    assert (final["tokens"] == 110 * final["steps"]).all()


def test_worker_processes_give_the_rows_of_the_in_process_run(tmp_path: Path) -> None:
    kwargs = dict(
        tasks="ClickButton", space=SMALL, budget=130, dev_seeds=2, test_seeds=2, local=False, log=None
    )
    here = search("oracle@Json", tmp_path / "here", **kwargs)
    pool = search("oracle@Json", tmp_path / "pool", workers=1, **kwargs)
    assert pool.chosen == here.chosen and pool.dev_episodes == here.dev_episodes

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (
            r["task_id"],
            r["harness_id"],
            r["seed"],
            r["success"],
            r["steps"],
            r["obs_chars"],
            r["action_chars"],
        )

    assert sorted(map(key, _rows(tmp_path / "pool"))) == sorted(map(key, _rows(tmp_path / "here")))


def test_start_design_is_any_sweep_subset_form(tmp_path: Path) -> None:
    covering = SearchSpec.build("oracle", "ClickButton", SMALL, budget=10_000, n_random=0)
    balanced = SearchSpec.build("oracle", "ClickButton", SMALL, budget=10_000, n_random=0, start="balanced")
    assert balanced.id != covering.id
    assert set(covering.initial_pool()) <= set(SMALL) and set(balanced.initial_pool()) <= set(SMALL)
    assert len(balanced.initial_pool()) > len(covering.initial_pool())  # the orthogonal array is larger
    with pytest.raises(SweepError, match="unknown --subset 'nonsense'"):
        SearchSpec.build("oracle", "ClickButton", SMALL, budget=10_000, start="nonsense")


def test_search_report_takes_effects_only_from_shared_test_seeds(tmp_path: Path) -> None:
    """A search's own rows are adaptive (each harness played different dev seeds): with no
    harness better than another, least squares on them invented effects (-4.6 pp, p 2e-12).
    The report estimates effects only from the harnesses that played every test seed, says
    so, and calls nothing significant for this agent."""
    from harness_gym.analysis.report import build_report
    from harness_gym.analysis.report_effects import _effect_rows

    space = HarnessSpace(SMALL.to_dict()["factors"], base=Harness(invalid_action="end"))
    search(indifferent, tmp_path, tasks=FAST_TASKS[:2], space=space, budget=300, dev_seeds=6,
           test_seeds=12, ceiling=False, log=None)  # fmt: skip
    report = build_report(tmp_path)
    text = report.markdown.read_text()
    assert "Search folder: factor effects" in text
    import pandas as pd

    table = pd.read_csv(report.out_dir / "marginal_effects.csv")
    assert not table["significant"].fillna(False).astype(bool).any()
    from harness_gym.analysis.sweep import load_rows

    rows = load_rows(tmp_path)
    kept, said = _effect_rows(rows, tmp_path)
    test_seeds = set(json.loads((tmp_path / "search.json").read_text())["spec"]["test_seeds"])
    assert set(kept["seed"].astype(int)) <= test_seeds and said
    per = kept.groupby("harness_name").size()
    assert (per == per.iloc[0]).all() if len(per) else True  # every harness kept: the same cells
