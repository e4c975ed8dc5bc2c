"""Sweeps: cells, resumption, bad input, crashing agents, killed workers, Ray vs local."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from harness_gym import cli as cli_sweep  # the sweep and report verbs
from harness_gym.analysis.agent_spec import AgentSpecError, make_agent, parse_agent
from harness_gym.analysis.mismatch import mismatch_table, side_by_side
from harness_gym.analysis.sweep import (
    ROWS_JSONL,
    ROWS_PARQUET,
    SWEEP_FILE,
    WORKER_DIED,
    SweepError,
    SweepSpec,
    load_rows,
    run_sweep,
)
from harness_gym.core.harness import HarnessSpecError
from harness_gym.core.registry import make_env

ROOT = Path(__file__).resolve().parent.parent

AGENTS = '''
import os, signal, time
from harness_gym.baselines.agents import RandomAgent

MARKER = {marker!r}


class Wrapped:
    """RandomAgent with a hook before each action."""

    def __init__(self, env, hook):
        self.inner, self.hook, self.seed = RandomAgent(), hook, None

    def reset(self, seed=None):
        self.seed = seed
        self.inner.reset(seed)

    def act(self, observation, info):
        self.hook(self.seed, info["task_id"])
        return self.inner.act(observation, info)


def _slow(seed, task):
    time.sleep(float(os.environ.get("SLOW_AGENT_DELAY", "0")))


def _crash(seed, task):
    if seed == 1:
        raise ValueError("agent bug on seed 1")


def _kill(seed, task):
    if seed == 1 and task == "ClickButton":
        os.kill(os.getpid(), signal.SIGKILL)


def _kill_once(seed, task):
    _kill(seed, task)
    if seed == 0 and task == "EnterText" and not os.path.exists(MARKER):
        open(MARKER, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)


def slow(env):
    return Wrapped(env, _slow)


def crash(env):
    return Wrapped(env, _crash)


def killer(env):
    return Wrapped(env, _kill)


def killer_and_flaky(env):
    return Wrapped(env, _kill_once)


def not_an_agent(env):
    return 42
'''


@pytest.fixture(scope="module")
def agents_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("agents")
    path = folder / "test_agents.py"
    path.write_text(textwrap.dedent(AGENTS.format(marker=str(folder / "killed-once"))))
    return path


def frame(out_dir: Path) -> pd.DataFrame:
    """Rows without wall time (the one column allowed to differ between runs)."""
    return load_rows(out_dir).drop(columns=["wall_time"]).reset_index(drop=True)


def small_spec(agent: str = "random", **kwargs: object) -> SweepSpec:
    options = {"tasks": ["ClickButton", "EnterText"], "subset": "balanced:3", "seeds": 3}
    options.update(kwargs)
    return SweepSpec.build(agent, **options)  # type: ignore[arg-type]


# -- spec and cells ----------------------------------------------------------------------------


def test_spec_cells_and_id() -> None:
    spec = small_spec(["random", "oracle"])
    cells = spec.cells()
    assert spec.n_cells == len(cells) == 2 * 3 * 3 * 2
    assert [c.index for c in cells] == list(range(len(cells)))
    assert len({c.key for c in cells}) == len(cells)
    assert spec.id == small_spec(["random", "oracle"]).id
    assert spec.id != small_spec(["random", "oracle"], seeds=4).id
    assert spec.id != small_spec(["random", "oracle"], ceiling=False).id
    assert [p.name for p in spec.harnesses] == ["h00", "h01", "h02"]
    assert set(spec.harnesses[0].levels) == set(spec.factors)


def test_subsets() -> None:
    from harness_gym.core.presets import PRESETS
    from harness_gym.core.space import DEFAULT_SPACE

    balanced = small_spec(subset="balanced")
    assert [p.harness for p in balanced.harnesses] == DEFAULT_SPACE.balanced(2)
    assert balanced.design["kind"] == "orthogonal array" and balanced.design["balance"]["orthogonal"]
    five = small_spec(subset="balanced:5")
    assert len(five.harnesses) == 5 and five.design["kind"] == "near-orthogonal"
    assert five.design["balance"]["level_imbalance"] <= 1
    covering = DEFAULT_SPACE.covering(2)
    assert [p.harness for p in small_spec(subset="covering").harnesses] == covering
    assert [p.harness for p in small_spec(subset="covering:5").harnesses] == covering[:5]
    assert small_spec(subset="covering").design["kind"] == "covering array"
    flipped = small_spec(subset="balanced:2+flips")
    assert flipped.design["kind"] == "flips" and flipped.design["base"]["n"] == 2
    assert flipped.to_dict()["design"]["flips"][0][0] == "h00"
    assert len(small_spec(subset="flips:2").harnesses) == len(flipped.harnesses)
    sample = [p.harness for p in small_spec(subset="sample:6").harnesses]
    assert len(set(sample)) == 6 and sample[:3] == [
        p.harness for p in small_spec(subset="sample:3").harnesses
    ]
    presets = small_spec(space="presets", subset=None)
    assert [p.name for p in presets.harnesses] == list(PRESETS)
    assert "obs_format" in presets.factors


def test_space_yaml_and_subset_all(tmp_path: Path) -> None:
    path = tmp_path / "space.yaml"
    path.write_text("factors:\n  obs_format: [json, xml]\n  tool_style: [json, python, command]\n")
    spec = small_spec(space=str(path), subset="all")
    assert len(spec.harnesses) == 6 and spec.factors == ("obs_format", "tool_style")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"agent": "randm"}, AgentSpecError, "unknown agent 'randm'; valid forms: random, oracle"),
        ({"agent": "oracle@Nope"}, AgentSpecError, "oracle@PRESET takes a preset name"),
        ({"agent": "no/such/file.py:make"}, AgentSpecError, "not found"),
        ({"agent": "harness_gym.baselines.agents:Nope"}, AgentSpecError, "has no attribute 'Nope'"),
        ({"agent": "no_such_module_xyz:make"}, AgentSpecError, "cannot import module"),
        ({"agent": "sb3:/no/such/dir"}, AgentSpecError, "no saved model"),
        ({"agent": ["random", "random"]}, SweepError, "appears twice"),
        ({"tasks": ["ClickButton", "Nope"]}, SweepError, "unknown task(s) ['Nope']; registered tasks"),
        ({"subset": "all"}, SweepError, "would run 279,936 harnesses"),
        ({"subset": "covering:500"}, SweepError, "has 29"),
        ({"subset": "balanced:x"}, SweepError, "N must be a positive integer"),
        ({"subset": "covering+flop"}, SweepError, "after '+' comes flips"),
        ({"subset": "balanced", "max_harnesses": 100}, SweepError, "would run 432 harnesses (limit 100)"),
        ({"space": "presets", "subset": "balanced"}, SweepError, "use --subset all"),
        ({"space": "nope.yaml"}, SweepError, "file not found"),
        ({"seeds": 0}, SweepError, "at least 1"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs: dict, error: type, message: str) -> None:
    agent = kwargs.pop("agent", "random")
    with pytest.raises(error) as info:
        small_spec(agent, **kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("yaml", "message"),
    [
        ("factors:\n  obs_fromat: [json, xml]\n", "unknown harness factor 'obs_fromat'; valid factors"),
        ("factors:\n  obs_format: [json, toml]\n", "unknown level 'toml' for factor 'obs_format'"),
    ],
)
def test_unknown_factor_or_level_in_space(tmp_path: Path, yaml: str, message: str) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(yaml)
    with pytest.raises(HarnessSpecError, match="valid"):
        small_spec(space=str(path))
    with pytest.raises(SystemExit) as info:
        cli_sweep.main(["sweep", "--agent", "random", "--space", str(path), "--out", str(tmp_path / "o")])
    assert str(info.value).startswith("harness-gym: error: ") and message in str(info.value)


def test_agent_forms(agents_file: Path) -> None:
    env = make_env("ClickButton")
    assert type(make_agent("random", env)).__name__ == "RandomAgent"
    assert type(make_agent("oracle", env)).__name__ == "OracleAgent"
    assert type(make_agent("harness_gym.baselines.agents:OracleAgent", env)).__name__ == "OracleAgent"
    assert type(make_agent(f"{agents_file}:slow", env)).__name__ == "Wrapped"
    with pytest.raises(AgentSpecError, match="without reset and act"):
        make_agent(f"{agents_file}:not_an_agent", env)
    spec = parse_agent(lambda env: None)
    assert spec.kind == "callable" and spec.name.endswith("<lambda>")


def test_styled_oracle_follows_its_habits_until_corrected() -> None:
    """oracle@Json succeeds where Json syntax parses, or where errors are shown to it."""
    from harness_gym.core.harness import Harness
    from harness_gym.rollout import run_episode

    def success(harness: Harness) -> bool:
        env = make_env("ClickButton", harness)
        return run_episode(env, make_agent("oracle@Json", env), 0).success

    assert success(Harness())
    assert success(Harness(tool_style="xml"))  # the error message corrects it, one step lost
    assert not success(Harness(tool_style="xml", invalid_action="end"))
    assert not success(Harness(tool_style="xml", invalid_action="ignore"))


# -- running -----------------------------------------------------------------------------------


def test_rows_are_complete_and_equal_across_worker_counts(tmp_path: Path) -> None:
    spec = small_spec(["random", "oracle@Json"])
    first = run_sweep(spec, tmp_path / "w0", workers=0, progress=False)
    run_sweep(spec, tmp_path / "w2", workers=2, chunk_size=5, progress=False)
    assert first.n_run == spec.n_cells and first.n_errors == 0
    rows = frame(tmp_path / "w0")
    pd.testing.assert_frame_equal(rows, frame(tmp_path / "w2"))
    assert list(rows["index"]) == list(range(spec.n_cells))
    assert (rows["ceiling"] == 1.0).all() and (rows["ceiling_method"] == "exact").all()
    assert rows["error"].isna().all()
    for factor in spec.factors:
        assert rows[f"level_{factor}"].notna().all()
    harness = json.loads(rows["harness"][0])
    assert harness["obs_format"] == rows["level_obs_format"][0]
    # JSON Lines and Parquet hold the same rows; sweep.json holds the spec.
    jsonl = [json.loads(line) for line in (tmp_path / "w0" / ROWS_JSONL).read_text().splitlines()]
    assert sorted(r["index"] for r in jsonl) == list(rows["index"])
    meta = json.loads((tmp_path / "w0" / SWEEP_FILE).read_text())
    assert meta["sweep_id"] == spec.id and meta["n_cells"] == spec.n_cells
    # Running it again skips every finished row.
    again = run_sweep(spec, tmp_path / "w0", workers=2, progress=False)
    assert (again.n_skipped, again.n_run) == (spec.n_cells, 0)
    pd.testing.assert_frame_equal(rows, frame(tmp_path / "w0"))


def test_no_ceiling_and_callables_in_process(tmp_path: Path) -> None:
    from harness_gym.baselines.agents import OracleAgent

    seen = []

    def factory(env):  # a local function: fine in-process
        seen.append(env)
        return OracleAgent(env)

    spec = small_spec(factory, ceiling=False, seeds=2)
    run_sweep(spec, tmp_path, workers=0, progress=False)
    rows = frame(tmp_path)
    assert rows["ceiling"].isna().all() and rows["success"].all() and seen
    with pytest.raises(SweepError, match="cannot be sent to worker processes"):
        run_sweep(spec, tmp_path / "pool", workers=2, progress=False)
    table = mismatch_table(rows)
    assert table["mismatch"].isna().all() and (table["deployed"] == 1.0).all()


def test_folder_of_another_sweep_is_a_clear_error(tmp_path: Path) -> None:
    run_sweep(small_spec(seeds=2), tmp_path, workers=0, progress=False)
    before = (tmp_path / ROWS_JSONL).read_text()
    with pytest.raises(SweepError, match=r"holds rows of another sweep .* differ in seeds"):
        run_sweep(small_spec(seeds=3), tmp_path, workers=0, progress=False)
    with pytest.raises(SystemExit, match="^harness-gym: error: .* holds rows of another sweep"):
        cli_sweep.main(["sweep", "--agent", "oracle", "--out", str(tmp_path), "--quiet"])
    assert (tmp_path / ROWS_JSONL).read_text() == before  # nothing lost
    # Rows without a sweep.json are checked too.
    (tmp_path / SWEEP_FILE).unlink()
    with pytest.raises(SweepError, match="holds rows of sweep"):
        run_sweep(small_spec(seeds=3), tmp_path, workers=0, progress=False)
    result = run_sweep(small_spec(seeds=3), tmp_path, workers=0, progress=False, overwrite=True)
    assert result.n_run == small_spec(seeds=3).n_cells


def test_torn_last_line_is_rerun(tmp_path: Path) -> None:
    spec = small_spec(seeds=2)
    run_sweep(spec, tmp_path / "full", workers=0, progress=False)
    path = tmp_path / "part" / ROWS_JSONL
    path.parent.mkdir()
    (tmp_path / "part" / SWEEP_FILE).write_text((tmp_path / "full" / SWEEP_FILE).read_text())
    lines = (tmp_path / "full" / ROWS_JSONL).read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:5]) + lines[5][:40])  # killed in the middle of a write
    log = io.StringIO()
    result = run_sweep(spec, tmp_path / "part", workers=0, progress=False, log=log)
    assert "5 of 12 cells already done" in log.getvalue()
    assert result.n_run == spec.n_cells - 5
    pd.testing.assert_frame_equal(frame(tmp_path / "full"), frame(tmp_path / "part"))
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_killed_sweep_resumes_to_the_rows_of_an_uninterrupted_sweep(
    tmp_path: Path, agents_file: Path
) -> None:
    agent = f"{agents_file}:slow"
    argv = ["sweep", "--agent", agent, "--tasks", "ClickButton", "EnterText", "--subset", "balanced:3"]
    argv += ["--seeds", "4", "--workers", "2", "--chunk-size", "1", "--quiet"]
    total = 2 * 3 * 4
    out = tmp_path / "killed"
    env = {**os.environ, "SLOW_AGENT_DELAY": "0.04"}
    code = "import sys; from harness_gym.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *argv, "--out", str(out)],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rows_file = out / ROWS_JSONL
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if rows_file.exists() and len(rows_file.read_text().splitlines()) >= 6:
            break
        assert proc.poll() is None, "the sweep ended before it could be killed"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # the main process and its workers, mid-sweep
    proc.wait()
    kept = len(rows_file.read_text().splitlines())
    assert 6 <= kept < total
    assert not (out / ROWS_PARQUET).exists()
    resumed = io.StringIO()
    assert cli_sweep.main([*argv, "--out", str(out)], out=resumed) == 0
    assert f"{total} cells: {kept} already done, {total - kept} run" in resumed.getvalue()
    cli_sweep.main([*argv, "--out", str(tmp_path / "whole")], out=io.StringIO())
    pd.testing.assert_frame_equal(frame(out), frame(tmp_path / "whole"))
    assert len(frame(out)) == total


def test_crashing_agent_records_the_error_and_the_sweep_goes_on(tmp_path: Path, agents_file: Path) -> None:
    spec = small_spec(f"{agents_file}:crash")
    log = io.StringIO()
    result = run_sweep(spec, tmp_path, workers=2, progress=False, log=log)
    rows = frame(tmp_path)
    crashed = rows[rows["seed"] == 1]
    assert len(rows) == spec.n_cells and result.n_errors == len(crashed) == 6
    assert crashed["error"].str.startswith("ValueError: agent bug on seed 1").all()
    assert crashed["episode_return"].isna().all() and crashed["ceiling"].notna().all()
    assert rows[rows["seed"] != 1]["error"].isna().all()
    assert "6 cell(s) crashed" in log.getvalue()
    table = mismatch_table(rows, by=("agent", "task_id"))
    assert (table["errors"] == 3).all() and (table["n"] == 6).all()


def test_retry_errors_reruns_crashed_cells_after_a_fix(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(
        "from harness_gym.baselines.agents import RandomAgent\n"
        "class A(RandomAgent):\n"
        "    def act(self, observation, info):\n"
        "        raise RuntimeError('bug')\n"
        "def make(env):\n"
        "    return A()\n"
    )
    spec = small_spec(f"{agent}:make", seeds=2)
    assert run_sweep(spec, tmp_path / "s", workers=0, progress=False, log=io.StringIO()).n_errors == 12
    assert run_sweep(spec, tmp_path / "s", workers=0, progress=False, log=io.StringIO()).n_run == 0
    time.sleep(0.01)
    agent.write_text(
        "from harness_gym.baselines.agents import RandomAgent\ndef make(env):\n    return RandomAgent()\n"
    )
    fixed = run_sweep(spec, tmp_path / "s", workers=0, progress=False, retry_errors=True, log=io.StringIO())
    assert (fixed.n_run, fixed.n_errors) == (12, 0)
    rows = frame(tmp_path / "s")
    assert len(rows) == 12 and rows["error"].isna().all()
    assert len((tmp_path / "s" / ROWS_JSONL).read_text().splitlines()) == 24  # append-only


def test_killed_worker_keeps_rows_retries_and_records(tmp_path: Path, agents_file: Path) -> None:
    """A cell that kills its worker every time is recorded; one killed once is re-run."""
    spec = small_spec(f"{agents_file}:killer_and_flaky")
    log = io.StringIO()
    result = run_sweep(spec, tmp_path / "k", workers=2, chunk_size=4, progress=False, log=log)
    rows = frame(tmp_path / "k")
    assert len(rows) == spec.n_cells and list(rows["index"]) == list(range(spec.n_cells))
    dead = (rows["task_id"] == "ClickButton") & (rows["seed"] == 1)
    assert (rows.loc[dead, "error"] == WORKER_DIED).all() and result.n_errors == dead.sum() == 3
    assert "a worker process died" in log.getvalue() and "killed its worker 2 times" in log.getvalue()
    # Every other row (the flaky cell included) equals the plain random agent's row.
    run_sweep(small_spec("random"), tmp_path / "r", workers=0, progress=False)
    reference = frame(tmp_path / "r")
    columns = ["episode_return", "success", "steps", "invalid_actions", "ceiling"]
    pd.testing.assert_frame_equal(rows.loc[~dead, columns], reference.loc[~dead, columns], check_dtype=False)


def test_ray_backend_gives_the_rows_of_the_local_backend(tmp_path: Path, agents_file: Path) -> None:
    import ray

    spec = small_spec(["random", f"{agents_file}:killer"], seeds=2)
    run_sweep(spec, tmp_path / "local", workers=2, progress=False, log=io.StringIO())
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        result = run_sweep(
            spec, tmp_path / "ray", workers=2, backend="ray", progress=False, log=io.StringIO()
        )
    finally:
        ray.shutdown()
    assert result.n_errors == 3  # the killer's cells on ClickButton, seed 1
    pd.testing.assert_frame_equal(frame(tmp_path / "local"), frame(tmp_path / "ray"))


def test_cli_sweep_prints_the_side_by_side_table(tmp_path: Path) -> None:
    out = io.StringIO()
    argv = ["sweep", "--agent", "oracle", "--agent", "oracle@Json", "--tasks", "ClickButton"]
    argv += ["--subset", "balanced:4", "--seeds", "2", "--workers", "0", "--quiet", "--out", str(tmp_path)]
    assert cli_sweep.main(argv, out=out) == 0
    text = out.getvalue()
    assert "16 cells: 0 already done, 16 run" in text
    assert "ceiling" in text and "deployed" in text and "mismatch" in text
    assert f"next: harness-gym report {tmp_path}" in text
    for unknown in (["--agent", "nope"], ["--agent", "random", "--tasks", "Nope"]):
        with pytest.raises(SystemExit, match="^harness-gym: error: unknown"):
            cli_sweep.main(["sweep", *unknown, "--out", str(tmp_path / "x")])


# -- mismatch ----------------------------------------------------------------------------------


def test_mismatch_is_paired_and_deployed_is_ceiling_minus_mismatch() -> None:
    rows = pd.DataFrame(
        {
            "agent": ["a"] * 6,
            "task_id": ["T"] * 6,
            "harness_name": ["h0"] * 3 + ["h1"] * 3,
            "harness_id": ["x"] * 3 + ["y"] * 3,
            "seed": [0, 1, 2] * 2,
            "episode_return": [1.0, 0.0, 0.5, 0.0, 0.0, None],
            "ceiling": [1.0, 1.0, 0.5, 1.0, 0.0, 1.0],
            "success": [True, False, True, False, False, None],
            "error": [None] * 5 + ["boom"],
        }
    )
    table = mismatch_table(rows)
    h0, h1 = table.iloc[0], table.iloc[1]
    assert (h0["n"], h0["errors"], h1["n"], h1["errors"]) == (3, 0, 2, 1)
    assert h0["mismatch"] == pytest.approx(1 / 3) and h1["mismatch"] == pytest.approx(0.5)
    for _, r in table.iterrows():
        assert r["deployed"] == pytest.approx(r["ceiling"] - r["mismatch"])
        for name in ("ceiling", "deployed", "mismatch", "success"):
            assert r[f"{name}_low"] <= r[name] <= r[f"{name}_high"]
    pooled = mismatch_table(rows, by=("agent", "task_id")).iloc[0]
    assert pooled["n"] == 5 and pooled["mismatch"] == pytest.approx((0 + 1 + 0 + 1 + 0) / 5)
    text = side_by_side(table)
    assert text["mismatch"][1].startswith("0.50 [")
