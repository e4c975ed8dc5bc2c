"""Coding-harness presets (mini-swe-agent, Terminus, OpenHands styles) and reply conventions."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import harness_gym  # noqa: F401 - registers the ids
from harness_gym.core.harness import Harness, HarnessSpecError
from harness_gym.core.task import Action
from harness_gym.core.tools import ActionError
from harness_gym.envs.terminal import CODING_PRESETS, SENTINEL, TERMINAL_PRESETS, TERMINAL_TASK_IDS
from harness_gym.envs.terminal.env import TerminalEnv
from harness_gym.envs.terminal.options import TerminalOptions, present_result
from harness_gym.envs.terminal.replies import read_reply
from harness_gym.envs.terminal.sandbox_view import bwrap_problem
from harness_gym.envs.terminal.tasks import TERMINAL_TASKS

needs_bwrap = pytest.mark.skipif(
    bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}"
)


def play_oracle(env, seed: int) -> dict:
    env.reset(seed=seed)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
        done = terminated or truncated
    return info


def test_presets_differ_and_keep_their_terminal_factors() -> None:
    ids = {name: h.id for name, h in TERMINAL_PRESETS.items()}
    assert len(set(ids.values())) == 3
    mini = TERMINAL_PRESETS["MiniSweAgentStyle"].family("terminal")
    assert mini["reply"] == "bash_block" and mini["completion"] == "sentinel" and "shell" not in mini  # fresh
    terminus = TERMINAL_PRESETS["TerminusStyle"].family("terminal")
    assert terminus["reply"] == "terminus_json" and terminus["shell"] == "persistent"
    assert TERMINAL_PRESETS["OpenHandsStyle"].tool_channel == "native"
    for name, preset in TERMINAL_PRESETS.items():
        assert Harness.from_yaml(preset.to_yaml()) == preset, name


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"reply": "bash_block"}, "completion: sentinel"),
        ({"reply": "terminus_json", "completion": "sentinel"}, "completion: flag"),
        ({"completion": "flag"}, "task_complete flag of reply: terminus_json"),
        ({"reply": "yaml_block"}, "unknown level 'yaml_block'"),
    ],
)
def test_inconsistent_reply_and_completion_are_rejected(options, needle) -> None:
    with pytest.raises(HarnessSpecError) as err:
        TerminalOptions(**options)
    assert needle in str(err.value)


@needs_bwrap
def test_reply_convention_cannot_use_the_native_channel() -> None:
    harness = Harness(
        tool_channel="native", family_options={"terminal": {"reply": "bash_block", "completion": "sentinel"}}
    )
    with pytest.raises(HarnessSpecError, match="cannot use tool_channel: native"):
        TerminalEnv(TERMINAL_TASKS[0], harness=harness)


def test_bash_block_replies() -> None:
    assert read_reply("bash_block", "THOUGHT: look.\n\n```bash\nls -la\n```\n", False) == Action.of(
        "run", command="ls -la"
    )
    multi = "```bash\ncat <<'EOF' > a\nx\nEOF\n```"
    assert read_reply("bash_block", multi, False)["command"] == "cat <<'EOF' > a\nx\nEOF"
    for bad, kind in [
        ("ls -la", "malformed"),
        ("```bash\nls\n```\n```bash\npwd\n```", "multiple_actions"),
        ("```python\nprint(1)\n```", "unknown_tool"),
        ("```bash\n\n```", "empty"),
        ("", "empty"),
    ]:
        with pytest.raises(ActionError) as err:
            read_reply("bash_block", bad, False)
        assert err.value.kind == kind, bad


def test_terminus_json_replies() -> None:
    reply = {
        "analysis": "a",
        "plan": "p",
        "commands": [{"keystrokes": "cd sub\n", "duration": 0.1}, {"keystrokes": "ls\n"}],
    }
    assert read_reply("terminus_json", json.dumps(reply), False) == Action.of("run", command="cd sub\nls")
    done = {"analysis": "", "plan": "", "commands": [], "task_complete": True}
    assert read_reply("terminus_json", json.dumps(done), False) == Action.of("submit")
    # Strict: a JSON boolean only. Lenient (TerminusStyle): Terminus 2's own rule for a string,
    # lower-cased "true", "1" or "yes" is done and any other string is not; other types refused.
    for loose, lenient_reads in [("TRUE", True), ("yes", True), ("1", True), ("no", False), ("done", False)]:
        reply_text = json.dumps({**done, "task_complete": loose})
        with pytest.raises(ActionError, match="'task_complete' must be true or false") as err:
            read_reply("terminus_json", reply_text, False)
        assert err.value.kind == "wrong_type"
        if lenient_reads:
            assert read_reply("terminus_json", reply_text, True) == Action.of("submit")
        else:
            with pytest.raises(ActionError, match="no commands"):
                read_reply("terminus_json", reply_text, True)
    for loose in (1, None, [True]):
        for lenient in (False, True):
            with pytest.raises(ActionError, match="'task_complete' must be true or false"):
                read_reply("terminus_json", json.dumps({**done, "task_complete": loose}), lenient)
    with_command = {**reply, "task_complete": 2}  # not silently read as "not done" either
    with pytest.raises(ActionError, match="task_complete"):
        read_reply("terminus_json", json.dumps(with_command), True)
    prose = "Here it is: " + json.dumps(done) + " thanks"
    assert read_reply("terminus_json", prose, True) == Action.of("submit")
    with pytest.raises(ActionError):
        read_reply("terminus_json", prose, False)  # strict: the object alone
    for bad, needle in [
        ({"analysis": "", "commands": []}, "Missing required fields: plan"),
        ({"analysis": "", "plan": "", "commands": "ls"}, "must be an array"),
        ({"analysis": "", "plan": "", "commands": [{"keys": "ls"}]}, "keystrokes"),
        ({"analysis": "", "plan": "", "commands": [], "task_complete": False}, "no commands"),
    ]:
        with pytest.raises(ActionError, match=needle):
            read_reply("terminus_json", json.dumps(bad), True)
    with pytest.raises(ActionError, match="Invalid JSON"):
        read_reply("terminus_json", '{"analysis": ', True)


def test_tagged_result_format() -> None:
    result = {"kind": "run", "stdout": "out\n", "stderr": "err\n", "exit_code": 3, "cwd": "/app", "notes": []}
    shown = present_result(result, TerminalOptions(result_format="tagged", show_cwd=False))
    assert shown == "<returncode>3</returncode>\n<output>\nout\nerr\n</output>"


@needs_bwrap
@pytest.mark.parametrize("preset", list(TERMINAL_PRESETS))
def test_preset_ids_registered_and_check_env(preset: str) -> None:
    from gymnasium.utils.env_checker import check_env

    for task_id in TERMINAL_TASK_IDS:
        assert f"harness_gym/{task_id}-{preset}-v0" in gym.registry
    env = gym.make(f"harness_gym/TermSortUnique-{preset}-v0")
    check_env(env.unwrapped, skip_render_check=True)
    _, info = env.reset(seed=0)
    assert info["harness_id"] == TERMINAL_PRESETS[preset].id
    env.close()


@needs_bwrap
@pytest.mark.parametrize("preset", list(TERMINAL_PRESETS))
def test_legal_actions_round_trip_and_bad_replies_never_raise(preset: str) -> None:
    env = TerminalEnv(TERMINAL_TASKS[0], harness=preset)
    _, info = env.reset(seed=2)
    legal = env.legal_actions()
    assert {a.name for a in legal} >= {"run", "submit"}
    for action in legal:
        assert env.bound.parse(env.format_action(action)) == action, (preset, action)
    if preset != "OpenHandsStyle":
        assert info["tools"] == [] and "read_file" not in {a.name for a in legal}
    for bad in [
        "",
        "hello",
        "```bash\nls\n```\n```bash\nls\n```",
        '{"commands": 1}',
        "x" * 100_000,
        "\x00\x01",
    ]:
        _, reward, terminated, _, info = env.step(bad)
        assert reward == 0.0 and info["last_error"] and not terminated
    assert env.step(env.format_action(Action.of("run", command="echo hi")))[4]["command"]["exit_code"] == 0
    env.close()


@needs_bwrap
def test_persistent_shell_under_terminus_and_fresh_under_mini_swe_agent() -> None:
    for preset, carries in [("TerminusStyle", True), ("MiniSweAgentStyle", False)]:
        env = TerminalEnv(TERMINAL_TASKS[0], harness=preset)
        env.reset(seed=0)
        env.step(env.format_action(Action.of("run", command="mkdir -p d && cd d && X=7")))
        obs, *_ = env.step(env.format_action(Action.of("run", command="echo $X; pwd")))
        assert ("7" in obs and "/app/d" in obs) == carries, (preset, obs)
        env.close()


@needs_bwrap
def test_sentinel_submits_under_mini_swe_agent() -> None:
    env = TerminalEnv(TERMINAL_TASKS[0], harness="MiniSweAgentStyle")
    env.reset(seed=0)
    _, _, terminated, _, info = env.step(f"THOUGHT: done.\n\n```bash\n{SENTINEL}\n```")
    assert terminated and not info["success"]  # the untouched instance fails its verifier
    env.close()


def oracle_under_coding_presets(task, seeds) -> None:
    """The oracle succeeds on every seed under every coding preset, on paired instances."""
    digests: dict[int, set[str]] = {}
    for preset in CODING_PRESETS:
        env = TerminalEnv(task, harness=preset)
        for seed in seeds:
            info = play_oracle(env, seed)
            assert info["success"], (task.task_id, preset, seed, info.get("verdict"))
            digests.setdefault(seed, set()).add(info["state_digest"])
        env.close()
    # Paired: reset(seed) built the same instance under every preset (the digest is taken at reset).
    assert all(len(d) == 1 for d in digests.values()), task.task_id


@needs_bwrap
@pytest.mark.parametrize("k", range(len(TERMINAL_TASKS)), ids=lambda k: TERMINAL_TASKS[k].task_id)
def test_oracle_succeeds_under_every_coding_preset(k: int) -> None:
    """Fast version: one seed (the 20-seed sweep is slow-marked below)."""
    oracle_under_coding_presets(TERMINAL_TASKS[k], (k,))


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("task", TERMINAL_TASKS, ids=lambda t: t.task_id)
def test_oracle_succeeds_under_every_coding_preset_over_20_seeds(task) -> None:
    oracle_under_coding_presets(task, range(20))
