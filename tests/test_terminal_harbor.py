"""Harbor / Terminal-Bench 2 task folders: the fixtures run; unsupported environments are
rejected with their reason; the agent never sees the tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import harness_gym  # noqa: F401 - registers the ids
from harness_gym.core.task import Action
from harness_gym.envs.terminal.env import TerminalEnv
from harness_gym.envs.terminal.harbor import load_harbor_dir, load_harbor_task, register_harbor
from harness_gym.envs.terminal.harbor_format import UnsupportedHarborTask
from harness_gym.envs.terminal.sandbox_view import bwrap_problem

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}")
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "harbor"
FIXTURES = [
    "HarborCsvAverage",
    "HarborFixSlugify",
    "HarborGitReleaseTag",
    "HarborHelloFile",
    "HarborSlowEndpoints",
]


def play_oracle(env: TerminalEnv, seed: int = 0) -> dict:
    env.reset(seed=seed)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(env.oracle_action())
        done = terminated or truncated
    return info


def test_fixture_folder_loads_five_tasks_and_rejects_postgres_with_its_reason() -> None:
    tasks, rejected = load_harbor_dir(EXAMPLES)
    assert [t.task_id for t in tasks] == FIXTURES
    assert list(rejected) == ["unsupported-postgres"]
    assert "CMD service starts a program" in rejected["unsupported-postgres"]


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_oracle_passes_and_untouched_instance_fails(name: str) -> None:
    tasks, _ = load_harbor_dir(EXAMPLES)
    task = next(t for t in tasks if t.task_id == name)
    for preset in ("Json", "TerminusStyle"):
        env = TerminalEnv(task, harness=preset)
        env.reset(seed=0)
        ok, why = env.terminal_task.verify()
        assert not ok and why
        info = play_oracle(env, seed=5)
        assert info["success"], (name, preset, info.get("verdict"))
        env.close()


def test_tests_are_hidden_and_a_forged_reward_does_not_count() -> None:
    env = TerminalEnv(load_harbor_task(EXAMPLES / "hello-file"))
    env.reset(seed=0)
    step = lambda cmd: env.step(env.format_action(Action.of("run", command=cmd)))[4]["command"]  # noqa: E731
    assert step("ls /tests")["exit_code"] != 0
    # The agent's /logs is its own (Harbor's containers have one): the verifier gets a fresh one.
    assert step("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt")["exit_code"] == 0
    step("mkdir -p /app/logs/verifier && echo 1 > /app/logs/verifier/reward.txt")
    _, reward, terminated, _, info = env.step(env.format_action(Action.of("submit")))
    assert terminated and reward == 0.0 and not info["success"]
    env.close()


def test_register_harbor_ids_and_check_env() -> None:
    from gymnasium.utils.env_checker import check_env

    ids = register_harbor(EXAMPLES)
    assert (
        "harness_gym/HarborHelloFile-v0" in ids and "harness_gym/HarborHelloFile-MiniSweAgentStyle-v0" in ids
    )
    env = gym.make("harness_gym/HarborHelloFile-OpenHandsStyle-v0")
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def _task(
    tmp_path: Path,
    dockerfile: str | None = "FROM debian\nWORKDIR /app\n",
    toml: str = 'version = "1.0"\n',
    **extra: str,
) -> Path:
    folder = tmp_path / "t"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "tests").mkdir(parents=True)
    (folder / "environment").mkdir()
    (folder / "instruction.md").write_text("Do it.\n")
    (folder / "task.toml").write_text(toml)
    (folder / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    if dockerfile is not None:
        (folder / "environment" / "Dockerfile").write_text(dockerfile)
    for rel, text in extra.items():
        path = folder / rel.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


@pytest.mark.parametrize(
    ("dockerfile", "toml", "extra", "reason", "kind"),
    [
        (
            'FROM debian\nENTRYPOINT ["python3", "server.py"]\n',
            None,
            {},
            "ENTRYPOINT python3 starts",
            "service",
        ),
        ('FROM debian\nCMD ["python3", "-m", "http.server"]\n', None, {}, "CMD python3 starts", "service"),
        (
            "FROM debian\nHEALTHCHECK CMD curl -f localhost\n",
            None,
            {},
            "HEALTHCHECK is for a service",
            "service",
        ),
        (
            "FROM debian\nRUN curl -fsSL https://example.com/x.sh | sh\n",
            None,
            {},
            "outside the package",
            "unbuildable",
        ),
        (
            "FROM mcr.microsoft.com/dotnet/sdk:8.0\nWORKDIR /app\n",
            None,
            {},
            "maps to no Debian base",
            "registry-image",
        ),
        ("FROM debian\nRUN true\nWORKDIR /tmp/work\nRUN apt-get -v\n", None, {}, "makes afresh", "workdir"),
        ("FROM debian\nCOPY ../secret /app/\n", None, {}, "outside the build context", "dockerfile"),
        ("FROM debian\nCOPY *.nothing /app/\n", None, {}, "no such file in the build context", "dockerfile"),
        ("FROM debian\nADD https://example.com/x.tgz /app/\n", None, {}, "needs the network", "network"),
        (
            "FROM gcc AS b\nRUN true\nFROM debian\nCOPY --from=b /x /app/\n",
            None,
            {},
            "multi-stage",
            "multi-stage",
        ),
        ("FROM debian\nFROBNICATE\n", None, {}, "unknown Dockerfile instruction FROBNICATE", "dockerfile"),
        ("FROM debian\nRUN <<EOF\necho never closed\n", None, {}, "never closed", "dockerfile"),
        (None, None, {"environment__docker-compose.yaml": "services: {}\n"}, "defines services", "service"),
        (
            None,
            '[environment]\ndocker_image = "ghcr.io/x/y:1"\n',
            {},
            "prebuilt docker_image",
            "registry-image",
        ),
        (None, "[environment]\ngpus = 1\n", {}, "GPU", "gpu"),
        (None, '[environment]\nos = "windows"\n', {}, "targets windows", "windows"),
        (None, "[environment.healthcheck]\ncommand = 'true'\n", {}, "healthcheck", "service"),
        (
            None,
            '[verifier.env]\nKEY = "${ANTHROPIC_API_KEY}"\n',
            {},
            "host variable ${ANTHROPIC_API_KEY}",
            "host-variable",
        ),
        (None, "version = \n", {}, "not valid TOML", "bad-toml"),
    ],
)
def test_unsupported_environments_are_rejected_with_a_reason(
    tmp_path, dockerfile, toml, extra, reason, kind
) -> None:
    folder = _task(tmp_path, dockerfile, toml or 'version = "1.0"\n', **extra)
    with pytest.raises(UnsupportedHarborTask) as err:
        load_harbor_task(folder)
    assert reason in str(err.value) and err.value.kind == kind, (str(err.value), err.value.kind)


@pytest.mark.parametrize(
    ("dockerfile", "extra", "reason"),
    [
        ("FROM python:3.12\nRUN pip install numpy\n", {}, "runs 'pip', which installs packages"),
        ("FROM python:3.12\nRUN python3 -m pip install x\n", {}, "runs 'pip'"),
        ("FROM debian\nRUN curl -O https://deb.debian.org/x\n", {}, "runs 'curl', which fetches"),
        ("FROM debian\nRUN service postgresql start\n", {}, "starts a service"),
        ("FROM debian\nRUN frobnicate --all\n", {}, "'frobnicate', which the host's base"),
        ("FROM debian\nWORKDIR /src\n", {}, "works in /app"),
        ("FROM debian\nCOPY a.txt /etc/a.txt\n", {"environment__a.txt": "x"}, "outside /app"),
    ],
)
def test_what_the_host_tools_lack_needs_a_built_root_file_system(tmp_path, dockerfile, extra, reason) -> None:
    task = load_harbor_task(_task(tmp_path, dockerfile, **extra))
    assert task.build_steps and reason in task.plan.needs_build[0], task.plan.needs_build
    assert all(step.line > 0 for step in task.build_steps if "harness-gym" not in step.text)


def test_missing_files_are_named(tmp_path) -> None:
    folder = _task(tmp_path)
    (folder / "tests" / "test.sh").unlink()
    with pytest.raises(UnsupportedHarborTask, match="missing tests/test.sh"):
        load_harbor_task(folder)
    with pytest.raises(UnsupportedHarborTask, match="is not a folder"):
        load_harbor_task(tmp_path / "nope")


def test_a_test_script_that_writes_no_reward_fails_with_its_reason(tmp_path) -> None:
    folder = _task(
        tmp_path,
        "FROM debian\nWORKDIR /app\nCOPY a.txt ./\nRUN echo hi > b.txt\n",
        **{"environment__a.txt": "A\n"},
    )
    (folder / "tests" / "test.sh").write_text("exit 0\n")
    env = TerminalEnv(load_harbor_task(folder))
    env.reset(seed=0)
    assert (
        env.terminal_task.read("a.txt") == "A\n" and env.terminal_task.read("b.txt") == "hi\n"
    )  # COPY and RUN
    _, _, terminated, _, info = env.step(env.format_action(Action.of("submit")))
    assert terminated and not info["success"] and "wrote no /logs/verifier/reward.txt" in info["verdict"]
    env.close()
