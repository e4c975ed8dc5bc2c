"""Recorded trajectories: parse status per attempted action, the store beside the rows (policies,
resume after a torn write), pairs, and the exports (ATIF, chat rows)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from harness_gym import cli
from harness_gym.analysis.pairs import harness_levels, neighbours, partners
from harness_gym.analysis.sweep import SweepSpec, load_rows, run_sweep
from harness_gym.core.harness import Harness
from harness_gym.core.parse_status import PARSE_STATUSES, parse_status
from harness_gym.core.registry import make_env
from harness_gym.rollout import run_episode
from harness_gym.rows import read_jsonl
from harness_gym.rows.trajectories import (
    TRAJECTORIES,
    TrajectoryError,
    TrajectoryPolicy,
    read_trajectories,
    repair,
)

SPACE = "examples/demo-space.yaml"
ROOT = Path(__file__).resolve().parents[1]


def small_spec(seeds: int = 2) -> SweepSpec:
    """Two agents, two tasks, a base point and its one-factor flips: oracle@Json fails under
    some flips (invalid_action=end, a dropped tool), so some pairs differ."""
    return SweepSpec.build(
        ["random", "oracle@Json"],
        ["ClickButton", "EnterText"],
        str(ROOT / SPACE),
        "balanced:1+flips",
        seeds,
        ceiling=False,
    )


@pytest.fixture(scope="module")
def pairs_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pairs")
    run_sweep(small_spec(), out, workers=0, progress=False, log=io.StringIO())
    return out


class Scripted:
    """Replies from a list, one per step (then the last again)."""

    name = "scripted"

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.k = 0

    def reset(self, seed: int | None = None) -> None:
        self.k = 0

    def act(self, observation: str, info: dict) -> str:
        reply = self.replies[min(self.k, len(self.replies) - 1)]
        self.k += 1
        return reply


def test_each_malformed_kind_gets_its_parse_status_in_the_step_and_the_row() -> None:
    env = make_env("ClickButton", Harness.from_dict({"tool_style": "json", "step_budget": 8}))
    replies = [
        '{"name": "click", "arguments": {"ref": 2}',  # invalid JSON
        '{"name": "fly", "arguments": {}}',  # unknown tool
        '{"name": "click", "arguments": {"ref": "x"}}',  # bad argument
        '{"name":"click","arguments":{"ref":2}}\n{"name":"click","arguments":{"ref":3}}',  # two
        "",  # empty
        '{"name": "click", "arguments": {"ref": 1}}',  # parses (the task may refuse it: still ok)
    ]
    result = run_episode(env, Scripted(replies), seed=0, record=True)
    statuses = [s["parse_status"] for s in result.trajectory["steps"]]
    assert statuses[:6] == ["invalid_json", "unknown_tool", "bad_argument", "multiple_actions", "empty", "ok"]
    assert set(statuses) <= set(PARSE_STATUSES)
    counts = {s: statuses.count(s) for s in set(statuses)}
    assert result.parse_status == counts
    assert sum(result.parse_status.values()) == result.steps
    steps = result.trajectory["steps"]
    assert steps[5]["parsed"] == "click(ref=1)" and steps[0]["parsed"] is None
    assert steps[0]["error"] and steps[0]["invalid"] and steps[0]["reply"] == replies[0]

    xml = make_env("ClickButton", Harness.from_dict({"tool_style": "xml"}))
    unclosed = run_episode(xml, Scripted(["<click><ref>2</click>"]), seed=0, record=True)
    assert unclosed.trajectory["steps"][0]["parse_status"] == "unclosed_call"
    assert parse_status("illegal_action", "no such element") == "ok"  # the policy's, not the parser's
    assert parse_status(None) == "ok"


def test_recording_changes_nothing_of_the_episode() -> None:
    env = make_env("EnterText", Harness.from_dict({"tool_style": "python"}))
    from harness_gym.baselines.agents import OracleAgent

    plain = run_episode(env, OracleAgent(env), seed=3)
    recorded = run_episode(env, OracleAgent(env), seed=3, record=True)
    assert plain.trajectory is None
    assert (plain.episode_return, plain.steps, plain.success, plain.parse_status) == (
        recorded.episode_return,
        recorded.steps,
        recorded.success,
        recorded.parse_status,
    )
    assert len(recorded.trajectory["steps"]) == recorded.steps
    assert "trajectory" not in recorded.to_dict()


@pytest.mark.parametrize("bad", ["sample:0", "sample:x", "bogus", "sample", "every"])
def test_a_bad_trajectories_value_is_one_clear_error(bad: str, tmp_path: Path) -> None:
    with pytest.raises(TrajectoryError, match="--trajectories"):
        TrajectoryPolicy.parse(bad)
    argv = ["sweep", "--agent", "random", "--tasks", "ClickButton", "--subset", "balanced:2"]
    with pytest.raises(SystemExit, match="harness-gym: error: sweep: argument --trajectories: "):
        cli.main(
            [*argv, "--seeds", "1", "--trajectories", bad, "--out", str(tmp_path / "x")], out=io.StringIO()
        )
    assert not (tmp_path / "x").exists()  # nothing written


def test_pairs_policy_keeps_the_sample_and_both_sides_of_every_differing_pair(pairs_run: Path) -> None:
    rows = read_jsonl(pairs_run / "episodes.jsonl")
    stored = read_trajectories(pairs_run)
    by_index = {r["index"]: r for r in rows}
    differing = set()
    for i, others in partners(rows).items():
        for j in others:
            if by_index[i]["success"] != by_index[j]["success"]:
                differing |= {i, j}
    assert differing, "the small sweep must have pairs whose outcome differs"
    expected = differing | {r["index"] for r in rows if r["seed"] == 0}
    assert set(stored) == expected
    assert len(stored) < len(rows)  # the rest were recorded and pruned
    for i, record in stored.items():
        row, trajectory = by_index[i], record["trajectory"]
        assert len(trajectory["steps"]) == row["steps"]
        assert trajectory["success"] == row["success"]
        statuses = [s["parse_status"] for s in trajectory["steps"]]
        assert {s: statuses.count(s) for s in set(statuses)} == row["parse_status"]
        assert row["parse_failures"] == sum(s != "ok" for s in statuses)
    # Contract 1 in the recording: the same instance under every harness of a pair.
    for i in differing:
        for j in partners(rows)[i]:
            if j in stored:
                assert stored[i]["trajectory"]["state_digest"] == stored[j]["trajectory"]["state_digest"]


def test_neighbours_are_one_factor_away_in_a_flips_design(pairs_run: Path) -> None:
    levels = harness_levels(read_jsonl(pairs_run / "episodes.jsonl"))
    near = neighbours(levels)
    base = next(name for name, others in near.items() if len(others) > 1)
    for other in near[base]:
        assert sum(levels[base][f] != levels[other][f] for f in levels[base]) == 1
        assert base in near[other]


@pytest.mark.parametrize(("policy", "check"), [("none", None), ("failures", False), ("sample:1", 0)])
def test_other_policies(policy: str, check: object, tmp_path: Path) -> None:
    spec = small_spec(seeds=2)
    run_sweep(spec, tmp_path, workers=0, progress=False, trajectories=policy, log=io.StringIO())
    rows = read_jsonl(tmp_path / "episodes.jsonl")
    stored = read_trajectories(tmp_path)
    if policy == "none":
        assert not (tmp_path / TRAJECTORIES).exists()
        assert all(r["parse_status"] is not None for r in rows)  # parse status is always counted
    elif policy == "failures":
        assert set(stored) == {r["index"] for r in rows if not r["success"]}
    else:
        assert set(stored) == {r["index"] for r in rows if r["seed"] == 0}


def test_a_torn_trajectory_write_is_cut_and_its_cell_runs_again(tmp_path: Path) -> None:
    spec = small_spec(seeds=1)
    run_sweep(spec, tmp_path, workers=0, progress=False, trajectories="all", log=io.StringIO())
    whole = read_trajectories(tmp_path)
    rows_path, traj_path = tmp_path / "episodes.jsonl", tmp_path / TRAJECTORIES
    # A crash while the last cell's trajectory was being written: half its member on disk, no row.
    lines = rows_path.read_text().splitlines(keepends=True)
    last = json.loads(lines[-1])["index"]
    rows_path.write_text("".join(lines[:-1]))
    data = traj_path.read_bytes()
    traj_path.write_bytes(data[:-7])
    assert last not in read_trajectories(tmp_path)  # the torn member is skipped, not raised
    assert repair(tmp_path) > 0 and repair(tmp_path) == 0
    (tmp_path / "episodes.parquet").unlink()
    result = run_sweep(spec, tmp_path, workers=0, progress=False, trajectories="all", log=io.StringIO())
    assert result.n_run == 1
    again = read_trajectories(tmp_path)
    assert set(again) == set(whole)
    assert again[last]["trajectory"]["steps"] == whole[last]["trajectory"]["steps"]
    assert len(load_rows(tmp_path)) == len(whole)


def test_atif_and_chat_exports_of_a_run(pairs_run: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    assert (
        cli.main(
            ["export", "--run", str(pairs_run), "--format", "atif", "--out", str(tmp_path / "a.jsonl")],
            out=out,
        )
        == 0
    )
    assert cli.main(["export", "--run", str(pairs_run), "--out", str(tmp_path / "c.jsonl")], out=out) == 0
    stored = read_trajectories(pairs_run)
    atif = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert len(atif) == len(stored)
    for doc in atif:
        assert doc["schema_version"] == "ATIF-v1.4" and doc["session_id"] and doc["agent"]["version"]
        steps = doc["steps"]
        assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
        assert [s["source"] for s in steps[:2]] == ["system", "user"]
        recorded = stored[doc["extra"]["index"]]["trajectory"]["steps"]
        assert doc["final_metrics"]["total_steps"] == len(recorded) == len(steps) - 2
        for step, rec in zip(steps[2:], recorded):
            assert step["source"] == "agent" and step["message"] == rec["reply"]
            if rec["parse_status"] == "ok":
                call = step["tool_calls"][0]
                assert call["function_name"] == rec["call"]["name"]
                assert step["observation"]["results"][0]["source_call_id"] == call["tool_call_id"]
            else:
                assert "tool_calls" not in step
    chats = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert len(chats) == len(stored)
    for chat in chats:
        assert chat["messages"][0]["role"] == "system"
        assert sum(m["role"] == "assistant" for m in chat["messages"]) == chat["steps"]
    with pytest.raises(SystemExit, match="takes no --env"):
        cli.main(["export", "--run", str(pairs_run), "--env", "all", "--out", str(tmp_path / "x.jsonl")])
    with pytest.raises(SystemExit, match="give --run"):
        cli.main(["export", "--format", "atif", "--env", "all", "--out", str(tmp_path / "y.jsonl")])
    assert not (tmp_path / "x.jsonl").exists() and not (tmp_path / "y.jsonl").exists()


def test_the_batched_runner_records_what_run_episode_records() -> None:
    from harness_gym.baselines.agents import OracleAgent
    from harness_gym.rollout import Episode, run_batched

    harness = Harness.from_dict({"tool_style": "xml", "invalid_action": "feedback"})
    episodes = [
        Episode(lambda: make_env("EnterText", harness), OracleAgent, seed, "oracle", key=seed, record=True)
        for seed in range(3)
    ]
    for episode, result, err in run_batched(episodes, in_flight=2):
        assert err is None and result is not None
        env = make_env("EnterText", harness)
        alone = run_episode(env, OracleAgent(env), episode.seed, "oracle", record=True)
        assert result.trajectory == alone.trajectory
        assert result.parse_status == alone.parse_status == {"ok": alone.steps}


def test_browser_screenshots_are_stored_as_png_files_beside_the_trajectory(tmp_path: Path) -> None:
    import gymnasium as gym

    from harness_gym.baselines.agents import OracleAgent
    from harness_gym.rows.trajectories import TrajectoryWriter

    env = gym.make("harness_gym/BrowserClickButton-Json-v0", screenshots=True)
    try:
        result = run_episode(env, OracleAgent(env), seed=0, record=True)
    finally:
        env.close()
    row = {"index": 7, "agent": "oracle", "task_id": result.task_id, "seed": 0, "success": result.success}
    writer = TrajectoryWriter(tmp_path)
    writer.write(row, result.trajectory)
    writer.close()
    stored = read_trajectories(tmp_path)[7]["trajectory"]
    places = [stored, *stored["steps"]]
    assert [p["screenshot"] for p in places] == [f"screenshots/7/{t}.png" for t in range(len(places))]
    for place in places:
        assert "screenshot_png" not in place
        assert (tmp_path / place["screenshot"]).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "screenshot_png" in result.trajectory  # the episode's own record is left as it was


class _ReplyBackend:
    """A language model's stand-in: a cut tool call, then invalid JSON, then the oracle's action."""

    kind, model_id, supports_grammar = "scripted", "oracle", False

    def __init__(self, env: object) -> None:
        self.env, self.requests = env.unwrapped, []

    def complete(self, requests: list) -> list:
        from harness_gym.llm.types import Completion

        out = []
        for request in requests:
            self.requests.append(request)
            k = len(self.requests)
            if k == 1:
                out.append(
                    Completion(text='<tool_call>{"name": "cl', finish_reason="length", completion_tokens=48)
                )
            elif k == 2:
                out.append(Completion(text='{"name": "click"', prompt_tokens=90, completion_tokens=5))
            else:
                out.append(Completion(text=self.env.oracle_action(), prompt_tokens=99, completion_tokens=9))
        return out


def test_a_language_model_episode_records_messages_replies_and_a_cut_reply_as_truncated() -> None:
    import gymnasium as gym

    from harness_gym.llm.agent import LLMAgent
    from harness_gym.rollout import Episode, run_batched

    env = gym.make("harness_gym/ClickButton-v0", harness=Harness.from_dict({"step_budget": 5}))
    backend = _ReplyBackend(env)
    [(_, result, err)] = run_batched(
        [Episode(lambda: env, lambda e: LLMAgent(e, backend), 0, "llm", record=True)]
    )
    assert err is None and result.success
    steps = result.trajectory["steps"]
    assert [s["parse_status"] for s in steps] == ["truncated", "invalid_json", "ok"]
    assert result.parse_status == {"truncated": 1, "invalid_json": 1, "ok": 1}
    for step, request in zip(steps, backend.requests):
        assert step["messages"] == request.messages
    assert steps[0]["cut"] and steps[0]["action"] == "" and steps[0]["reply"].startswith("<tool_call>")
    assert steps[1]["reply"] == '{"name": "click"' and steps[1]["completion_tokens"] == 5
    assert steps[2]["parsed"] == str(env.unwrapped.bound.parse(steps[2]["action"]))
