"""Terminal tasks: oracles, verifiers, pairing, the terminal factors, registration, check_env."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import harness_gym  # noqa: F401 - registers the ids
from harness_gym.core.checker import check_harness
from harness_gym.core.presets import PRESETS
from harness_gym.core.task import Action
from harness_gym.envs.terminal import SENTINEL, TERMINAL_TASK_IDS
from harness_gym.envs.terminal.env import TerminalEnv
from harness_gym.envs.terminal.options import TerminalOptions, cut, present_result
from harness_gym.envs.terminal.sandbox_view import bwrap_problem
from harness_gym.envs.terminal.tasks import TERMINAL_TASKS

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}")
#: The issue's bar (slow-marked); the default suite runs FAST_SEEDS.
SEEDS = range(20)
FAST_SEEDS = range(3)


def play_oracle(env: TerminalEnv, seed: int) -> dict:
    env.reset(seed=seed)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(env.oracle_action())
        done = terminated or truncated
    return info


def oracle_and_untouched(task, seeds) -> None:
    env = TerminalEnv(task)
    for seed in seeds:
        env.reset(seed=seed)
        ok, _ = env.terminal_task.verify()
        assert not ok, f"{task.task_id} seed {seed}: the untouched instance passes"
        info = play_oracle(env, seed)
        assert info["success"], (task.task_id, seed, info.get("verdict"))
    env.close()


@pytest.mark.parametrize("task", TERMINAL_TASKS, ids=lambda t: t.task_id)
def test_oracle_solves_and_verifier_rejects_untouched(task) -> None:
    oracle_and_untouched(task, FAST_SEEDS)


@pytest.mark.slow
@pytest.mark.parametrize("task", TERMINAL_TASKS, ids=lambda t: t.task_id)
def test_oracle_solves_every_seed_and_verifier_rejects_untouched(task) -> None:
    oracle_and_untouched(task, SEEDS)


LEVELS = [
    {},
    {"shell": "persistent", "result_format": "json"},
    {"result_format": "xml", "keep": "tail", "show_cwd": False, "completion": "sentinel"},
]


def presets_for(task) -> list[str]:
    """The generic presets registered with a terminal task (web conventions bind to no shell)."""
    from harness_gym.core.presets import preset_applies

    return [p for p in PRESETS if preset_applies(p, task)]


@pytest.mark.parametrize("k", range(len(TERMINAL_TASKS)), ids=lambda k: TERMINAL_TASKS[k].task_id)
def test_oracle_under_generic_presets_and_terminal_levels(k: int) -> None:
    """Fast: task k takes presets k, k + 25, ... so that every preset meets some task."""
    task, names = TERMINAL_TASKS[k], presets_for(TERMINAL_TASKS[k])
    for i in range(k, len(names), len(TERMINAL_TASKS)):
        env = TerminalEnv(task, harness=names[i], terminal=LEVELS[i % len(LEVELS)])
        info = play_oracle(env, seed=i)
        assert info["success"], (task.task_id, names[i], info.get("verdict"))
        env.close()


@pytest.mark.slow
@pytest.mark.parametrize("task", TERMINAL_TASKS, ids=lambda t: t.task_id)
def test_oracle_under_every_generic_preset(task) -> None:
    for i, preset in enumerate(presets_for(task)):
        env = TerminalEnv(task, harness=preset, terminal=LEVELS[i % len(LEVELS)])
        for seed in (i, i + 100):
            info = play_oracle(env, seed=seed)
            assert info["success"], (task.task_id, preset, seed, info.get("verdict"))
        env.close()


@pytest.mark.slow
def test_check_env_on_every_terminal_id() -> None:
    from harness_gym.core.registry import FAMILY_ENV_IDS

    ids = [i for i in FAMILY_ENV_IDS if i.split("/")[1].startswith("Term")]
    ids += [f"harness_gym/{t}-v0" for t in TERMINAL_TASK_IDS]
    assert len(ids) >= len(TERMINAL_TASK_IDS) * 4
    for env_id in ids:
        env = gym.make(env_id)
        check_env(env.unwrapped, skip_render_check=True)
        env.close()


def test_check_env_on_terminal_tasks() -> None:
    """Fast: every other task, the coding presets taking turns (every id: slow, above)."""
    from harness_gym.envs.terminal import CODING_PRESETS

    for k, task_id in enumerate(TERMINAL_TASK_IDS[::2]):
        env = gym.make(f"harness_gym/{task_id}-{CODING_PRESETS[k % len(CODING_PRESETS)]}-v0")
        check_env(env.unwrapped, skip_render_check=True)
        env.close()


def test_paired_digests_across_harnesses_and_terminal_factors() -> None:
    for task in TERMINAL_TASKS[:5]:
        digests = set()
        for harness, terminal in [
            ("Json", {}),
            ("BundleXml", {"shell": "persistent"}),
            ("BundleMarkdown", {"keep": "head"}),
        ]:
            env = TerminalEnv(task, harness=harness, terminal=terminal)
            digests.add(env.reset(seed=3)[1]["state_digest"])
            env.close()
        assert len(digests) == 1, task.task_id


def test_presentation_factors() -> None:
    result = {"kind": "run", "stdout": "a" * 500 + "END", "stderr": "oops", "exit_code": 2, "cwd": "/app/x"}
    raw = present_result(result, TerminalOptions(max_output_chars=100, keep="tail"))
    assert raw.endswith("[cwd: /app/x]") and "END" in raw and "[exit code: 2]" in raw and "aaaa" in raw
    head = present_result(result, TerminalOptions(max_output_chars=100, keep="head", show_cwd=False))
    assert "END" not in head and "cwd" not in head
    as_json = present_result(result, TerminalOptions(result_format="json", show_exit_code=False))
    assert as_json["stderr"] == "oops" and "exit_code" not in as_json and as_json["cwd"] == "/app/x"
    xml = present_result(result, TerminalOptions(result_format="xml"))
    assert xml.startswith('<result exit_code="2" cwd="/app/x">')
    shown, omitted = cut("x" * 1000, 100, "both")
    assert omitted == 900 and len(shown) < 200
    with pytest.raises(ValueError):
        TerminalOptions(result_format="html")
    assert TerminalOptions().id != TerminalOptions(shell="persistent").id


def test_sentinel_completion_round_trips_and_hides_submit() -> None:
    env = TerminalEnv(TERMINAL_TASKS[0], harness="BundlePython", terminal={"completion": "sentinel"})
    _, info = env.reset(seed=0)
    assert "submit" not in [t["function"]["name"] for t in info["tools"]]
    assert SENTINEL in info["system_prompt"]
    text = env.format_action(Action.of("submit"))
    assert SENTINEL in text and env.bound.parse(text) == Action.of("submit")
    for action in env.legal_actions():
        assert env.bound.parse(env.format_action(action)) == action
    _, _, terminated, _, info = env.step(text)
    assert terminated and not info["success"] and info["terminal"]["completion"] == "sentinel"
    env.close()


def test_file_tools_and_persistent_shell_state() -> None:
    env = TerminalEnv(TERMINAL_TASKS[0], terminal={"shell": "persistent", "result_format": "json"})
    env.reset(seed=0)
    call = lambda name, **a: json.dumps({"name": name, "arguments": a})  # noqa: E731
    obs, *_ = env.step(call("write_file", path="sub/n.txt", content="hello\n"))
    obs, *_ = env.step(call("read_file", path="sub/n.txt"))
    assert "hello" in obs
    env.step(call("run", command="cd sub && export Y=9"))
    obs, _, _, _, info = env.step(call("run", command="cat n.txt; echo $Y"))
    assert json.loads(obs)["result"]["stdout"] == "hello\n9\n" and info["command"]["cwd"] == "/app/sub"
    env.close()
    dropped = TerminalEnv(TERMINAL_TASKS[0], harness={"drop_tools": ["read_file", "write_file"]})
    _, info = dropped.reset(seed=0)
    assert [t["function"]["name"] for t in info["tools"]] == ["run", "submit"]
    assert play_oracle(dropped, 0)["success"]
    dropped.close()


def test_registered_ids_and_check_env() -> None:
    for task_id in TERMINAL_TASK_IDS:
        assert f"harness_gym/{task_id}-v0" in gym.registry
        assert f"harness_gym/{task_id}-BundleXml-v0" in gym.registry
    for task_id in TERMINAL_TASK_IDS[:3]:
        env = gym.make(f"harness_gym/{task_id}-BundleMarkdown-v0")
        check_env(env.unwrapped, skip_render_check=True)
        env.close()
    env = gym.make("harness_gym/TermGitCommit-v0", harness="BundleYaml", terminal={"shell": "persistent"})
    _, info = env.reset(seed=1)
    assert info["terminal"]["shell"] == "persistent" and info["task_id"] == "TermGitCommit"
    env.close()


@pytest.mark.parametrize("preset", ["Json", "BundleXml", "BundleMarkdown"])
def test_check_harness_on_terminal_tasks(preset: str) -> None:
    for task in (TERMINAL_TASKS[0], TERMINAL_TASKS[11]):
        env = TerminalEnv(task, harness=preset)
        report = check_harness(env, seeds=range(2))
        assert report.ok, str(report)
        env.close()


def test_snapshot_restore_keeps_the_mounted_directory() -> None:
    env = TerminalEnv(TERMINAL_TASKS[11])  # TermGitCommit
    env.reset(seed=0)
    task = env.terminal_task
    snap = task.snapshot()
    task.step(task.oracle())
    task.restore(snap)
    assert task.sh("git status --porcelain").stdout.strip() != ""  # the sandbox sees the restored tree
    assert play_oracle(env, 0)["success"]
    env.close()


@pytest.mark.parametrize("preset", ["MiniSweAgentStyle", "TerminusStyle", "OpenHandsStyle"])
def test_check_harness_checks_coding_presets_through_the_terminal_env(preset: str) -> None:
    """check_harness builds the family's env, so fenced-block, Terminus-JSON and native replies are
    round-tripped and the oracle is played through the terminal presentation, not a plain env."""
    from harness_gym.core.registry import make_env
    from harness_gym.envs.terminal.presets import TERMINAL_PRESETS

    harness = TERMINAL_PRESETS[preset]
    env = make_env("TermSortUnique", harness)
    assert isinstance(env, TerminalEnv)
    env.close()
    report = check_harness(harness, "TermSortUnique", seeds=range(2), raise_on_failure=False)
    assert report.ok, str(report)
    assert report.checks["round_trip"] > 0 and report.checks["oracle"] == 2


def test_checking_commands_that_leave_no_report_say_why_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """A checking command that kills the verifier's shell (``kill -9 -1`` spares only itself and
    PID 1) leaves every case without a report: each reads ``(None, "")`` (a failed check, never a
    pass), and the log names the shell's own outcome, so a run that fails this way is diagnosable."""
    env = TerminalEnv(TERMINAL_TASKS[0])
    env.reset(seed=0)
    task = env.terminal_task
    with caplog.at_level("WARNING", logger="harness_gym.envs.terminal.task"):
        assert task.sh_many(["echo ok", "echo two"]) == [(0, "ok\n"), (0, "two\n")]
        assert not caplog.records
        got = task.sh_many(["echo ok", "kill -9 -1; sleep 1", "echo late"])
    env.close()
    assert got[1:] == [(None, ""), (None, "")]
    (record,) = caplog.records
    assert "left no report" in record.getMessage() and "the verifier shell: exit" in record.getMessage()
