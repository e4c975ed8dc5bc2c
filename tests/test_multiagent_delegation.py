"""Delegation (AEC): PettingZoo's API and seed tests, scripted controllers against rewards
computed by hand, the channel factors, and bad input."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("pettingzoo")

from pettingzoo.test import api_test, seed_test  # noqa: E402

from harness_gym import Action, Harness, make_env  # noqa: E402
from harness_gym.multiagent import AgentError, DelegationChannel, make  # noqa: E402
from harness_gym.multiagent.delegation import CONTROLLER, WORKER, DelegationEnv  # noqa: E402
from harness_gym.multiagent.scripted import (  # noqa: E402
    GARBAGE,
    OracleWorker,
    ScriptedController,
    run_delegation,
)

XML = {"obs_format": "xml", "tool_style": "xml", "tool_naming": "opaque", "tool_order": "alphabetical"}
PYTHON = {"obs_format": "markdown", "tool_style": "python", "tool_naming": "synonyms", "parser": "lenient"}
COMMAND = {"obs_format": "yaml", "tool_style": "command", "invalid_action": "ignore"}
PERMUTED = {"tool_order": ["select", "press", "type", "click"]}
MIXES = [
    ("Json", "Json", None),
    (XML, PYTHON, {"delegation_style": "prefix", "worker_view": "summary"}),
    (COMMAND, PERMUTED, {"worker_view": "none", "max_worker_steps": 1}),
]


@pytest.fixture(autouse=True)
def _quiet() -> None:
    warnings.filterwarnings("ignore", module="pettingzoo")


@pytest.mark.parametrize(("controller", "worker", "channel"), MIXES)
def test_pettingzoo_api_and_seed_tests(controller: object, worker: object, channel: object) -> None:
    api_test(DelegationEnv("EnterText", controller, worker, channel=channel), num_cycles=40)
    seed_test(lambda: DelegationEnv("LoginUser", controller, worker, channel=channel), num_cycles=20)
    # A random agent's text is all invalid; a scripted pair must also pass the seed test's
    # comparison, so check two scripted runs of the sampled channel match exactly.
    runs = [
        run_delegation(env, ScriptedController(env, "always"), OracleWorker(env), seed=9)
        for env in (DelegationEnv("LoginUser", controller, worker, channel="sample") for _ in range(2))
    ]
    assert runs[0] == runs[1]


def oracle_steps(task: str, seed: int) -> int:
    """Steps the task's oracle takes on ``seed`` in a plain single-agent env."""
    env = make_env(task)
    env.reset(seed=seed)
    steps, done = 0, False
    while not done:
        _, _, term, trunc, _ = env.step(env.oracle_action())
        steps, done = steps + 1, term or trunc
    return steps


def test_clickbutton_rewards_by_hand() -> None:
    # ClickButton: the oracle needs one click. Cost 0.05 per worker turn, k = 3.
    for mode, mistakes, expected, turns in [
        ("never", (), 1.0, 1),  # the controller clicks: 1
        ("always", (), 0.95, 1),  # delegate; the worker clicks once: 1 - 0.05
        ("after_invalid", (1,), 0.95, 2),  # garbage, then delegate; the worker clicks: 1 - 0.05
        ("after_invalid", (), 1.0, 1),  # no mistake, no delegation: 1
        ("never", (1,), 1.0, 2),  # garbage, then the click: 1
    ]:
        env = DelegationEnv("ClickButton")
        result = run_delegation(env, ScriptedController(env, mode, mistakes), OracleWorker(env), seed=0)
        info = result["infos"][CONTROLLER]
        assert result["team_return"] == pytest.approx(expected), mode
        assert info["turns"] == turns and info["success"]


@pytest.mark.parametrize("task", ["EnterText", "LoginUser", "BookFlight"])
@pytest.mark.parametrize("style", ["tool", "prefix"])
def test_scripted_controllers_give_hand_computed_returns(task: str, style: str) -> None:
    cost, k, seed = 0.1, 2, 4
    n = oracle_steps(task, seed)
    channel = DelegationChannel(delegation_style=style, max_worker_steps=k, worker_step_cost=cost)
    expected = {
        "never": 1.0,  # the controller solves it alone
        "always": 1.0 - cost * n,  # the worker takes every one of the n steps
        "after_invalid": 1.0 - cost * min(n, k),  # one delegation of k turns after its mistake
    }
    infos = {}
    for mode, want in expected.items():
        env = DelegationEnv(task, PYTHON, XML, channel=channel)
        mistakes = (1,) if mode == "after_invalid" else ()
        result = run_delegation(env, ScriptedController(env, mode, mistakes), OracleWorker(env), seed=seed)
        infos[mode] = info = result["infos"][CONTROLLER]
        assert result["team_return"] == pytest.approx(want), (mode, n)
        assert info["success"] and info["worker_steps"] == round((1.0 - want) / cost)
        assert result["infos"][WORKER]["team_return"] == pytest.approx(want)
    # Delegations: ceil(n / k) for the always-delegator, one after the mistake, none otherwise.
    assert infos["always"]["delegations"] == -(-n // k) and infos["always"]["turns"] == -(-n // k)
    assert infos["after_invalid"]["delegations"] == 1 and infos["never"]["delegations"] == 0
    # After its delegation the after_invalid controller finishes the rest itself.
    assert infos["after_invalid"]["turns"] == 2 + max(0, n - k)


def test_the_channel_is_recorded_and_sampled_from_the_seed() -> None:
    env = DelegationEnv("ClickButton", channel="sample")
    seen = {}
    for seed in range(12):
        env.reset(seed=seed)
        info = env.infos[CONTROLLER]
        assert info["channel_id"] == DelegationChannel.from_dict(info["channel"]).id
        assert env.infos[WORKER]["channel_id"] == info["channel_id"]
        seen[seed] = info["channel_id"]
    assert len(set(seen.values())) >= 3  # the levels vary over seeds ...
    again = DelegationEnv("ClickButton", channel="sample")
    for seed, channel_id in seen.items():  # ... and each seed gives its channel back
        again.reset(seed=seed)
        assert again.infos[CONTROLLER]["channel_id"] == channel_id
    assert DelegationChannel().sample(3) == DelegationChannel().sample(3)


@pytest.mark.parametrize("view", ["actions", "summary", "none"])
def test_what_the_controller_sees_of_the_worker(view: str) -> None:
    env = DelegationEnv("LoginUser", channel={"worker_view": view, "max_worker_steps": 2})
    controller = ScriptedController(env, "always", instruction="Fill in the form.")
    worker = OracleWorker(env, end_after=1)
    env.reset(seed=2)
    env.step(controller(env.observe(CONTROLLER), env.infos[CONTROLLER]))
    assert env.agent_selection == WORKER
    assert env.observe(WORKER).startswith("Instruction from the controller: Fill in the form.")
    acted = worker(env.observe(WORKER), env.infos[WORKER])
    env.step(acted)
    env.step(worker(env.observe(WORKER), env.infos[WORKER]))  # ends its turn with a summary
    assert env.agent_selection == CONTROLLER
    seen = env.observe(CONTROLLER)
    written = env.controller_bound.format_action(env.worker_bound.parse(acted))
    assert (f"- {written}" in seen) == (view == "actions")
    assert ("The worker's summary: did 1 step(s)" in seen) == (view == "summary")
    assert "worker" not in seen.lower() or view != "none"


def test_a_worker_out_of_steps_returns_control() -> None:
    env = DelegationEnv("BookFlight", channel={"max_worker_steps": 2, "worker_view": "summary"})
    controller, worker = ScriptedController(env, "always"), OracleWorker(env)
    env.reset(seed=1)
    env.step(controller(env.observe(CONTROLLER), env.infos[CONTROLLER]))
    for _ in range(2):
        assert env.agent_selection == WORKER
        env.step(worker(env.observe(WORKER), env.infos[WORKER]))
    assert env.agent_selection == CONTROLLER
    assert "ran out of steps after 2" in env.observe(CONTROLLER)
    assert env.rewards[CONTROLLER] == pytest.approx(-0.05)


def test_delegating_inside_a_delegation_is_the_workers_invalid_action() -> None:
    for style, nested in [("tool", None), ("prefix", "DELEGATE: you do it")]:
        env = DelegationEnv("EnterText", channel={"delegation_style": style})
        env.reset(seed=0)
        env.step(ScriptedController(env, "always").delegation())
        text = nested or env._bound["worker_delegating"].format_action(
            env.controller_bound.parse(ScriptedController(env, "always").delegation())
        )
        env.step(text)
        info = env.infos[WORKER]
        assert info["error_kind"] == "nested_delegation" and "cannot delegate" in info["last_error"]
        assert "cannot delegate" in env.observe(WORKER)  # feedback policy shows it
        assert env.agent_selection == WORKER and not any(env.terminations.values())
        # The worker goes on and solves the task.
        worker = OracleWorker(env)
        while env.agents and env.agent_selection == WORKER and not env.terminations[WORKER]:
            env.step(worker(env.observe(WORKER), env.infos[WORKER]))
        assert env.infos[CONTROLLER]["success"]


def test_bad_agent_text_follows_each_agents_harness() -> None:
    # Controller with invalid_action=end: its garbage ends the episode with reward 0.
    env = DelegationEnv("ClickButton", Harness(invalid_action="end"))
    env.reset(seed=0)
    env.step(GARBAGE)
    assert all(env.terminations.values()) and env.rewards == {CONTROLLER: 0.0, WORKER: 0.0}
    # Worker with invalid_action=end: its garbage ends its turn, not the episode.
    env = DelegationEnv("ClickButton", worker_harness=Harness(invalid_action="end"))
    env.reset(seed=0)
    env.step(ScriptedController(env, "always").delegation())
    env.step(GARBAGE)
    assert env.agent_selection == CONTROLLER and not any(env.terminations.values())
    assert env.infos[WORKER]["invalid_actions"] == 1
    # An empty instruction is the controller's invalid action (feedback: shown, turn used).
    env.step('{"name": "delegate", "arguments": {"instruction": "  "}}')
    assert env.agent_selection == CONTROLLER and env.infos[CONTROLLER]["error_kind"] == "empty_instruction"
    assert "needs an instruction" in env.observe(CONTROLLER)


def test_programming_errors_raise_and_lose_nothing() -> None:
    env, twin = DelegationEnv("LoginUser"), DelegationEnv("LoginUser")
    env.reset(seed=5)
    twin.reset(seed=5)
    first = ScriptedController(env, "always").delegation()
    with pytest.raises(AgentError, match="worker_0's turn|controller_0's turn"):
        env.step(first, agent=WORKER)  # acting out of turn
    with pytest.raises(AgentError, match="unknown agent"):
        env.observe("nobody")
    with pytest.raises(AgentError, match="unknown agent"):
        env.step(first, agent="nobody")
    with pytest.raises(TypeError, match="output text"):
        env.step(3)  # type: ignore[arg-type]
    for e in (env, twin):
        e.step(first, agent=CONTROLLER)
    assert env.observe(WORKER) == twin.observe(WORKER) and env.infos == twin.infos
    with pytest.raises(AgentError, match="it is worker_0's turn"):
        env.step("x", agent=CONTROLLER)
    assert env.infos == twin.infos and env.agent_selection == WORKER


def test_make_by_id_and_bad_channels() -> None:
    env = make("harness_gym/ClickButton-Delegation-v0", channel={"worker_view": "none"})
    assert isinstance(env, DelegationEnv) and env.possible_agents == [CONTROLLER, WORKER]
    with pytest.raises(ValueError, match="unknown level 'all'"):
        DelegationEnv("ClickButton", channel={"worker_view": "all"})
    with pytest.raises(ValueError, match="max_worker_steps"):
        DelegationChannel(max_worker_steps=0)
    with pytest.raises(ValueError, match="worker_step_cost"):
        DelegationChannel(worker_step_cost=float("nan"))
    with pytest.raises(TypeError, match="'sample'"):
        DelegationEnv("ClickButton", channel=3)  # type: ignore[arg-type]


def test_system_prompts_say_how_to_delegate() -> None:
    tool = DelegationEnv("ClickButton", channel={"max_worker_steps": 4})
    tool.reset(seed=0)
    assert "delegate" in tool.infos[CONTROLLER]["system_prompt"] and "DELEGATE:" not in tool.system_prompt(
        CONTROLLER
    )
    assert {t["function"]["name"] for t in tool.infos[CONTROLLER]["tools"]} >= {"click", "delegate"}
    assert "end_turn" in tool.infos[WORKER]["system_prompt"] and "up to 4 turns" in tool.system_prompt(WORKER)
    prefix = DelegationEnv("ClickButton", channel={"delegation_style": "prefix"})
    prefix.reset(seed=0)
    assert "DELEGATE:" in prefix.infos[CONTROLLER]["system_prompt"]
    assert "delegate" not in {t["function"]["name"] for t in prefix.infos[CONTROLLER]["tools"]}


def test_worker_actions_the_controller_has_no_tool_for_are_shown_canonically() -> None:
    env = DelegationEnv("EnterText", controller_harness={"drop_tools": ["type"]})
    env.reset(seed=0)
    env.step(ScriptedController(env, "always").delegation())
    action = env.task.oracle()
    assert action.name == "type"
    env.step(env.worker_bound.format_action(action))
    env.step(env.worker_bound.format_action(Action.of("end_turn", summary="typed")))
    assert f"- {action}" in env.observe(CONTROLLER)
    # A prefix-style delegation longer than the harness's max_action_chars is rejected unread.
    env = DelegationEnv("EnterText", channel={"delegation_style": "prefix"})
    env.reset(seed=0)
    env.step("DELEGATE: " + "x" * 9000)
    assert env.infos[CONTROLLER]["error_kind"] == "too_long" and env.agent_selection == CONTROLLER
    env.step("DELEGATE: type the text")
    assert env.agent_selection == WORKER
