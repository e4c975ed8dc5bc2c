"""Sweeps over multi-agent envs give one row per agent per episode, with known values."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from pettingzoo.test import api_test  # noqa: E402
from pettingzoo.utils.wrappers import OrderEnforcingWrapper  # noqa: E402

from harness_gym import make_env  # noqa: E402
from harness_gym.multiagent import run_multiagent_sweep  # noqa: E402
from harness_gym.multiagent.delegation import DelegationEnv  # noqa: E402
from harness_gym.multiagent.mesh import HintMeshEnv  # noqa: E402
from harness_gym.multiagent.scripted import HintFollower, MeshOracle, OracleWorker, ScriptedController  # noqa: E402


def mesh_policy(env: HintMeshEnv, agent: str):  # noqa: ANN201
    return MeshOracle(env, agent) if agent == "agent_0" else HintFollower(env, agent, seed=7)


def delegation_policies(mode: str) -> dict:
    return {
        "controller_0": lambda env, agent: ScriptedController(env, mode),
        "worker_0": lambda env, agent: OracleWorker(env),
    }


def test_rows_per_agent_with_known_values(tmp_path) -> None:  # noqa: ANN001
    seeds = [0, 1, 2]
    cost = 0.05
    rows = run_multiagent_sweep(
        {"delegate-always": lambda: DelegationEnv("EnterText", channel={"worker_step_cost": cost})},
        delegation_policies("always"),
        seeds,
        out_dir=tmp_path / "d",
    )
    rows += run_multiagent_sweep(
        {"mesh": lambda: HintMeshEnv("ClickButton", 3, channel={"hint_position": "first"})},
        mesh_policy,
        seeds,
        out_dir=tmp_path / "m",
    )
    delegation = [r for r in rows if r["env_id"] == "delegate-always"]
    mesh = [r for r in rows if r["env_id"] == "mesh"]
    assert len(delegation) == 2 * len(seeds) and len(mesh) == 3 * len(seeds)
    for row in delegation:
        env = make_env("EnterText")
        env.reset(seed=row["seed"])
        n = 0
        while not env.step(env.oracle_action())[2]:
            n += 1
        n += 1  # the oracle's step count on this seed
        assert row["episode_return"] == pytest.approx(1 - cost * n) and row["success"]
        assert row["level_delegation_style"] == "tool" and row["channel_id"].startswith("d-")
        assert row["steps"] == (1 if row["agent"] == "controller_0" else n) and row["error"] is None
    assert all(r["success"] and r["episode_return"] == 1.0 and r["team_reward"] == 1.0 for r in mesh)
    assert {r["agent"] for r in mesh} == {"agent_0", "agent_1", "agent_2"}
    written = [json.loads(line) for line in (tmp_path / "m" / "episodes.jsonl").read_text().splitlines()]
    assert [(r["agent"], r["seed"]) for r in written] == [(r["agent"], r["seed"]) for r in mesh]
    pd = pytest.importorskip("pandas")
    assert len(pd.read_parquet(tmp_path / "d" / "episodes.parquet")) == len(delegation)


def test_a_crashing_policy_is_recorded_and_the_sweep_goes_on() -> None:
    calls = {"n": 0}

    def flaky(env, agent):  # noqa: ANN001, ANN202
        inner = ScriptedController(env, "never")

        def act(obs, info):  # noqa: ANN001, ANN202
            calls["n"] += 1
            if info["seed"] == 1:
                raise RuntimeError("policy broke")
            return inner(obs, info)

        return act

    rows = run_multiagent_sweep(
        {"d": lambda: DelegationEnv("ClickButton")},
        {"controller_0": flaky, "worker_0": lambda env, a: OracleWorker(env)},
        [0, 1, 2],
    )
    errors = {(r["seed"], r["agent"]): r["error"] for r in rows}
    assert errors[(1, "controller_0")] == errors[(1, "worker_0")] == "RuntimeError: policy broke"
    assert errors[(0, "controller_0")] is None and errors[(2, "worker_0")] is None
    assert [r["episode_return"] for r in rows if r["seed"] != 1] == [1.0] * 4
    with pytest.raises(ValueError, match="no policy for agent 'worker_0'"):
        run_multiagent_sweep({"d": lambda: DelegationEnv("ClickButton")}, {"controller_0": flaky}, [0])
    with pytest.raises(TypeError, match="sequence of ints"):
        run_multiagent_sweep({"d": lambda: DelegationEnv("ClickButton")}, flaky, 3)  # type: ignore[arg-type]


def test_pettingzoo_wrappers_around_the_aec_env() -> None:
    warnings.filterwarnings("ignore", module="pettingzoo")
    api_test(OrderEnforcingWrapper(DelegationEnv("EnterText")), num_cycles=20)
    wrapped = OrderEnforcingWrapper(DelegationEnv("ClickButton"))
    with pytest.raises(Exception, match="reset"):
        wrapped.step("x")  # PettingZoo's wrapper: step before reset


def test_the_effect_of_delegating_is_the_cost_of_the_workers_steps() -> None:
    from harness_gym.multiagent import paired_effect

    cost, seeds, tasks = 0.1, [0, 1, 2, 3], ["EnterText", "LoginUser", "BookFlight"]
    channel = {"worker_step_cost": cost, "max_worker_steps": 8}
    rows = []
    for mode in ("always", "never"):
        envs = {t: (lambda t=t: DelegationEnv(t, channel=channel)) for t in tasks}
        rows += run_multiagent_sweep(envs, delegation_policies(mode), seeds, policy_name=mode)
    effect = paired_effect(rows, "policy", "always", "never", agent="controller_0")
    # By construction: delegating everything costs cost x (the oracle's steps) per episode.
    steps = []
    for task in tasks:
        for seed in seeds:
            env = make_env(task)
            env.reset(seed=seed)
            n, done = 0, False
            while not done:
                _, _, term, trunc, _ = env.step(env.oracle_action())
                n, done = n + 1, term or trunc
            steps.append(n)
    assert effect.pairs == len(tasks) * len(seeds)
    assert effect.mean == pytest.approx(-cost * sum(steps) / len(steps))
    assert effect.stderr > 0  # the tasks need different step counts
    success = paired_effect(rows, "policy", "always", "never", metric="success")
    assert success.mean == 0.0 and success.pairs == 2 * len(tasks) * len(seeds)
    with pytest.raises(ValueError, match="values of policy seen"):
        paired_effect(rows, "policy", "always", "sometimes")


def test_the_effect_of_showing_hints_matches_the_counts_known_by_construction() -> None:
    from harness_gym.multiagent import paired_effect
    from harness_gym.multiagent.scripted import random_legal_episode

    seeds, task, n_agents = list(range(6)), "ClickCheckboxes", 3
    rows = []
    for position in ("first", "hidden"):

        def policy(env, agent):  # noqa: ANN001, ANN202
            return (
                MeshOracle(env, agent)
                if agent == "agent_0"
                else HintFollower(env, agent, seed=int(agent[-1]))
            )

        rows += run_multiagent_sweep(
            {task: lambda p=position: HintMeshEnv(task, n_agents, channel={"hint_position": p})},
            policy,
            seeds,
        )
    effect = paired_effect(rows, "level_hint_position", "first", "hidden", metric="success")
    # Shown: every agent wins. Hidden: the oracle wins, each follower as a lone random agent.
    alone = [
        random_legal_episode(make_env(task), seed, rng)
        for i in range(1, n_agents)
        for rng in [np.random.default_rng(i)]
        for seed in seeds
    ]
    expected = sum(1 - won for won in alone) / (n_agents * len(seeds))
    assert effect.pairs == n_agents * len(seeds) and effect.mean == pytest.approx(expected) and expected > 0


def test_report_on_a_multi_agent_sweep_folder(tmp_path) -> None:  # noqa: ANN001
    """``harness-gym report`` on a multi-agent sweep folder writes a report (harness = the
    channel between the agents), not 'unexpected KeyError: harness_name'."""
    import io

    from harness_gym.cli import main

    envs = {
        f"mesh-{pos}": (lambda pos=pos: HintMeshEnv("ClickButton", 3, channel={"hint_position": pos}))
        for pos in ("first", "last")
    }
    run_multiagent_sweep(envs, mesh_policy, [0, 1, 2], out_dir=tmp_path / "m")
    out = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(out):
        code = main(["report", str(tmp_path / "m")])
    assert code == 0, out.getvalue()
    text = (tmp_path / "m" / "report" / "report.md").read_text()
    assert "multi-agent sweep" in text and "agent_0" in text
    assert "No viewer:" in text and "records no per-episode trajectories" in text
    from harness_gym.cli import CLIExit

    with pytest.raises(CLIExit, match="multi-agent sweep: it records no per-episode trajectories"):
        main(["view", str(tmp_path / "m")])
    assert not (tmp_path / "m" / "view").exists()  # nothing to view: nothing written
