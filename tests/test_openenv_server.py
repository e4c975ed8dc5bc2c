"""``harness-gym serve`` as a real process, driven by openenv's own client (sync and async) and
by raw WebSocket frames: oracle episodes over the wire equal in-process ones, and bad input
gets the protocol's error codes and frees what it held.

Needs the ``openenv`` extra (skipped without it; it cannot share the project's venv, see
docs/integrations.md): ``make test-openenv`` (it makes ``.venv-openenv``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openenv")
pytest.importorskip("uvicorn")

from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from harness_gym.core.harness import Harness  # noqa: E402
from harness_gym.core.presets import PRESETS  # noqa: E402
from harness_gym.core.registry import make_env  # noqa: E402
from harness_gym.integrations.openenv_server import HarnessAction, HarnessGymClient  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WAIT = 60.0  # the longest a test waits for the server to do something (a loaded machine)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws = f"ws://127.0.0.1:{self.port}/ws"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "harness_gym.cli", "serve", "--port", str(self.port), *args]
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.proc.stderr.read()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if json.load(r)["status"] == "healthy":
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    tasks = ["ClickButton", "EnterText", *TERMINAL_TASKS, *BROWSER_TASKS]
    s = Server(*[a for t in tasks for a in ("--task", t)], "--max-sessions", "2", "--session-timeout", "0")
    yield s
    s.stop()


HARNESSES = {
    "preset_json": "Json",
    "preset_reversed": "JsonReversed",
    "few_shot": "JsonFewShot",
    "bundle_xml": "BundleXml",
    "spec_perturbed": {"obs_format": "yaml", "rename_tools": {"click": "tap"}, "field_order": "reversed"},
    "native": "JsonNative",
    "by_id": PRESETS["ToolsPython"].id,
}


#: Terminal tasks run in the bubblewrap sandbox, behind the server as in process.
TERMINAL_TASKS = ["TermSortUnique", "TermGitCommit"]
#: Real MiniWoB++ tasks in headless Chromium (Playwright), on the server as in process.
BROWSER_TASKS = ["BrowserEnterText", "BrowserLoginUser"]


def terminal_harnesses() -> dict[str, object]:
    """The terminal family's own presets over the wire: by name (refused by name before), by
    id, and as a spec object."""
    from harness_gym.envs.terminal.presets import TERMINAL_PRESETS

    return {
        "Json": "Json",
        "MiniSweAgentStyle": "MiniSweAgentStyle",
        "TerminusStyle": "TerminusStyle",
        "TerminusStyle_id": TERMINAL_PRESETS["TerminusStyle"].id,
        "OpenHandsStyle_spec": TERMINAL_PRESETS["OpenHandsStyle"].to_dict(full=False),
    }


def local_harness(spec: object) -> Harness:
    from harness_gym.core.presets import FAMILY_PRESETS, resolve_harness

    known = [*PRESETS.values(), *(p.harness for f in FAMILY_PRESETS.values() for p in f.values())]
    if isinstance(spec, str) and spec not in PRESETS:
        by_name = {n: p.harness for f in FAMILY_PRESETS.values() for n, p in f.items()}
        return by_name.get(spec) or next(h for h in known if h.id == spec)
    return resolve_harness(spec)


def untimed(info: dict) -> dict:
    """``info`` without wall times (a terminal command's, a browser launch's): the fields that may differ."""
    if isinstance(info.get("command"), dict):
        info = {**info, "command": {k: v for k, v in info["command"].items() if k != "seconds"}}
    return {k: v for k, v in info.items() if k != "browser_launch_s"}


def check_episode(results: list, task: str, harness: object, seed: int) -> None:
    """``results``: the wire's reset result then each step's, for the oracle's actions."""
    env = make_env(task, local_harness(harness))
    observation, info = env.reset(seed=seed)
    first = results[0].observation
    assert (first.text, first.state_digest, first.harness_id, first.seed) == (
        observation,
        info["state_digest"],
        info["harness_id"],
        seed,
    )
    assert first.info["system_prompt"] == info["system_prompt"] and first.info["tools"] == info["tools"]
    for result in results[1:]:
        observation, reward, terminated, truncated, info = env.step(env.oracle_action())
        got = result.observation
        assert (
            got.text == observation and result.reward == reward and result.done == (terminated or truncated)
        )
        assert untimed(got.info) == untimed(json.loads(json.dumps(info, default=list)))
        assert got.success == info["success"]
    assert results[-1].done and results[-1].observation.success


def play_sync(client: HarnessGymClient, task: str, harness: object, seed: int) -> list:
    env = make_env(task, local_harness(harness))  # the oracle, as the agent's side knows it
    env.reset(seed=seed)
    results = [client.reset(seed=seed, task=task, harness=harness)]
    while not results[-1].done:
        action = env.oracle_action()
        env.step(action)
        results.append(client.step(HarnessAction(text=action)))
    return results


@pytest.mark.parametrize("task", ["ClickButton", "EnterText"])
@pytest.mark.parametrize("name", list(HARNESSES))
def test_oracle_over_the_wire_equals_in_process_sync(server: Server, task: str, name: str) -> None:
    harness = HARNESSES[name]
    with HarnessGymClient(base_url=server.url).sync() as client:
        for seed in (0, 7):
            check_episode(play_sync(client, task, harness, seed), task, harness, seed)
        state = client.state()
        assert state.task_id == task and state.done and state.success and state.seed == 7


@pytest.mark.parametrize("task", TERMINAL_TASKS)
@pytest.mark.parametrize("name", list(terminal_harnesses()))
def test_terminal_oracle_over_the_wire_equals_in_process(server: Server, task: str, name: str) -> None:
    import shutil

    if shutil.which("bwrap") is None:
        pytest.skip("terminal tasks need bubblewrap")
    harness = terminal_harnesses()[name]
    with HarnessGymClient(base_url=server.url).sync() as client:
        check_episode(play_sync(client, task, harness, 2), task, harness, 2)


@pytest.mark.parametrize("task", BROWSER_TASKS)
@pytest.mark.parametrize("name", ["Json", "BundleXml", "by_id"])
def test_browser_oracle_over_the_wire_equals_in_process(server: Server, task: str, name: str) -> None:
    """The server's Chromium and this process's build the same MiniWoB instance and episode."""
    from harness_gym.envs.browser.env import make_browser_env
    from harness_gym.envs.browser.launch import check_requirements

    check_requirements()  # fails with the install command when Chromium or Playwright is missing
    harness = HARNESSES.get(name, name)
    # A browser of its own, closed at the end: Playwright's sync API runs an event loop in this
    # thread while a browser is open, and the async tests below need none running.
    local = make_browser_env(task, local_harness(harness))
    try:
        with HarnessGymClient(base_url=server.url).sync() as client:
            for seed in (0, 3):
                observation, info = local.reset(seed=seed)
                result = client.reset(seed=seed, task=task, harness=harness)
                got = result.observation
                assert (got.text, got.state_digest, got.harness_id) == (
                    observation,
                    info["state_digest"],
                    info["harness_id"],
                )
                assert got.info["system_prompt"] == info["system_prompt"]
                assert got.info["tools"] == info["tools"]
                while not result.done:
                    action = local.oracle_action()  # the agent's side: the oracle of its own copy
                    observation, reward, terminated, truncated, info = local.step(action)
                    result = client.step(HarnessAction(text=action))
                    got = result.observation
                    assert (got.text, got.state_digest, result.reward, result.done) == (
                        observation,
                        info["state_digest"],
                        reward,
                        terminated or truncated,
                    )
                    assert untimed(got.info) == untimed(json.loads(json.dumps(info, default=list)))
                    assert isinstance(got.info["browser_launch_s"], (float, type(None)))
                assert got.success and info["success"] and result.reward == 1.0
    finally:
        local.close()


def test_oracle_over_the_wire_equals_in_process_async(server: Server) -> None:
    harness = HARNESSES["spec_perturbed"]

    async def play(seed: int) -> list:
        env = make_env("EnterText", local_harness(harness))
        env.reset(seed=seed)
        async with HarnessGymClient(base_url=server.url) as client:
            results = [await client.reset(seed=seed, task="EnterText", harness=harness)]
            while not results[-1].done:
                action = env.oracle_action()
                env.step(action)
                results.append(await client.step(HarnessAction(text=action)))
        return results

    async def both() -> list:
        return await asyncio.gather(play(1), play(2))  # two sessions at once (the maximum)

    for seed, results in zip((1, 2), asyncio.run(both())):
        check_episode(results, "EnterText", harness, seed)


def test_http_routes(server: Server) -> None:
    def get(path: str) -> dict:
        with urllib.request.urlopen(server.url + path, timeout=10) as r:
            return json.load(r)

    assert get("/health")["status"] == "healthy"
    assert get("/metadata")["name"] == "harness_gym"
    schema = get("/schema")
    assert schema["action"]["properties"]["text"]["maxLength"] == 256 * 1024
    assert {"text", "harness_id", "state_digest", "success", "info"} <= set(
        schema["observation"]["properties"]
    )

    def post(path: str, body: dict) -> tuple[int, dict]:
        request = urllib.request.Request(
            server.url + path, json.dumps(body).encode(), {"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")

    status, reply = post("/reset", {"seed": 3, "task": "ClickButton", "harness": "ObsYaml"})
    observation, info = make_env("ClickButton", "ObsYaml").reset(seed=3)
    assert status == 200 and reply["observation"]["text"] == observation
    assert reply["observation"]["state_digest"] == info["state_digest"]
    status, reply = post("/step", {"action": {"txet": "click(1)"}})
    assert status == 422 and reply["detail"]


def send(ws, message: object) -> dict:  # noqa: ANN001
    try:
        ws.send(message if isinstance(message, str) else json.dumps(message))
    except ConnectionClosed:  # a refused session sends its error frame, then closes: read it
        pass
    return json.loads(ws.recv(timeout=WAIT))


def error_code(reply: dict) -> str | None:
    return reply["data"].get("code") if reply.get("type") == "error" else None


def test_bad_frames_get_protocol_codes_and_the_session_goes_on(server: Server) -> None:
    with connect(server.ws, max_size=None) as ws:
        assert error_code(send(ws, "{not json")) == "INVALID_JSON"
        assert error_code(send(ws, {"type": "teleport"})) == "UNKNOWN_TYPE"
        assert (
            error_code(send(ws, {"type": "step", "data": {"text": "x" * (1024 * 1024)}}))
            == "VALIDATION_ERROR"
        )
        assert error_code(send(ws, {"type": "step", "data": {"text": "click(1)"}})) == "EXECUTION_ERROR"
        assert error_code(send(ws, {"type": "reset", "data": {"task": "NoSuchTask"}})) == "EXECUTION_ERROR"
        assert (
            error_code(send(ws, {"type": "reset", "data": {"harness": "NoSuchPreset"}})) == "EXECUTION_ERROR"
        )
        assert (
            error_code(send(ws, {"type": "reset", "data": {"harness": "/etc/passwd.yaml"}}))
            == "EXECUTION_ERROR"
        )
        reply = send(ws, {"type": "reset", "data": {"seed": 4, "task": "ClickButton"}})
        assert reply["type"] == "observation"
        env = make_env("ClickButton", "Json")
        env.reset(seed=4)
        reply = send(ws, {"type": "step", "data": {"text": env.oracle_action()}})
        assert reply["data"]["done"] is True and reply["data"]["reward"] == 1.0
        after = send(ws, {"type": "step", "data": {"text": env.oracle_action()}})  # the episode ended
        assert error_code(after) == "EXECUTION_ERROR" and "reset" in after["data"]["message"]
        bad = send(ws, {"type": "step", "data": {"text": "\x00\x01{{{" * 1000}})
        assert error_code(bad) == "EXECUTION_ERROR"
        reply = send(ws, {"type": "reset", "data": {"seed": 5}})
        garbage = send(ws, {"type": "step", "data": {"text": "\x00\x01{{{" * 1000}})  # bad agent output
        assert garbage["type"] == "observation" and garbage["data"]["observation"]["info"]["error_kind"]


def open_session(server: Server):  # noqa: ANN201
    ws = connect(server.ws).__enter__()  # held open across calls; closed by the caller
    reply = send(ws, {"type": "reset", "data": {"seed": 0}})
    return ws, reply


def wait_for_free_slot(server: Server) -> object:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        ws, reply = open_session(server)
        if reply["type"] == "observation":
            return ws
        ws.close()
        time.sleep(0.2)
    raise AssertionError("no session slot was freed")


def test_more_sessions_than_allowed_and_a_client_that_vanishes(server: Server) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import json, sys, time\nfrom websockets.sync.client import connect\n"
         f"ws = connect({server.ws!r})\nws.send(json.dumps({{'type': 'reset', 'data': {{'seed': 1}}}}))\n"
         "print(json.loads(ws.recv())['type'], flush=True)\ntime.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "observation"  # holds slot 1 of 2, mid-episode
        second = wait_for_free_slot(server)  # slot 2
        third, reply = open_session(server)
        assert error_code(reply) == "CAPACITY_REACHED" and reply["data"]["max_sessions"] == 2
        third.close()
        holder.kill()  # vanishes without a close frame
        holder.wait()
        replacement = wait_for_free_slot(server)  # its slot came back
        replacement.close()
        second.close()
    finally:
        holder.kill()
        holder.wait()


def test_a_connected_idle_session_keeps_its_episode_past_the_timeout() -> None:
    """A client that thinks longer than --session-timeout between reset and step (a GRPO
    step on a CPU) keeps its episode while its WebSocket is open: the reaper (every 5 s at
    least) destroyed it before, and the step said "send reset first (the last one ended)".
    The slot is freed when the socket closes."""
    server = Server("--max-sessions", "1", "--session-timeout", "1")
    try:
        idle, reply = open_session(server)  # reset, seed 0; then silent past the timeout
        assert reply["type"] == "observation"
        time.sleep(12)  # two reaper rounds past a 1 s timeout
        env = make_env("ClickButton", "Json")
        env.reset(seed=0)
        step = send(idle, {"type": "step", "data": {"text": env.oracle_action()}})
        assert step["type"] == "observation", step
        assert step["data"]["reward"] == 1.0 and step["data"]["done"] is True
        _, refused = open_session(server)  # the connected session still holds the only slot
        assert error_code(refused) == "CAPACITY_REACHED"
        idle.close()
        wait_for_free_slot(server).close()  # closing the socket freed it
    finally:
        server.stop()


def test_serve_takes_a_family_preset_by_name() -> None:
    """``serve --harness MiniSweAgentStyle`` for a terminal task (refused before: the name was
    looked up among the generic presets only); a reset that names no harness gets it."""
    import shutil

    if shutil.which("bwrap") is None:
        pytest.skip("terminal tasks need bubblewrap")
    server = Server("--task", "TermSortUnique", "--harness", "MiniSweAgentStyle", "--session-timeout", "0")
    try:
        env = make_env("TermSortUnique", local_harness("MiniSweAgentStyle"))
        env.reset(seed=3)
        with HarnessGymClient(base_url=server.url).sync() as client:
            results = [client.reset(seed=3)]  # no harness named: the server's default
            while not results[-1].done:
                action = env.oracle_action()
                env.step(action)
                results.append(client.step(HarnessAction(text=action)))
        check_episode(results, "TermSortUnique", "MiniSweAgentStyle", 3)
    finally:
        server.stop()


BAD_SERVE = [
    (["--task", "NoSuchTask"], "NoSuchTask"),
    (["--harness", "NoSuchPreset"], "NoSuchPreset"),
    (["--port", "70000"], "--port"),
    (["--max-sessions", "0"], "--max-sessions"),
    (["--session-timeout", "-1"], "--session-timeout"),
]


@pytest.mark.parametrize("extra,message", BAD_SERVE, ids=[b[1] for b in BAD_SERVE])
def test_bad_serve_arguments_are_one_line(extra: list[str], message: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "harness_gym.cli", "serve", *extra],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and message in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_mcp_tools_are_the_harness_tools_as_written_and_a_call_is_a_step(server: Server) -> None:
    from openenv.core.mcp_client import MCPToolClient

    spec = {
        "rename_tools": {"type": "fill"},
        "rename_args": {"ref": "element"},
        "tool_order": ["select", "type", "click", "press"],
        "tool_descriptions": "none",
    }
    env = make_env("EnterText", spec)
    _, info = env.reset(seed=6)

    async def play() -> tuple[list, list, str]:
        async with MCPToolClient(base_url=server.url, mode="production") as client:
            first = await client.reset(seed=6, task="EnterText", harness=spec)
            assert first.observation.state_digest == info["state_digest"]
            tools = await client.list_tools(use_cache=False)
            results, done = [], False
            while not done:
                name, arguments = env.unwrapped.bound.toolbox.call(
                    env.unwrapped.bound.parse(env.oracle_action())
                )
                got = await client.call_tool(name, **arguments)
                results.append((got, env.step(env.oracle_action())))
                done = got["done"]
            try:
                await client.call_tool(name, **arguments)  # the episode ended
                after = ""
            except RuntimeError as err:
                after = str(err)
            return tools, results, after

    tools, results, after = asyncio.run(play())
    written = [t["function"] for t in info["tools"]]
    assert [(t.name, t.description, t.input_schema) for t in tools] == [
        (f["name"], f.get("description", ""), f["parameters"]) for f in written
    ]
    assert [t.name for t in tools] == ["select", "fill", "click", "press"]
    assert "element" in tools[1].input_schema["properties"]
    for got, (observation, reward, terminated, truncated, step_info) in results:
        assert got["text"] == observation and got["reward"] == reward
        assert got["done"] == (terminated or truncated) and got["success"] == step_info["success"]
    assert results[-1][0]["success"] and "reset" in after


def test_served_env_answers_what_the_local_env_answers(server: Server) -> None:
    """``ServedHarnessEnv`` (what TRL's rollout plays through) behind HarnessEnv's reset/step."""
    from harness_gym.integrations.openenv_server import ServedHarnessEnv

    harness = local_harness(HARNESSES["spec_perturbed"])
    served = ServedHarnessEnv(server.url, "EnterText", harness)
    local = make_env("EnterText", harness)
    try:
        for seed in (0, 5):
            observation, info = local.reset(seed=seed)
            assert served.reset(seed=seed) == (observation, json.loads(json.dumps(info, default=list)))
            assert (served.system_prompt, served.examples) == (local.system_prompt, local.examples)
            action, done = "not an action", False  # a reply that does not parse, then the oracle
            while not done:
                want = local.step(action)
                assert served.step(action) == (*want[:4], json.loads(json.dumps(want[4], default=list)))
                done = want[2] or want[3]
                action = local.oracle_action() if not done else ""
            assert want[1] == 1.0 and want[4]["success"]
    finally:
        served.close()
    with pytest.raises(ValueError, match="native tool channel"):
        ServedHarnessEnv(server.url, "EnterText", PRESETS["JsonNative"])


@pytest.mark.llm
def test_trl_grpo_step_with_rollouts_over_the_wire(server: Server, tmp_path: Path) -> None:
    """One GRPO step of the embedded model (TRL's ``rollout_func``) whose episodes are played by
    the served env over openenv's WebSocket client; each equals an in-process episode fed the same
    replies, and TRL's logged reward is the mean of the served episodes' returns."""
    pytest.importorskip("trl")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from harness_gym.integrations.openenv_server import ServedHarnessEnv
    from harness_gym.train.grpo_lm import load_tokenizer, model_path
    from harness_gym.train.lm_dataset import build_dataset, build_rows
    from harness_gym.train.lm_rewards import reward_functions
    from harness_gym.train.lm_rollout import (
        EnvPool,
        HarnessRollout,
        RolloutConfig,
        _messages,
        play_episodes,
        rollout_dict,
    )

    torch.set_num_threads(2)
    served: list[ServedHarnessEnv] = []

    def over_the_wire(task: str, harness: Harness) -> ServedHarnessEnv:
        served.append(ServedHarnessEnv(server.url, task, harness))
        return served[-1]

    class RecordingRollout(HarnessRollout):
        outcomes: list = []

        def run(self, prompts, generate):  # noqa: ANN001, ANN201
            outcomes = play_episodes(self.jobs(prompts), self.chat, generate, self.config, self.pool)
            self.outcomes.extend(outcomes)
            return rollout_dict(outcomes)

    harness = PRESETS["ToolsPython"].replace(step_budget=1)  # one reply per episode: a short step on CPU
    rows = build_rows("ClickButton", [harness], [0], "within", group_size=2)
    path = model_path("llm")
    tokenizer = load_tokenizer(path)
    config = RolloutConfig(max_reply_tokens=16, temperature=1.0)
    rollout = RecordingRollout(rows, tokenizer, config, pool=EnvPool(make=over_the_wire))
    funcs, weights = reward_functions()
    args = GRPOConfig(
        output_dir=str(tmp_path / "trainer"),
        per_device_train_batch_size=2,
        gradient_accumulation_steps=1,
        num_generations=2,
        max_steps=1,
        learning_rate=1e-5,
        beta=0.0,
        seed=0,
        max_completion_length=config.max_reply_tokens,
        reward_weights=weights,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,  # TRL defaults to recomputing activations: a slower step
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        model_init_kwargs={"dtype": torch.float32},
    )
    trainer = GRPOTrainer(
        model=str(path),
        reward_funcs=funcs,
        args=args,
        train_dataset=build_dataset(rows),
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    try:
        trainer.train()
    finally:
        rollout.pool.close()
    assert trainer.state.global_step == 1
    assert len(rollout.outcomes) == 2 and served  # both episodes went over the wire
    for outcome in rollout.outcomes:
        env = make_env("ClickButton", harness)
        observation, info = env.reset(seed=outcome.seed)
        # The prompt the model was trained on is the harness's chat, as rendered in process.
        assert outcome.tokens.prompt_ids == rollout.chat.prompt_ids(_messages(env, observation, []), None)
        total = 0.0
        for reply in outcome.replies:
            _, reward, terminated, truncated, info = env.step(reply)
            total += reward
            if terminated or truncated:
                break
        assert outcome.episode_return == pytest.approx(total)
        assert outcome.success == bool(info["success"]) and outcome.harness_id == harness.id
    # TRL's logged reward: the default mixture (return, 0.2 x valid-action share) of the served episodes.
    logged = next(log for log in trainer.state.log_history if "reward" in log)
    mixture = [o.episode_return + 0.2 * o.valid_action_rate for o in rollout.outcomes]
    assert weights == [1.0, 0.2]
    assert logged["reward"] == pytest.approx(sum(mixture) / len(mixture), abs=1e-6)
