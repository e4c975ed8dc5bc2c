"""The harness panel as a PettingZoo Parallel env: PettingZoo's own API tests, pairing, bad input."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test  # noqa: E402
from pettingzoo.utils.conversions import parallel_to_aec  # noqa: E402

from harness_gym import Harness, make_env  # noqa: E402
from harness_gym.core.panel import HarnessPanel  # noqa: E402
from harness_gym.multiagent import AgentError, make, registered_ids  # noqa: E402
from harness_gym.multiagent.panel import HarnessPanelEnv  # noqa: E402

# Harnesses written as specs (preset names other than Json* are being renamed elsewhere).
XML = {"obs_format": "xml", "tool_style": "xml", "tool_naming": "opaque", "invalid_action": "end"}
MARKDOWN = {"obs_format": "markdown", "field_order": "reversed", "tool_style": "python", "parser": "lenient"}
YAML = {"obs_format": "yaml", "tool_style": "command", "invalid_action": "ignore"}
MIXES = [
    ["Json", XML, MARKDOWN],
    ["Json", "Json", YAML, "JsonReversed"],
]


@pytest.fixture(autouse=True)
def _quiet() -> None:
    # PettingZoo's checks warn that text spaces are not Box/Discrete: true, and intended.
    warnings.filterwarnings("ignore", module="pettingzoo")


@pytest.mark.parametrize("mix", MIXES)
def test_pettingzoo_api_tests(mix: list) -> None:
    parallel_api_test(HarnessPanelEnv("EnterText", mix), num_cycles=40)
    api_test(parallel_to_aec(HarnessPanelEnv("EnterText", mix)), num_cycles=20)
    parallel_seed_test(lambda: HarnessPanelEnv("LoginUser", mix), num_cycles=20)


def test_agents_play_one_paired_instance_each_through_its_harness() -> None:
    env = HarnessPanelEnv("BookFlight", ["Json", XML, "JsonReversed", "Json"])
    xml = Harness.from_dict(XML).id
    assert env.possible_agents == ["Json", xml, "JsonReversed", "Json_2"]
    obs, infos = env.reset(seed=5)
    assert len({i["state_digest"] for i in infos.values()}) == 1
    assert {i["seed"] for i in infos.values()} == {5}
    assert [infos[a]["harness_id"] for a in env.agents] == [env.env_of(a).harness.id for a in env.agents]
    assert obs["Json"] != obs[xml] != obs["JsonReversed"] and obs["Json"] == obs["Json_2"]
    # The same seed under a single-agent env builds the same instance, shown the same way.
    single_obs, single = make_env("BookFlight", XML).reset(seed=5)
    assert single["state_digest"] == infos[xml]["state_digest"] and obs[xml] == single_obs
    returns = dict.fromkeys(env.possible_agents, 0.0)
    while env.agents:
        _, rewards, _, _, infos = env.step({a: env.env_of(a).oracle_action() for a in env.agents})
        for a, r in rewards.items():
            returns[a] += r
    assert returns == dict.fromkeys(env.possible_agents, 1.0)


def test_an_agent_ends_on_its_own_and_the_others_go_on() -> None:
    env = HarnessPanelEnv("EnterText", [Harness(invalid_action="end"), "Json"])
    ending, going = env.possible_agents
    env.reset(seed=1)
    _, rewards, terms, truncs, infos = env.step({ending: "garbage", going: "garbage"})
    assert terms == {ending: True, going: False} and env.agents == [going]
    assert infos[going]["invalid_actions"] == 1 and infos[going]["error_kind"] is not None
    while env.agents:
        _, rewards, terms, truncs, infos = env.step({going: env.env_of(going).oracle_action()})
        assert set(rewards) == {going}
    assert rewards[going] == 1.0 and infos[going]["success"]


def test_bad_calls_raise_clearly_and_lose_nothing() -> None:
    mix = ["Json", YAML, Harness(invalid_action="end")]
    env, twin = HarnessPanelEnv("LoginUser", mix), HarnessPanelEnv("LoginUser", mix)
    a, b, c = env.possible_agents
    env.reset(seed=3)
    twin.reset(seed=3)
    first = {x: env.env_of(x).oracle_action() for x in (a, b)} | {c: "garbage"}
    env.step(first)
    twin.step(first)
    assert env.agents == [a, b]
    oracle = {x: env.env_of(x).oracle_action() for x in (a, b)}
    with pytest.raises(AgentError, match="lacks live agent"):
        env.step({a: oracle[a]})  # a missing agent
    with pytest.raises(AgentError, match="unknown agent"):
        env.step({**oracle, "nobody": "x"})
    with pytest.raises(AgentError, match="already finished"):
        env.step({**oracle, c: "x"})  # acting out of turn: its episode is over
    with pytest.raises(TypeError, match="output texts"):
        env.step({a: oracle[a], b: 3})
    with pytest.raises(TypeError, match="dict from agent name"):
        env.step([oracle[a], oracle[b]])
    with pytest.raises(AgentError, match="unknown agent"):
        env.observation_space("nobody")
    # Nothing was stepped: the env goes on exactly like its twin.
    out = env.step(oracle)
    expected = twin.step(oracle)
    assert out[0] == expected[0] and out[1] == expected[1] and out[4] == expected[4]


def test_works_with_supersuit_vectorization() -> None:
    ss = pytest.importorskip("supersuit")
    vec = ss.pettingzoo_env_to_vec_env_v1(HarnessPanelEnv("ClickButton", ["Json", XML]))
    obs, infos = vec.reset(seed=4)
    assert len(obs) == 2 and len({i["state_digest"] for i in infos}) == 1
    actions = [vec.par_env.env_of(a).oracle_action() for a in vec.par_env.possible_agents]
    obs, rewards, terms, truncs, infos = vec.step(actions)
    assert np.asarray(rewards).tolist() == [1.0, 1.0] and all(terms)
    # Several panels concatenated into one vector env (in this process). SuperSuit's vector
    # envs need the agents of a panel to end together (its black_death needs Box spaces).
    make_vec = ss.pettingzoo_env_to_vec_env_v1
    both = ss.concat_vec_envs_v1(make_vec(HarnessPanelEnv("ClickButton", ["Json", MARKDOWN])), 2, num_cpus=0)
    obs, _ = both.reset(seed=0)
    assert len(obs) == 4
    _, rewards, terms, _, infos = both.step(["garbage"] * 4)
    assert np.asarray(rewards).tolist() == [0.0] * 4 and not np.asarray(terms).any()
    assert [i["invalid_actions"] for i in infos] == [1] * 4


def test_the_vector_panel_and_the_parallel_panel_are_one_code_path() -> None:
    env = HarnessPanelEnv("ClickButton", ["Json", Harness(invalid_action="end")])
    assert isinstance(env.panel, HarnessPanel)
    env.reset(seed=2)
    assert env.panel.active.tolist() == [True, True]
    env.step(dict.fromkeys(env.agents, "garbage"))  # the second ends on an invalid action
    assert env.panel.active.tolist() == [True, False] and env.agents == ["Json"]


def test_registered_ids_and_make() -> None:
    ids = registered_ids()
    assert "harness_gym/ClickButton-Panel-v0" in ids and "harness_gym/EnterText-Mesh-v0" in ids
    env = make("harness_gym/ClickButton-Panel-v0", harnesses=["Json", "JsonReversed"])
    assert isinstance(env, HarnessPanelEnv) and env.possible_agents == ["Json", "JsonReversed"]
    with pytest.raises(ValueError, match="did you mean"):
        make("harness_gym/ClickButon-Panel-v0")


def test_missing_pettingzoo_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness_gym.multiagent as ma

    monkeypatch.setitem(sys.modules, "pettingzoo", None)
    with pytest.raises(ImportError, match=r"harness-gym\[pettingzoo\]"):
        ma.require_pettingzoo()
    with pytest.raises(ImportError, match=r"harness-gym\[pettingzoo\]"):
        ma.__getattr__("HintMeshEnv")


def test_unseeded_resets_continue_the_seeded_stream() -> None:
    runs = []
    for _ in range(2):
        env = HarnessPanelEnv("ClickButton", ["Json", "JsonReversed"])
        env.reset(seed=11)
        runs.append([env.reset()[1]["Json"]["seed"] for _ in range(3)])
    assert runs[0] == runs[1] and len(set(runs[0])) == 3
    with pytest.raises(TypeError, match="one task seed"):
        HarnessPanel("ClickButton", ["Json"]).reset_members(seed=True)


def test_importing_an_env_module_without_pettingzoo_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith("harness_gym.multiagent.")]:
        if name.rsplit(".", 1)[-1] in {"pz", "mesh", "panel", "delegation", "sweep", "registry"}:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pettingzoo", None)
    with pytest.raises(ImportError, match=r"harness-gym\[pettingzoo\]"):
        import harness_gym.multiagent.mesh  # noqa: F401
