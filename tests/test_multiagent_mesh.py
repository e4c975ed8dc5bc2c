"""The hint mesh (Parallel): PettingZoo's tests, hints help by exactly the counts known by
construction, the channel factors, and bad proposals."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test  # noqa: E402
from pettingzoo.utils.conversions import parallel_to_aec  # noqa: E402

from harness_gym import Harness, make_env  # noqa: E402
from harness_gym.multiagent import AgentError, MeshChannel, make  # noqa: E402
from harness_gym.multiagent.mesh import HintMeshEnv  # noqa: E402
from harness_gym.multiagent.scripted import HintFollower, MeshOracle, random_legal_episode  # noqa: E402

PYTHON = {"obs_format": "markdown", "tool_style": "python", "parser": "lenient"}
COMMAND = {"obs_format": "yaml", "tool_style": "command", "tool_naming": "synonyms"}
XML_END = {"obs_format": "xml", "tool_style": "xml", "invalid_action": "end"}
MIXES = [3, ["Json", PYTHON, COMMAND, XML_END]]


@pytest.fixture(autouse=True)
def _quiet() -> None:
    warnings.filterwarnings("ignore", module="pettingzoo")


@pytest.mark.parametrize("mix", MIXES)
def test_pettingzoo_api_and_seed_tests(mix: object) -> None:
    parallel_api_test(HintMeshEnv("EnterText", mix), num_cycles=40)
    api_test(parallel_to_aec(HintMeshEnv("EnterText", mix)), num_cycles=20)
    parallel_seed_test(lambda: HintMeshEnv("LoginUser", mix, channel="sample"), num_cycles=20)


def play_mesh(env: HintMeshEnv, seeds: range, follower_seed: int) -> tuple[int, list[float]]:
    """agent_0 is the oracle, the others hint followers; return the successes and team rewards."""
    agents = {"agent_0": MeshOracle(env, "agent_0")}
    for i, a in enumerate(env.possible_agents[1:], start=1):
        agents[a] = HintFollower(env, a, seed=follower_seed + i)
    wins, team = 0, []
    for seed in seeds:
        obs, infos = env.reset(seed=seed)
        while env.agents:
            obs, _, _, _, infos = env.step({a: agents[a](obs[a], infos[a]) for a in env.agents})
        wins += sum(bool(env.member(a).unwrapped._success) for a in env.possible_agents)
        team.append(env.team_reward)
    return wins, team


@pytest.mark.parametrize("task", ["ClickButton", "LoginUser", "ClickCheckboxes"])
def test_shown_hints_lift_random_agents_by_exact_counts(task: str) -> None:
    harnesses = ["Json", PYTHON, COMMAND, "JsonReversed"]
    seeds = range(8)
    shown, team = play_mesh(HintMeshEnv(task, harnesses, channel={"hint_position": "first"}), seeds, 50)
    hidden, _ = play_mesh(HintMeshEnv(task, harnesses, channel={"hint_position": "hidden"}), seeds, 50)
    # With hints shown, every follower commits the oracle's action on an identical copy: all win.
    assert shown == len(harnesses) * len(seeds) and team == [1.0] * len(seeds)
    # With hints hidden, each follower plays exactly like a random legal agent alone (same draws).
    alone = len(seeds)  # the oracle
    for i, harness in enumerate(harnesses[1:], start=1):
        rng, env = np.random.default_rng(50 + i), make_env(task, harness)
        alone += sum(random_legal_episode(env, seed, rng) for seed in seeds)
    assert hidden == alone < shown


def commit_view(channel: dict, task: str = "ClickButton") -> tuple[HintMeshEnv, dict, dict]:
    env = HintMeshEnv(task, ["Json", PYTHON], channel=channel)
    obs, infos = env.reset(seed=3)
    oracle = env.member("agent_0").oracle_action()
    obs, _, _, _, infos = env.step(
        {"agent_0": env.proposal(oracle, 0.9), "agent_1": env.proposal(oracle, 0.4)}
    )
    return env, obs, infos


@pytest.mark.parametrize(
    ("hint_format", "written"),
    [("native", "click(ref={ref})"), ("canonical", "click(ref={ref})"), ("prose", "click with ref {ref}")],
)
@pytest.mark.parametrize("position", ["first", "last"])
@pytest.mark.parametrize("confidence", [True, False])
def test_hint_format_position_and_confidence(
    hint_format: str, written: str, position: str, confidence: bool
) -> None:
    channel = {"hint_format": hint_format, "hint_position": position, "show_confidence": confidence}
    env, obs, infos = commit_view(channel)
    ref = env.member("agent_0").task.oracle()["ref"]
    hint = written.format(ref=ref)
    seen = obs["agent_1"]
    assert hint in seen and infos["agent_1"]["hint"] == hint
    page = env.panel.observations[1]  # agent_1's own observation of its copy
    assert (seen.index(hint) < seen.index(page)) == (position == "first")
    assert (position == "first") == seen.startswith("Hint")
    assert ("(confidence 0.90)" in seen) == confidence
    assert infos["agent_0"]["hint"] is None and "Hint" not in obs["agent_0"]  # not to its proposer
    assert infos["agent_1"]["broadcast"] == {
        "agent": "agent_0",
        "action": f"click(ref={ref})",
        "confidence": 0.9,
    }
    assert infos["agent_1"]["channel_id"] == MeshChannel(**channel).id


def test_hidden_hints_are_not_shown_but_recorded() -> None:
    env, obs, infos = commit_view({"hint_position": "hidden"})
    assert "Hint" not in obs["agent_1"] and infos["agent_1"]["hint"] is None
    assert infos["agent_1"]["broadcast"]["agent"] == "agent_0"


def test_native_hints_are_written_in_each_receivers_syntax() -> None:
    env = HintMeshEnv("EnterText", ["Json", PYTHON, COMMAND])
    env.reset(seed=0)
    action = env.member("agent_0").task.oracle()
    texts = {a: env.member(a).format_action(action) for a in env.possible_agents}
    _, _, _, _, infos = env.step(
        {a: env.proposal(texts[a], 0.5 + 0.1 * (a == "agent_0")) for a in env.agents}
    )
    assert infos["agent_1"]["hint"] == texts["agent_1"] and infos["agent_2"]["hint"] == texts["agent_2"]
    assert len(set(texts.values())) == 3


BAD_PROPOSALS = [
    ("{oracle}\nconfidence: 1.5", "confidence_range"),
    ("{oracle}\nconfidence: -0.1", "confidence_range"),
    ("{oracle}\nconfidence: nan", "confidence_range"),
    ("{oracle}\nconfidence: high", "bad_confidence"),
    ("{oracle}", "missing_confidence"),
    ("", "missing_confidence"),
    ("   \nconfidence: 0.9", "empty_proposal"),
    ("not an action\nconfidence: 0.9", "malformed"),
]


@pytest.mark.parametrize(("template", "kind"), BAD_PROPOSALS)
def test_bad_proposals_follow_the_proposers_harness(template: str, kind: str) -> None:
    policies = {
        "feedback": Harness(),
        "ignore": Harness(invalid_action="ignore"),
        "end": Harness(invalid_action="end"),
    }
    env = HintMeshEnv("ClickButton", list(policies.values()), channel={"hint_position": "last"})
    env.reset(seed=1)
    oracle = env.member("agent_0").oracle_action()
    bad = template.format(oracle=oracle)
    _, _, terms, _, infos = env.step(dict.fromkeys(env.agents, bad))
    for agent, policy in zip(env.possible_agents, policies):
        assert infos[agent]["proposal_error_kind"] == kind and infos[agent]["invalid_proposals"] == 1
        assert terms[agent] == (policy == "end")
        assert infos[agent]["hint"] is None  # an empty round broadcasts nothing
    assert infos["agent_0"]["broadcast"] is None
    obs = env._observations(env.agents)
    assert "Your proposal:" in obs["agent_0"] and "Your proposal:" not in obs["agent_1"]
    assert "Hint" not in obs["agent_0"]
    # The others' episodes go on: they commit and win.
    _, rewards, _, _, _ = env.step({a: env.member(a).oracle_action() for a in env.agents})
    assert rewards == {"agent_0": 1.0, "agent_1": 1.0}


def test_programming_errors_raise_and_lose_nothing() -> None:
    env, twin = HintMeshEnv("LoginUser", 3), HintMeshEnv("LoginUser", 3)
    env.reset(seed=2)
    twin.reset(seed=2)
    good = {a: env.proposal(env.member(a).oracle_action(), 0.5) for a in env.agents}
    with pytest.raises(AgentError, match="lacks live agent"):
        env.step({"agent_0": good["agent_0"]})
    with pytest.raises(AgentError, match="unknown agent"):
        env.step({**good, "agent_9": "x"})
    with pytest.raises(TypeError, match="output texts"):
        env.step({**good, "agent_1": 0.5})
    with pytest.raises(AgentError, match="unknown agent"):
        env.member("boss")
    assert env.step(good) == twin.step(good)
    with pytest.raises(ValueError, match="at least 2 agents"):
        HintMeshEnv("ClickButton", 1)
    with pytest.raises(ValueError, match="unknown level"):
        HintMeshEnv("ClickButton", 2, channel={"hint_position": "middle"})
    with pytest.raises(ValueError, match="unknown level"):
        MeshChannel(show_confidence="yes")  # type: ignore[arg-type]


def test_finished_agents_cannot_act() -> None:
    env = HintMeshEnv("ClickButton", ["Json", Harness(invalid_action="end")])
    env.reset(seed=0)
    env.step({"agent_0": "x\nconfidence: 0.2", "agent_1": "x"})  # agent_1's bad proposal ends it
    assert env.agents == ["agent_0"]
    with pytest.raises(AgentError, match="already finished"):
        env.step({"agent_0": "x", "agent_1": "x"})
    assert env.phase == "commit" and env.agents == ["agent_0"]


def test_make_by_id_and_team_reward_in_infos() -> None:
    env = make("harness_gym/ClickButton-Mesh-v0", harnesses=2)
    obs, infos = env.reset(seed=0)
    assert infos["agent_0"]["team_reward"] == 0.0 and infos["agent_0"]["phase"] == "propose"
    act = {a: env.proposal(env.member(a).oracle_action(), 1.0) for a in env.agents}
    env.step(act)
    _, rewards, terms, _, infos = env.step({a: env.member(a).oracle_action() for a in env.agents})
    assert rewards == {"agent_0": 1.0, "agent_1": 1.0} and all(terms.values())
    assert infos["agent_1"]["team_reward"] == 1.0 == env.team_reward


def test_works_with_supersuit_vectorization() -> None:
    ss = pytest.importorskip("supersuit")
    mesh = HintMeshEnv("ClickButton", 2)
    vec = ss.pettingzoo_env_to_vec_env_v1(mesh)
    vec.reset(seed=1)
    _, rewards, terms, _, _ = vec.step(
        [mesh.proposal(mesh.member(a).oracle_action(), 1.0) for a in mesh.agents]
    )
    assert mesh.phase == "commit" and not np.asarray(terms).any()
    _, rewards, terms, _, _ = vec.step([mesh.member(a).oracle_action() for a in mesh.possible_agents])
    assert np.asarray(rewards).tolist() == [1.0, 1.0] and np.asarray(terms).all()


def test_stepping_before_reset_says_so() -> None:
    from harness_gym.multiagent.delegation import DelegationEnv
    from harness_gym.multiagent.panel import HarnessPanelEnv

    for env in (HintMeshEnv("ClickButton", 2), HarnessPanelEnv("ClickButton", ["Json"])):
        with pytest.raises(RuntimeError, match="reset"):
            env.step({"agent_0": "x"})
    with pytest.raises(RuntimeError, match="reset"):
        DelegationEnv("ClickButton").step("x")
