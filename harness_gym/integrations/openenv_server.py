"""An OpenEnv-compatible environment server for every harness env (extra ``openenv``).

The protocol is openenv's own: :func:`openenv.core.env_server.http_server.create_fastapi_app`
serves a :class:`HarnessGymEnvironment` over HTTP (``/reset``, ``/step``, ``/state``,
``/schema``, ``/health``, ``/metadata``) and WebSocket (``/ws``: one env per session, at most
``max_sessions`` at once; a session lives as long as its WebSocket, whose peer the server
pings, and a session with no connected WebSocket (an HTTP MCP one) idle for
``session_timeout`` seconds is destroyed), and
answers bad input with its error codes (``INVALID_JSON``, ``UNKNOWN_TYPE``,
``VALIDATION_ERROR``, ``EXECUTION_ERROR``, ``CAPACITY_REACHED``).

Each ``reset`` may choose the task (``task``: a task id such as ``ClickButton``), the harness
(``harness``: a preset name, a spec object, or the id of a preset or of a harness this
session used before) and the ``seed``. An action is the agent's output text
(:class:`HarnessAction`), exactly what ``HarnessEnv.step`` takes; an observation
(:class:`HarnessObservation`) is the text the harness rendered plus the harness id, the
task-state digest, success and the env's ``info`` (on reset also the system prompt, tools and
worked examples). :class:`HarnessGymClient` is an ``openenv`` ``EnvClient`` for it, and
:class:`ServedHarnessEnv` puts one of its sessions behind ``HarnessEnv``'s ``reset`` / ``step``
(so TRL's rollout, :class:`harness_gym.train.lm_rollout.HarnessRollout`, plays over the wire).

    harness-gym serve --task ClickButton --harness Json --port 8000
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, ConcurrencyConfig, EnvironmentMetadata, Observation, State
from pydantic import Field

from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import Harness

#: The longest action text a step accepts (longer: the protocol's ``VALIDATION_ERROR``).
MAX_ACTION_CHARS = 256 * 1024
#: The largest WebSocket message the server reads (a bigger one closes the connection).
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
ENV_NAME = "harness_gym"


class HarnessAction(Action):
    """The agent's output text, as the harness parses it (tool call syntax and all)."""

    text: str = Field(..., max_length=MAX_ACTION_CHARS, description="the agent's reply, sent to env.step")


class HarnessObservation(Observation):
    """What the harness rendered, and the record that proves which episode it belongs to."""

    text: str = Field(default="", description="the observation as the harness renders it")
    task_id: str = ""
    harness_id: str = ""
    seed: int | None = None
    state_digest: str = ""
    success: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict, description="the env's info for this step")


class HarnessState(State):
    """The session's episode: task, harness, seed, digest, and whether it is over."""

    task_id: str = ""
    harness_id: str = ""
    harness: dict[str, Any] = Field(default_factory=dict)
    seed: int | None = None
    state_digest: str = ""
    success: bool = False
    done: bool = False


class EpisodeOverError(RuntimeError):
    """A step with no episode running (before the first reset, or after the episode ended)."""


class HarnessGymEnvironment(Environment[HarnessAction, HarnessObservation, HarnessState]):
    """One session's env: built at ``reset`` for the task and harness asked for.

    Args:
        task: the task id used when a reset names none.
        harness: the harness (preset name or spec) used when a reset names none.
        tasks: the task ids a reset may choose (None: any registered task).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self,
        task: str = "ClickButton",
        harness: str | Mapping[str, Any] = "Json",
        tasks: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.default_task = task
        self.default_harness = harness
        self.tasks = tasks
        self.env: HarnessEnv | None = None
        self._task = ""
        self._known: dict[str, Harness] = {}
        self._state = HarnessState()
        self._done = True
        self._mcp: tuple[str, Any] | None = None

    def _harness(self, spec: Any, task: str) -> Harness:
        """The harness ``spec`` names for ``task``: a preset (the task family's own presets,
        such as the terminal's ``MiniSweAgentStyle``, included), a spec object or an id."""
        from harness_gym.core.presets import FAMILY_PRESETS, PRESETS, resolve_harness
        from harness_gym.core.registry import family_of

        family = family_of(task) if task else None
        if isinstance(spec, str) and not spec.endswith((".yaml", ".yml")):
            if spec in self._known:
                return self._known[spec]
            own = FAMILY_PRESETS.get(family or "", {})
            by_id = {h.id: h for h in PRESETS.values()} | {p.harness.id: p.harness for p in own.values()}
            if spec in by_id:
                return by_id[spec]
        if isinstance(spec, str) and spec.endswith((".yaml", ".yml")):
            raise ValueError("a harness over the wire is a preset name, a spec object or an id, not a path")
        if not isinstance(spec, (str, Mapping)):
            raise ValueError(
                f"harness must be a preset name, a spec object or an id, got {type(spec).__name__}"
            )
        return resolve_harness(spec, family=family)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task: str | None = None,
        harness: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> HarnessObservation:
        if kwargs:
            raise ValueError(
                f"unknown reset options {sorted(kwargs)}; known: seed, episode_id, task, harness"
            )
        task = task or self.default_task
        if self.tasks is not None and task not in self.tasks:
            raise ValueError(f"task {task!r} is not served here; served: {', '.join(self.tasks)}")
        chosen = self._harness(harness if harness is not None else self.default_harness, task)
        env = self._env_for(task, chosen)
        observation, info = env.reset(seed=seed)
        self._done = False
        self._state = HarnessState(
            episode_id=episode_id,
            step_count=0,
            task_id=info["task_id"],
            harness_id=info["harness_id"],
            harness=info["harness"],
            seed=info["seed"],
            state_digest=info["state_digest"],
        )
        return self._observation(observation, 0.0, False, False, info)

    def _env_for(self, task: str, harness: Harness) -> HarnessEnv:
        """The session's env for ``task`` under ``harness`` (rebuilt only when either changes)."""
        from harness_gym.core.registry import make_env

        if self.env is None or self._task != task or self.env.base_harness.id != harness.id:
            if self.env is not None:
                self.env.close()
            self.env, self._task = None, task
            self.env = make_env(task, harness)
        self._known[harness.id] = harness
        return self.env

    def step(
        self, action: HarnessAction, timeout_s: float | None = None, **kwargs: Any
    ) -> HarnessObservation:
        if self.env is None or self._done:
            raise EpisodeOverError("no episode is running: send reset first (the last one ended)")
        observation, reward, terminated, truncated, info = self.env.step(action.text)
        self._done = terminated or truncated
        self._state.step_count = info["step"]
        self._state.success = bool(info["success"])
        self._state.done = self._done
        return self._observation(observation, float(reward), terminated, truncated, info)

    def _observation(
        self, text: str, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]
    ) -> HarnessObservation:
        return HarnessObservation(
            text=text,
            reward=reward,
            done=terminated or truncated,
            truncated=truncated,
            task_id=info["task_id"],
            harness_id=info["harness_id"],
            seed=info["seed"],
            state_digest=info["state_digest"],
            success=bool(info["success"]),
            info=json.loads(json.dumps(info, default=list)),
        )

    @property
    def mcp_server(self) -> Any:
        """A FastMCP server whose tools are the harness's tools, exactly as the harness writes
        them (names, descriptions, argument names and order); ``tools/call`` is one env step.

        openenv's ``/mcp`` routes (HTTP and the WebSocket's ``mcp`` message) list and call them.
        Before the first reset the tools are those of the default task and harness.
        """
        from fastmcp import FastMCP
        from fastmcp.tools import FunctionTool

        default = self._harness(self.default_harness, self.default_task)
        env = self.env or self._env_for(self.default_task, default)
        key = f"{self._task}:{env.harness.id}"
        if self._mcp is None or self._mcp[0] != key:
            server = FastMCP(ENV_NAME)
            for tool in env.bound.openai_tools:
                function = tool["function"]
                server.add_tool(
                    FunctionTool(
                        name=function["name"],
                        description=function.get("description", ""),
                        parameters=function["parameters"],
                        fn=self._tool_caller(function["name"]),
                    )
                )
            self._mcp = (key, server)
        return self._mcp[1]

    def _tool_caller(self, name: str) -> Callable[..., Any]:
        def call(**arguments: Any) -> dict[str, Any]:
            if self.env is None:
                raise EpisodeOverError("no episode is running: send reset first")
            text = self.env.bound.write_call(name, json.dumps(arguments, ensure_ascii=False))
            observation = self.step(HarnessAction(text=text))
            return {**observation.model_dump(exclude={"metadata"}), "action": text}

        async def call_in_thread(**arguments: Any) -> dict[str, Any]:
            # openenv awaits a coroutine tool on its event loop: the step runs in a thread, so
            # a slow step (a terminal command) does not stall the other sessions.
            return await asyncio.to_thread(call, **arguments)

        return call_in_thread

    @property
    def state(self) -> HarnessState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        import harness_gym

        return EnvironmentMetadata(
            name=ENV_NAME,
            description="harness-gym: every (task, harness) pair as an environment; reset takes "
            "seed, task (a task id) and harness (a preset name, spec object or harness id)",
            version=harness_gym.__version__,
        )

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


#: openenv's endpoints whose session lives exactly as long as their WebSocket.
_SOCKET_ENDPOINTS = frozenset({"websocket_endpoint", "mcp_websocket_endpoint"})


class ConnectedSessionsServer(HTTPEnvServer):
    """openenv's server, except that no session whose WebSocket is connected is reaped as idle.

    openenv 0.10's idle reaper spares only sessions attached to an existing MCP session: a
    session its ``/ws`` endpoint creates for itself (every ``EnvClient``'s) was destroyed after
    ``session_timeout`` seconds without a message while the socket stayed open, so a client
    that thought between reset and step (a GRPO step through :class:`ServedHarnessEnv`) found
    its episode gone. Such a session now joins the reaper's exempt set for the socket's
    lifetime: the endpoint destroys it when the socket closes, and uvicorn's pings close a
    socket whose peer is gone. Sessions with no socket (HTTP MCP) are still reaped.
    (openenv/core/env_server/http_server.py: ``_reap_idle_sessions``, ``websocket_endpoint``.)
    """

    async def _create_session(self) -> tuple[str, Environment]:
        caller = sys._getframe(1).f_code.co_name  # the endpoint awaiting this session
        session_id, env = await super()._create_session()
        if caller in _SOCKET_ENDPOINTS:
            self._session_websocket_attachments.add(session_id)
        return session_id, env


def create_server_app(
    task: str = "ClickButton",
    harness: str | Mapping[str, Any] = "Json",
    tasks: list[str] | None = None,
    max_sessions: int = 8,
    session_timeout: float | None = 300.0,
) -> Any:
    """openenv's FastAPI app around :class:`HarnessGymEnvironment` (as openenv's
    ``create_fastapi_app`` builds it, with :class:`ConnectedSessionsServer`)."""
    from fastapi import FastAPI

    import harness_gym

    factory: Callable[[], HarnessGymEnvironment] = lambda: HarnessGymEnvironment(task, harness, tasks)  # noqa: E731
    config = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=session_timeout)
    app = FastAPI(title="harness-gym (OpenEnv protocol)", version=harness_gym.__version__)
    server = ConnectedSessionsServer(
        factory,
        HarnessAction,
        HarnessObservation,
        concurrency_config=config,
        env_name=ENV_NAME,
        state_cls=HarnessState,
    )
    server.register_routes(app)
    return app


def serve(host: str = "127.0.0.1", port: int = 8000, **app_options: Any) -> None:
    """Run the server with uvicorn until interrupted."""
    import uvicorn

    app = create_server_app(**app_options)
    uvicorn.run(app, host=host, port=port, ws_max_size=MAX_MESSAGE_BYTES, log_level="warning")


class HarnessGymClient(EnvClient[HarnessAction, HarnessObservation, HarnessState]):
    """openenv's WebSocket client, typed for harness-gym: ``reset(seed=, task=, harness=)``."""

    def _step_payload(self, action: HarnessAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[HarnessObservation]:
        fields = dict(payload.get("observation", {}))
        fields.pop("metadata", None)
        observation = HarnessObservation(
            **fields, reward=payload.get("reward"), done=bool(payload.get("done", False))
        )
        return StepResult(observation=observation, reward=payload.get("reward"), done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> HarnessState:
        return HarnessState(**payload)


class ServedHarnessEnv:
    """One WebSocket session of a served env, behind :class:`HarnessEnv`'s ``reset`` / ``step``.

    For code written against a local env, such as TRL's rollout: ``EnvPool(make=lambda task,
    harness: ServedHarnessEnv(url, task, harness))`` plays every training episode on the server.
    ``reset`` / ``step`` answer what the server's env answered (its observation text, reward,
    terminated / truncated, ``info``); the system prompt and worked examples come from the last
    reset's ``info``. Text channel only: a native-channel harness needs the local toolbox.
    """

    def __init__(self, base_url: str, task: str, harness: Harness) -> None:
        if harness.tool_channel == "native":
            raise ValueError(
                f"harness {harness.id} uses the native tool channel: over the wire the action is text "
                "in the harness's syntax; use a text-channel harness"
            )
        self.task, self.harness, self.base_harness = task, harness, harness
        self.system_prompt, self.examples = "", []
        self.info: dict[str, Any] = {}
        self._client = HarnessGymClient(base_url=base_url).sync()
        self._client.connect()

    @property
    def bound(self) -> Any:
        raise AttributeError("a served env has no local toolbox (native tool calls need one)")

    def reset(self, seed: int | None = None, **_: Any) -> tuple[str, dict[str, Any]]:
        result = self._client.reset(seed=seed, task=self.task, harness=self.harness.to_dict())
        self.info = result.observation.info
        self.system_prompt = self.info["system_prompt"]
        self.examples = list(self.info.get("examples", []))
        return result.observation.text, self.info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        result = self._client.step(HarnessAction(text=action))
        observation = result.observation
        self.info = observation.info
        truncated = bool(observation.truncated)
        terminated = bool(result.done) and not truncated
        return observation.text, float(result.reward or 0.0), terminated, truncated, self.info

    def close(self) -> None:
        self._client.close()
