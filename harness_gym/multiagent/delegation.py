"""Delegation as a PettingZoo AEC env: a controller that may hand control to a worker.

Two agents act on one task instance. The controller (``controller_0``) acts through its
harness with the task's tools plus a way to delegate (the channel's ``delegation_style``: a
``delegate(instruction)`` tool, or a reply starting ``DELEGATE:``). A delegation hands the
turn to the worker (``worker_0``), which sees the instruction and the task through its own
harness, with the task's tools plus ``end_turn(summary)``. Control returns to the
controller when the worker ends its turn, after ``max_worker_steps`` worker turns, or when
the worker's harness says an invalid action ends its turn (``invalid_action="end"``).

Both agents get the team reward at every turn: the task's reward minus
``worker_step_cost`` for each worker turn. So the best policy delegates only when it pays.

Budget: the controller's harness budget (``step_budget`` or the task's ``max_steps``)
counts controller turns (a delegation is one); each delegation adds at most
``max_worker_steps`` worker turns. The episode ends when the task does; it is truncated when
the controller has used its budget and holds the turn.

Invalid output follows the writer's harness: ``feedback`` shows the error in its next
observation, ``ignore`` does not, ``end`` ends the episode for the controller and the
delegation for the worker. A worker that tries to delegate gets a ``nested_delegation``
error. Histories (``history_window``) are not shown in this env.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness_gym.core.env import MAX_OBSERVATION_CHARS
from harness_gym.core.harness import BoundHarness, Harness
from harness_gym.core.presets import resolve_harness
from harness_gym.core.task import Action, ActionSpec, Param, Task
from harness_gym.core.tools import ActionError, preview
from harness_gym.multiagent.agents import AgentError, check_agent
from harness_gym.multiagent.channels import DelegationChannel, resolve_channel
from harness_gym.multiagent.pz import AECEnv
from harness_gym.multiagent.text import ObjectText, TextObservation

CONTROLLER = "controller_0"
WORKER = "worker_0"
DELEGATE = ActionSpec(
    "delegate",
    "Hand control to a worker agent, which acts in the task for a few steps.",
    (Param("instruction", "str", "What the worker should do."),),
)
END_TURN = ActionSpec(
    "end_turn",
    "Give control back to the controller.",
    (Param("summary", "str", "What you did and what is left to do."),),
)
PREFIX = "DELEGATE:"
PREFIX_NOTE = (
    "\n\nTo hand control to a worker agent, reply with a line starting `DELEGATE:` followed by "
    "your instruction for it."
)
WORKER_NOTE = (
    "\n\nYou are a worker: a controller handed you control with an instruction. You have up to "
    "{k} turns; end your turn early with the end_turn tool."
)

HarnessLike = Harness | str | Mapping[str, Any] | Path | None


@dataclass(frozen=True)
class Delegation:
    """A controller's parsed request to delegate."""

    instruction: str


def with_tools(harness: Harness, extra: tuple[ActionSpec, ...]) -> Harness:
    """``harness`` able to bind ``extra`` tools too: an explicit tool order lists them last."""
    if isinstance(harness.tool_order, tuple):
        return harness.replace(tool_order=harness.tool_order + tuple(s.name for s in extra))
    return harness


class DelegationEnv(AECEnv):
    """A controller and a worker on one task instance (PettingZoo AEC API).

    Args:
        task: a task id or Task class.
        controller_harness / worker_harness: each agent's harness (preset name, spec dict,
            YAML path or Harness; default ``Json``).
        channel: a :class:`DelegationChannel`, a dict of its factors, or ``"sample"`` (its
            categorical factors drawn from each episode's seed).
        render_mode: ``"ansi"``: ``render()`` returns the acting agent's observation.

    Pass ``agent=`` to :meth:`step` to have the env check that it is that agent's turn.
    """

    metadata = {"name": "harness_delegation_v0", "render_modes": ["ansi"], "is_parallelizable": False}

    def __init__(
        self,
        task: str | type[Task],
        controller_harness: HarnessLike = None,
        worker_harness: HarnessLike = None,
        channel: DelegationChannel | Mapping[str, Any] | str | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        from harness_gym.core.registry import get_task

        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        task_cls = get_task(task) if isinstance(task, str) else task
        self.task: Task = task_cls()
        self.render_mode = render_mode
        self.harnesses = {
            CONTROLLER: resolve_harness(controller_harness),
            WORKER: resolve_harness(worker_harness),
        }
        self.base_channel, self._channel_source = resolve_channel(DelegationChannel, channel)
        self.channel = self.base_channel
        specs = tuple(self.task.action_specs)
        names, fields = {s.name for s in specs}, self.task.field_names
        clash = names & {DELEGATE.name, END_TURN.name}
        if clash:
            raise ValueError(
                f"task {self.task.task_id} already has tool(s) {sorted(clash)} that delegation adds"
            )
        ch, wk = self.harnesses[CONTROLLER], self.harnesses[WORKER]
        self._bound: dict[str, BoundHarness] = {
            "tool": with_tools(ch, (DELEGATE,)).bind(fields, (*specs, DELEGATE)),
            "prefix": ch.bind(fields, specs),
            WORKER: with_tools(wk, (END_TURN,)).bind(fields, (*specs, END_TURN)),
            # only to recognise a worker's attempt to delegate
            "worker_delegating": with_tools(wk, (END_TURN, DELEGATE)).bind(
                fields, (*specs, END_TURN, DELEGATE)
            ),
        }
        self.possible_agents = [CONTROLLER, WORKER]
        self.agents = []
        self.observation_spaces = {a: ObjectText(MAX_OBSERVATION_CHARS) for a in self.possible_agents}
        self.action_spaces = {a: ObjectText(MAX_OBSERVATION_CHARS) for a in self.possible_agents}
        self.budget = ch.step_budget or self.task.max_steps
        self._seed_stream = np.random.default_rng()
        self._seed: int | None = None

    # -- PettingZoo API ----------------------------------------------------------------------

    def observation_space(self, agent: str) -> Any:
        return self.observation_spaces[check_agent(agent, self.possible_agents)]

    def action_space(self, agent: str) -> Any:
        return self.action_spaces[check_agent(agent, self.possible_agents)]

    @property
    def controller_bound(self) -> BoundHarness:
        """The controller's harness, bound with this episode's way to delegate."""
        return self._bound[self.channel.delegation_style]

    @property
    def worker_bound(self) -> BoundHarness:
        return self._bound[WORKER]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is None:
            seed = int(self._seed_stream.integers(0, 2**31 - 1))
        elif isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
        else:
            self._seed_stream = np.random.default_rng(int(seed))
        self._seed = int(seed)
        self.channel = self._channel_source(self._seed) if self._channel_source else self.base_channel
        self.task.reset(np.random.default_rng(self._seed))
        self._digest = self.task.digest()
        self.agents = list(self.possible_agents)
        self.agent_selection = CONTROLLER
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self._turns = dict.fromkeys(self.agents, 0)
        self._invalid = dict.fromkeys(self.agents, 0)
        self._errors: dict[str, ActionError | None] = dict.fromkeys(self.agents, None)
        self._shown_error: dict[str, str | None] = dict.fromkeys(self.agents, None)
        self._success = False
        self._return = 0.0
        self._delegations = 0
        self._instruction = ""
        self._turn_steps = 0  # worker turns in the current delegation
        self._worker_log: list[str] = []
        self._report = ""
        self.infos = {a: self._info(a) for a in self.agents}
        for agent, info in self.infos.items():  # what stays fixed for the episode, as HarnessEnv
            bound = self.controller_bound if agent == CONTROLLER else self.worker_bound
            info["system_prompt"] = self.system_prompt(agent)
            info["tools"] = bound.openai_tools

    def system_prompt(self, agent: str) -> str:
        """``agent``'s system prompt: its harness's, plus how to delegate (controller, prefix
        style) or what a worker does."""
        check_agent(agent, self.possible_agents)
        if agent == WORKER:
            return self.worker_bound.system_prompt + WORKER_NOTE.format(k=self.channel.max_worker_steps)
        note = PREFIX_NOTE if self.channel.delegation_style == "prefix" else ""
        return self.controller_bound.system_prompt + note

    def observe(self, agent: str) -> TextObservation:
        check_agent(agent, self.possible_agents)
        fields = self.task.fields()
        if agent == CONTROLLER:
            text = self.controller_bound.render(
                fields, step=self._turns[CONTROLLER], error=self._shown_error[CONTROLLER]
            )
            if self._report:
                text += "\n\n" + self._report
        else:
            text = self.worker_bound.render(fields, step=self._turn_steps, error=self._shown_error[WORKER])
            text = f"Instruction from the controller: {self._instruction}\n\n{text}"
        return TextObservation(text[:MAX_OBSERVATION_CHARS])

    def step(self, action: str | None, agent: str | None = None) -> None:
        if self._seed is None:
            raise RuntimeError("call reset() before step()")
        acting = self.agent_selection
        if agent is not None and check_agent(agent, self.possible_agents) != acting:
            raise AgentError(f"it is {acting}'s turn, not {agent}'s (acting out of turn)")
        if self.terminations[acting] or self.truncations[acting]:
            self._was_dead_step(action)
            return
        if not isinstance(action, str):
            raise TypeError(
                f"DelegationEnv.step takes {acting}'s output text (a str), got {type(action).__name__}"
            )
        self._cumulative_rewards[acting] = 0.0
        self._clear_rewards()
        self._turns[acting] += 1
        if acting == CONTROLLER:
            reward, ended = self._controller_turn(action)
        else:
            reward, ended = self._worker_turn(action)
        self._return += reward
        for a in self.agents:
            self.rewards[a] = reward
        truncated = (
            not ended and self.agent_selection == CONTROLLER and self._turns[CONTROLLER] >= self.budget
        )
        if ended or truncated:
            for a in self.agents:
                self.terminations[a] = ended
                self.truncations[a] = truncated
            self.agent_selection = CONTROLLER
        self.infos = {a: self._info(a) for a in self.agents}
        self._accumulate_rewards()

    def render(self) -> str | None:
        if self.render_mode != "ansi" or not self.agents:
            return None
        return f"== {self.agent_selection} ==\n{self.observe(self.agent_selection)}"

    def close(self) -> None:
        close = getattr(self.task, "close", None)
        if callable(close):
            close()

    # -- turns -------------------------------------------------------------------------------

    def _controller_turn(self, text: str) -> tuple[float, bool]:
        """Apply the controller's reply; return the reward and whether the episode ended."""
        self._report = ""
        try:
            parsed = self._parse_controller(text)
        except ActionError as err:
            return 0.0, self._invalid_output(CONTROLLER, err)
        self._clear_error(CONTROLLER)
        if isinstance(parsed, Delegation):
            self._delegations += 1
            self._instruction = parsed.instruction
            self._turn_steps = 0
            self._worker_log = []
            self._clear_error(WORKER)
            self.agent_selection = WORKER
            return 0.0, False
        result = self.task.step(parsed)
        self._success = self._success or bool(result.success)
        return float(result.reward), bool(result.terminated)

    def _worker_turn(self, text: str) -> tuple[float, bool]:
        self._turn_steps += 1
        reward, ended, turn_over, summary = -self.channel.worker_step_cost, False, False, None
        try:
            parsed = self._parse_worker(text)
        except ActionError as err:
            self._worker_log.append(f"(invalid: {preview(text, 60)})")
            turn_over = self._invalid_output(WORKER, err)
        else:
            self._clear_error(WORKER)
            if parsed.name == END_TURN.name:
                summary, turn_over = str(parsed["summary"]), True
            else:
                result = self.task.step(parsed)
                self._success = self._success or bool(result.success)
                reward += float(result.reward)
                ended = bool(result.terminated)
                shown = self.controller_bound  # in the controller's syntax when it has the tool
                self._worker_log.append(shown.format_action(parsed) if shown.exposes(parsed) else str(parsed))
        if not ended and (turn_over or self._turn_steps >= self.channel.max_worker_steps):
            self._report = self._worker_report(summary)
            self.agent_selection = CONTROLLER
        return reward, ended

    def _parse_controller(self, text: str) -> Action | Delegation:
        bound = self.controller_bound
        if (
            self.channel.delegation_style == "prefix"
            and len(text) <= self.harnesses[CONTROLLER].max_action_chars
        ):
            stripped = text.lstrip()
            lenient = self.harnesses[CONTROLLER].parser == "lenient"
            head = stripped[: len(PREFIX)]
            if head == PREFIX or (lenient and head.upper() == PREFIX):
                return self._delegation(stripped[len(PREFIX) :].strip())
        action = bound.parse(text)
        if action.name == DELEGATE.name:
            return self._delegation(str(action["instruction"]).strip())
        self._check_legal(action)
        return action

    @staticmethod
    def _delegation(instruction: str) -> Delegation:
        if not instruction:
            raise ActionError("empty_instruction", "a delegation needs an instruction for the worker")
        return Delegation(instruction)

    def _parse_worker(self, text: str) -> Action:
        try:
            action = self.worker_bound.parse(text)
        except ActionError as err:
            if self._is_delegation(text):
                raise ActionError(
                    "nested_delegation",
                    "a worker cannot delegate (delegating inside a delegation); act in the task "
                    "or end your turn",
                ) from None
            raise err
        if action.name != END_TURN.name:
            self._check_legal(action)
        return action

    def _is_delegation(self, text: str) -> bool:
        if text.lstrip()[: len(PREFIX)].upper() == PREFIX:
            return True
        try:
            return self._bound["worker_delegating"].parse(text).name == DELEGATE.name
        except ActionError:
            return False

    def _check_legal(self, action: Action) -> None:
        problem = self.task.check(action)
        if problem is not None:
            raise ActionError("illegal_action", problem)

    def _invalid_output(self, agent: str, err: ActionError) -> bool:
        """Record bad output under ``agent``'s harness policy; True if that ends its turn
        (the episode, for the controller; the delegation, for the worker)."""
        self._invalid[agent] += 1
        self._errors[agent] = err
        policy = self.harnesses[agent].invalid_action
        self._shown_error[agent] = None if policy == "ignore" else err.message
        return policy == "end"

    def _clear_error(self, agent: str) -> None:
        self._errors[agent] = None
        self._shown_error[agent] = None

    def _worker_report(self, summary: str | None) -> str:
        """What the controller sees of the worker when control returns (``worker_view``)."""
        view = self.channel.worker_view
        if view == "none":
            return ""
        if view == "actions":
            actions = "\n".join(f"- {a}" for a in self._worker_log) or "- (none)"
            return f"The worker took {len(self._worker_log)} action(s):\n{actions}"
        if summary is None:
            return f"The worker's summary: (it ran out of steps after {self._turn_steps})"
        return f"The worker's summary: {summary}"

    def _info(self, agent: str) -> dict[str, Any]:
        bound = self.controller_bound if agent == CONTROLLER else self.worker_bound
        harness = self.harnesses[agent]
        err = self._errors[agent]
        return {
            "agent": agent,
            "task_id": self.task.task_id,
            "harness_id": harness.id,
            "harness": harness.to_dict(),
            "channel_id": self.channel.id,
            "channel": self.channel.to_dict(),
            "seed": self._seed,
            "state_digest": self._digest,
            "success": self._success,
            "team_return": self._return,
            "turns": self._turns[agent],
            "budget": self.budget,
            "delegations": self._delegations,
            "worker_steps": self._turns[WORKER],
            "delegation_turn": self._turn_steps,
            "invalid_actions": self._invalid[agent],
            "last_error": err.message if err else None,
            "error_kind": err.kind if err else None,
            "legal_actions": [
                bound.format_action(a) for a in self.task.legal_actions() if bound.expressible(a)
            ],
        }


def delegation_env(task: str | type[Task], **kwargs: Any) -> DelegationEnv:
    """A :class:`DelegationEnv` (PettingZoo's ``env`` constructor convention)."""
    return DelegationEnv(task, **kwargs)
