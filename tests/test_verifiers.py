"""The verifiers taskset (harness_gym.integrations.verifiers_env) against verifiers 0.4 itself.

verifiers pins mcp==2.0.0 and openai<3, so it lives in its own venv (``make test-verifiers``,
``.venv-verifiers``); elsewhere this module skips. The fast tests check that each task's prompt
and system prompt are what the harness renders; the ``llm`` test runs verifiers' own eval
runner (``vf-eval``, its subprocess runtime and tool-less chat harness) against the project's
vLLM server on CPU and checks every trace against in-process episodes fed the same replies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

vf = pytest.importorskip("verifiers.v1", reason="verifiers is not installed here: make test-verifiers")

from harness_gym.core.registry import make_env  # noqa: E402
from harness_gym.integrations.verifiers_env import (  # noqa: E402
    REWARD,
    TASKSET_ID,
    HarnessGymChat,
    HarnessGymEnv,
    HarnessGymTaskset,
    load_environment,
)
from harness_gym.llm.chat import chat_messages  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["ClickButton", "EnterText"]
PERTURBED = {"obs_format": "yaml", "rename_tools": {"type": "fill"}}
HARNESSES: list = ["Json", "ToolsPython", "JsonFewShot", PERTURBED]


def _as_dicts(messages) -> list[dict]:
    return [m if isinstance(m, dict) else m.model_dump(exclude_none=True) for m in messages]


def test_verifiers_loads_the_module_by_its_taskset_id() -> None:
    from verifiers.v1.configs.env import default_agent_harness
    from verifiers.v1.utils.loaders import environment_class, harness_class, taskset_class

    assert taskset_class(TASKSET_ID) is HarnessGymTaskset
    assert environment_class(TASKSET_ID) is HarnessGymEnv
    # The default agent harness is the tool-less chat loop, not verifiers' bash harness.
    assert default_agent_harness(TASKSET_ID).id == TASKSET_ID
    assert harness_class(TASKSET_ID) is HarnessGymChat


@pytest.mark.parametrize("harness", HARNESSES, ids=lambda h: h if isinstance(h, str) else "perturbed")
def test_task_prompt_is_the_harness_rendering(harness) -> None:
    env = load_environment(tasks=TASKS, harnesses=[harness], seeds=[3, 4])
    tasks = list(env.taskset)
    assert [(t.data.task_id, t.data.seed) for t in tasks] == [(t, s) for t in TASKS for s in (3, 4)]
    for task in tasks:
        own = make_env(task.data.task_id, harness)
        observation, info = own.reset(seed=task.data.seed)
        chat = chat_messages(own.harness, info["system_prompt"], observation, (), info["examples"])
        assert task.data.system_prompt == info["system_prompt"]  # tool schema text included
        assert _as_dicts(task.data.prompt) == chat[1:]  # worked examples, then the observation
        assert task.data.prompt[-1].content == observation  # not re-wrapped in JSON
        assert task.data.harness_id == info["harness_id"] and task.data.state_digest == info["state_digest"]
        assert task.data.tools == json.loads(json.dumps(info["tools"]))
        assert task.key == f"{info['task_id']}/{info['harness_id']}/{task.data.seed}"


def test_native_channel_harness_is_refused_with_the_reason() -> None:
    env = load_environment(tasks=["ClickButton"], harnesses=["JsonNative"])
    with pytest.raises(ValueError, match="native tool channel.*text channel"):
        list(env.taskset)


@pytest.mark.parametrize("field", ["tasks", "harnesses", "seeds"])
def test_empty_lists_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match="needs at least one entry"):
        load_environment(**{field: []})


def test_unknown_task_and_preset_name_themselves() -> None:
    with pytest.raises(KeyError, match="NoSuchTask"):
        list(load_environment(tasks=["NoSuchTask"]).taskset)
    with pytest.raises(ValueError, match="NoSuchPreset"):
        list(load_environment(harnesses=["NoSuchPreset"]).taskset)


def _replay(task_id: str, harness, seed: int, replies: list[str]) -> tuple[list[str], float, dict]:
    """The observations and return of an in-process episode fed ``replies``."""
    env = make_env(task_id, harness)
    observation, info = env.reset(seed=seed)
    observations, total = [observation], 0.0
    for reply in replies:
        observation, reward, terminated, truncated, info = env.step(reply)
        total += float(reward)
        if terminated or truncated:
            break
        observations.append(observation)
    return observations, total, info


def _messages(trace: dict) -> list[dict]:
    """The conversation a trace records, in order (its message nodes)."""
    return [node["message"] for node in trace["nodes"]]


def vf_eval_command(model: str, base_url: str, out: Path, harnesses: list, seeds: list[int]) -> list[str]:
    """``vf-eval`` (verifiers' own eval runner) on the taskset, against an OpenAI-compatible server."""
    return [
        str(Path(sys.executable).parent / "vf-eval"),
        TASKSET_ID,
        "--env.taskset.tasks",
        json.dumps(TASKS),
        "--env.taskset.harnesses",
        json.dumps(harnesses),
        "--env.taskset.seeds",
        json.dumps(seeds),
        "--env.player.runtime.type",
        "subprocess",
        "--env.player.max-turns",
        "3",
        "--model",
        model,
        "--client.base-url",
        base_url,
        "--client.api-key-var",
        "VLLM_API_KEY",
        "--sampling.temperature",
        "0",
        "--sampling.max-tokens",
        "32",
        "--max-concurrent",
        "2",
        "--no-push",
        "--no-rich",
        "--output-dir",
        str(out),
        "--run.dir",
        "run",
    ]


def check_traces(traces: Path, harnesses: list, seeds: list[int]) -> int:
    """Every episode of ``traces.jsonl`` against an in-process one fed the replies it recorded."""
    episodes = [json.loads(line) for line in traces.read_text().splitlines()]
    assert len(episodes) == len(TASKS) * len(harnesses) * len(seeds)
    seen = set()
    for episode in episodes:
        assert not episode.get("errors"), episode.get("errors")
        (trace,) = episode["traces"]
        data = episode["task"]["data"]
        ids = [make_env(data["task_id"], h).harness.id for h in harnesses]
        harness = harnesses[ids.index(data["harness_id"])]
        seen.add((data["task_id"], data["harness_id"], data["seed"]))
        messages = _messages(trace)
        own = make_env(data["task_id"], harness)
        observation, info = own.reset(seed=data["seed"])
        chat = chat_messages(own.harness, info["system_prompt"], observation, (), info["examples"])
        # What the model was sent: the harness's system prompt, worked examples, observation.
        assert messages[: len(chat)] == chat
        assert info["state_digest"] == data["state_digest"]
        examples = len(info["examples"])
        replies = [m["content"] or "" for m in messages if m["role"] == "assistant"][examples:]
        users = [m["content"] for m in messages if m["role"] == "user"][examples:]
        assert replies and replies == trace["info"]["harness_gym"]["replies"]
        observations, total, last = _replay(data["task_id"], harness, data["seed"], replies)
        assert users == observations[: len(users)]  # each observation exactly as rendered in process
        assert trace["rewards"][REWARD]["score"] == pytest.approx(total)
        assert trace["metrics"]["success"] == float(bool(last.get("success")))
        assert trace["metrics"]["invalid_actions"] == float(last.get("invalid_actions", 0))
        assert trace["metrics"]["steps"] == len(replies)
    assert len(seen) == len(episodes)
    return len(episodes)


@pytest.mark.llm
def test_vf_eval_runs_episodes_through_the_harness(vllm_server, tmp_path: Path) -> None:
    """verifiers' eval runner plays every episode; each equals an in-process one fed its replies."""
    harnesses, seeds = ["ToolsPython", "JsonFewShot"], [0]
    out = tmp_path / "outputs"
    env = dict(os.environ)
    # verifiers' chat harness runs as a uv script; uv comes with the verifiers venv.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(tmp_path / "home")  # verifiers' caches (~/.cache/verifiers) stay in the test
    env["VLLM_API_KEY"] = "EMPTY"
    command = vf_eval_command(vllm_server.model, vllm_server.base_url, out, harnesses, seeds)
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert check_traces(out / "run" / "traces.jsonl", harnesses, seeds) == len(TASKS) * len(harnesses)
