"""Harbor's semantics on fixture folders (one per rule, tests/fixtures/harbor/): the oracle
uploads solution/ to /solution, ENV reaches the agent and the verifier, [verifier.env] and the
timeouts of task.toml, reward.json before reward.txt, multi-step tasks, the build-context rules;
and the Dockerfile parser and the reward reader on the bad inputs each rule names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness_gym.core.task import Action
from harness_gym.envs.terminal import dockerfile as df
from harness_gym.envs.terminal.env import TerminalEnv
from harness_gym.envs.terminal.harbor import find_task_folders, load_harbor_dir, load_harbor_task
from harness_gym.envs.terminal.harbor_task import HarborTask
from harness_gym.envs.terminal.harbor_verify import _parse_reward
from harness_gym.envs.terminal.sandbox_view import bwrap_problem

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "harbor"
NAMES = sorted(p.name for p in FIXTURES.iterdir() if (p / "task.toml").is_file())
needs_bwrap = pytest.mark.skipif(
    bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}"
)


def play_oracle(env: TerminalEnv) -> dict:
    env.reset(seed=0)
    info: dict = {}
    for _ in range(12):
        _, _, terminated, truncated, info = env.step(env.oracle_action())
        if terminated or truncated:
            break
    return info


def test_every_fixture_folder_loads() -> None:
    tasks, rejected = load_harbor_dir(FIXTURES)
    assert rejected == {} and len(tasks) == len(NAMES) >= 6


@needs_bwrap
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("preset", ["TerminusStyle", "MiniSweAgentStyle"])
def test_the_oracle_passes_and_the_untouched_instance_fails(name: str, preset: str) -> None:
    env = TerminalEnv(load_harbor_task(FIXTURES / name), harness=preset)
    try:
        env.reset(seed=0)
        ok, why = env.terminal_task.verify()
        assert not ok and why
        info = play_oracle(env)
        assert info["success"], (name, preset, info.get("verdict"))
    finally:
        env.close()


@needs_bwrap
def test_the_oracle_runs_bash_solution_solve_sh_whole_and_never_falls_back() -> None:
    task_cls = load_harbor_task(FIXTURES / "oracle-solution-dir")
    assert (FIXTURES / "oracle-solution-dir" / "solution" / "solve.sh").stat().st_size > 8192
    env = TerminalEnv(task_cls)
    try:
        env.reset(seed=0)
        oracle = env.terminal_task.oracle()
        assert oracle.name == "run" and "bash /solution/solve.sh" in oracle["command"]
        assert len(oracle["command"]) < 200  # short: no harness's max_action_chars replaces it
        assert env.oracle_action() == env.format_action(oracle)
        # before the oracle runs, /solution is empty: an agent cannot read the solution
        listing = env.step(env.format_action(Action.of("run", command="ls -A /solution | wc -l")))[0]
        assert env.terminal_task.last["stdout"].strip() == "0", listing
        # nor does typing Harbor's oracle command upload it
        env.step(env.format_action(Action.of("run", command="bash /solution/solve.sh")))
        assert env.terminal_task.last["exit_code"] != 0
        info = play_oracle(env)
        assert info["success"], info.get("verdict")
    finally:
        env.close()


@needs_bwrap
def test_env_lines_reach_the_agent_and_a_protected_variable_stays() -> None:
    env = TerminalEnv(load_harbor_task(FIXTURES / "env-lines"))
    try:
        env.reset(seed=0)
        env.step(env.format_action(Action.of("run", command='echo "$GREETING|$MODE|$HOME|$PATH"')))
        greeting, mode, home, path = env.terminal_task.last["stdout"].strip().split("|")
        assert (greeting, mode, home) == ("hello world", "fast and loose", "/home/agent")
        assert path.startswith("/app/bin:") and "/usr/bin" in path
    finally:
        env.close()


def test_task_toml_timeouts_verifier_env_and_network_are_read() -> None:
    task = load_harbor_task(FIXTURES / "verifier-env")
    assert issubclass(task, HarborTask)
    (step,) = task.steps
    assert (step.agent_timeout, step.verifier_timeout) == (300.0, 200.0)  # not cut at 120 s
    assert step.verifier_env == {"EXPECTED": "42", "TOLERANCE": "0"}  # ${VAR:-default}: the default
    assert task.limits.timeout == 300.0 and task.network == "none"
    multi = load_harbor_task(FIXTURES / "multi-step")
    assert [s.name for s in multi.steps] == ["write", "append"]
    assert multi.steps[1].verifier_timeout == 60.0 and multi.steps[0].min_reward == 1.0
    assert multi.steps[1].workdir_files == {"setup.sh": b"#!/bin/bash\necho two > /app/next.txt\n"}


@needs_bwrap
def test_a_verifier_over_its_task_toml_timeout_is_cut(tmp_path) -> None:
    folder = _folder(
        tmp_path, "sleep 30\necho 1 > /logs/verifier/reward.txt\n", "[verifier]\ntimeout_sec = 2\n"
    )
    env = TerminalEnv(load_harbor_task(folder))
    try:
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step(env.format_action(Action.of("submit")))
        assert terminated and reward == 0.0 and "timed out" in info["verdict"], info["verdict"]
    finally:
        env.close()


@needs_bwrap
def test_multi_step_episode_moves_to_the_next_step_and_a_failed_gate_ends_it() -> None:
    env = TerminalEnv(load_harbor_task(FIXTURES / "multi-step"))
    try:
        obs, _ = env.reset(seed=0)
        assert "`one`" in obs
        env.step(env.format_action(Action.of("run", command="echo one > /app/log.txt")))
        obs, reward, terminated, _, _ = env.step(env.format_action(Action.of("submit")))
        assert not terminated and reward == 0.0 and "next.txt" in obs
        assert env.terminal_task.read("next.txt") == "two\n"  # workdir/setup.sh ran
        _, reward, terminated, _, info = env.step(env.format_action(Action.of("submit")))
        assert terminated and reward == 0.0 and not info["success"]  # mean of 1 and 0
        env.reset(seed=0)  # step 1 fails its min_reward gate: the episode ends there
        _, reward, terminated, _, info = env.step(env.format_action(Action.of("submit")))
        assert terminated and reward == 0.0 and "min_reward" in info["verdict"], info["verdict"]
    finally:
        env.close()


@pytest.mark.parametrize(
    ("name", "text", "want"),
    [
        ("reward.txt", "1\n", {"reward": 1.0}),
        ("reward.txt", "  0.25  \n", {"reward": 0.25}),
        ("reward.txt", "1 extra", "holds no number"),
        ("reward.txt", "nan", "non-finite"),
        ("reward.txt", "", "is empty"),
        ("reward.json", '{"reward": 1, "style": 0.5}', {"reward": 1.0, "style": 0.5}),
        ("reward.json", "1", "must be an object"),
        ("reward.json", '[{"reward": 1}]', "must be an object"),
        ("reward.json", '{"reward": "1"}', "not a finite number"),
        ("reward.json", '{"reward": true}', "not a finite number"),
        ("reward.json", '{"reward": Infinity}', "not a finite number"),
        ("reward.json", "{", "not JSON"),
    ],
)
def test_rewards_are_read_as_harbor_reads_them(name: str, text: str, want) -> None:
    rewards, why = _parse_reward(name, text)
    if isinstance(want, dict):
        assert rewards == want and why == ""
    else:
        assert rewards is None and want in why


def _folder(
    tmp_path: Path, test_sh: str, toml: str = "", dockerfile: str = "FROM debian\nWORKDIR /app\n"
) -> Path:
    folder = tmp_path / "t"
    (folder / "tests").mkdir(parents=True)
    (folder / "environment").mkdir()
    (folder / "instruction.md").write_text("Do it.\n")
    (folder / "task.toml").write_text('version = "1.0"\n' + toml)
    (folder / "environment" / "Dockerfile").write_text(dockerfile)
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\nmkdir -p /logs/verifier\n" + test_sh)
    return folder


def test_path_words_are_not_commands(tmp_path) -> None:
    run = "RUN mkdir -p /app/payment-service /app/apt-get-cache && echo service > /app/pip.txt\n"
    task = load_harbor_task(_folder(tmp_path, "true\n", dockerfile="FROM debian\nWORKDIR /app\n" + run))
    assert any("payment-service" in c for c in task.plan.setup)


def test_find_task_folders_searches_nested_folders(tmp_path) -> None:
    for rel in ("a/t1", "a/b/t2", "t3"):
        (tmp_path / rel).mkdir(parents=True)
        (tmp_path / rel / "task.toml").write_text("")
    (tmp_path / "t3" / "inner").mkdir()
    (tmp_path / "t3" / "inner" / "task.toml").write_text("")  # inside a task: not a task
    assert [p.relative_to(tmp_path).as_posix() for p in find_task_folders(tmp_path)] == [
        "a/b/t2",
        "a/t1",
        "t3",
    ]


# -- the Dockerfile parser -------------------------------------------------------------------


def test_continuations_drop_comment_and_empty_lines_and_heredocs_are_read() -> None:
    text = (
        "# syntax=docker/dockerfile:1\nFROM python:3.12-slim AS base\n"
        "RUN apt-get update \\\n  # a comment\n\n  && apt-get install -y curl\n"
        "COPY <<EOF /app/a.txt\nline one\nEOF\n"
        "RUN <<-'END'\n\techo tabbed\n\tEND\n"
        'CMD ["sleep", "infinity"]\nENTRYPOINT bash -c x\n'
    )
    got = df.parse_dockerfile(text)
    assert [(i.kind, i.line) for i in got] == [
        ("FROM", 2),
        ("RUN", 3),
        ("COPY", 7),
        ("RUN", 10),
        ("CMD", 13),
        ("ENTRYPOINT", 14),
    ]
    assert got[1].args == "apt-get update   && apt-get install -y curl"
    assert got[2].heredocs == {"EOF": "line one\n"} and got[3].heredocs == {"END": "echo tabbed\n"}
    assert got[4].exec_form == ["sleep", "infinity"] and got[5].exec_form is None


def test_the_escape_directive_and_flags() -> None:
    got = df.parse_dockerfile("# escape=`\nFROM debian\nCOPY --chown=1:1 --chmod=755 a `\n  /app/\n")
    assert got[1].flags == {"chown": "1:1", "chmod": "755"} and got[1].words() == ["a", "/app/"]
    with pytest.raises(df.DockerfileError, match="escape"):
        df.parse_dockerfile("# escape=x\nFROM debian\n")


def test_env_forms_and_substitution() -> None:
    ins = df.parse_dockerfile("ENV A=1 B=\"$A two\" C=${MISSING:-dflt} D='$A' P=/x:$PATH\n")[0]
    assert df.parse_assignments(ins, {"PATH": "/bin"}) == {
        "A": "1",
        "B": "1 two",
        "C": "dflt",
        "D": "$A",
        "P": "/x:/bin",
    }
    legacy = df.parse_dockerfile("ENV DEBIAN_FRONTEND noninteractive\n")[0]
    assert df.parse_assignments(legacy, {}) == {"DEBIAN_FRONTEND": "noninteractive"}
    assert df.expand("${X:+yes}-${Y:+yes}-\\$X", {"X": "1"}) == "yes--$X"


def test_dockerignore_and_globs(tmp_path) -> None:
    for rel in ("a.csv", "b.csv", "c.txt", ".hidden.csv", "logs/x.log", "keep.log", "d/e/f.tmp"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / ".dockerignore").write_text("*.log\n!keep.log\nlogs\n**/*.tmp\nb.csv\n")
    patterns = df.read_dockerignore(tmp_path)
    assert df.context_sources(tmp_path, "*.csv", patterns) == [".hidden.csv", "a.csv"]
    assert df.ignored("logs/x.log", patterns) and not df.ignored("keep.log", patterns)
    assert df.ignored("d/e/f.tmp", patterns) and not df.ignored("c.txt", patterns)
    assert "keep.log" in df.context_files(tmp_path, ".", patterns)
    assert not any(f.startswith("logs") for f in df.context_files(tmp_path, ".", patterns))
    with pytest.raises(df.DockerfileError, match="outside the build context"):
        df.context_sources(tmp_path, "../x", patterns)


def test_shell_commands_take_command_positions_only() -> None:
    script = (
        "mkdir -p /app/payment-service && cd /app/payment-service # service start\n"
        "DEBIAN_FRONTEND=noninteractive sudo apt-get install -y x | tee log; if true; then pip list; fi"
    )
    assert [c[0] for c in df.shell_commands(script)] == ["mkdir", "cd", "apt-get", "tee", "true", "pip", "fi"]


# -- Gymnasium ids and sweeps over a folder --------------------------------------------------


@needs_bwrap
def test_gym_make_takes_a_task_folder() -> None:
    import gymnasium as gym

    import harness_gym  # noqa: F401 - registers harness_gym/Harbor-v0

    env = gym.make("harness_gym/Harbor-v0", task_dir=str(FIXTURES / "env-lines"), harness="TerminusStyle")
    try:
        _, info = env.reset(seed=0)
        assert info["task_id"] == "HarborEnvLines"
        for _ in range(3):
            _, reward, terminated, _, info = env.step(env.unwrapped.oracle_action())
            if terminated:
                break
        assert reward == 1.0 and info["success"]
    finally:
        env.close()


def test_a_folder_of_tasks_is_a_sweep_task_list_and_workers_find_its_ids(monkeypatch) -> None:
    import subprocess
    import sys

    from harness_gym.analysis.sweep.spec import SweepError, resolve_tasks
    from harness_gym.core.registry import FAMILY_TASKS
    from harness_gym.envs.terminal.harbor import HARBOR_DIRS_VARIABLE

    monkeypatch.delenv(HARBOR_DIRS_VARIABLE, raising=False)
    ids = resolve_tasks([str(FIXTURES)])
    assert sorted(ids) == sorted(f"Harbor{''.join(p.title() for p in n.split('-'))}" for n in NAMES)
    assert all(i in FAMILY_TASKS for i in ids)
    code = (
        "import gymnasium as gym, harness_gym\n"
        "from harness_gym.core.registry import get_task\n"
        "print(get_task('HarborEnvLines').folder.name,\n"
        "      'harness_gym/HarborEnvLines-TerminusStyle-v0' in gym.registry)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=120
    )
    assert done.stdout.split() == ["env-lines", "True"], done.stderr[-2000:]
    with pytest.raises(SweepError, match="no Harbor task folder there loads"):
        resolve_tasks([str(FIXTURES / "env-lines" / "environment")])


def test_the_build_recipe_applies_the_context_rules() -> None:
    from harness_gym.envs.terminal.harbor import rootfs_recipe

    image, steps, context = rootfs_recipe(FIXTURES / "context-rules")
    assert image == "ubuntu:24.04" and context == FIXTURES / "context-rules" / "environment"
    copies = [s.args for s in steps if s.kind == "COPY"]
    copied = {a for args in copies for a in args[:-1]}
    assert {"data/a.csv", "data/b.csv", "keep.log"} <= copied  # the glob, the ! exception
    assert not any(a.endswith(("debug.log", "token.txt", "scratch.tmp")) for a in copied)  # .dockerignore
    runs = [s.args[0] for s in steps if s.kind == "RUN"]
    assert any("tar -xf" in r and "extra.tar.gz" in r for r in runs)  # ADD of a local archive unpacks
    assert any("cat > /app/README.txt" in r and "Count the rows." in r for r in runs)  # COPY <<EOF
    assert any(r.startswith("set -e\nrm -rf /app/data/extra") for r in runs)  # RUN <<EOF: its body
    assert all(s.line > 0 for s in steps)
    _, steps, _ = rootfs_recipe(Path(__file__).parent / "fixtures" / "harbor-build" / "apt-pip-jq")
    assert steps[-1].args[0].endswith("ln -sfn /app /workspace")  # WORKDIR /workspace is /app
