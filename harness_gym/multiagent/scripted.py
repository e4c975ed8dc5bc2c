"""Scripted agents for the multi-agent envs, whose results are known by construction.

They read the true task state (the oracle) where a scripted policy needs to, so tests and
docs can check statistics such as the cost of delegation against hand-computed answers.

- :class:`ScriptedController` (delegation): ``always`` delegates, ``never`` delegates (acts
  as the oracle), or delegates ``after_invalid`` -- right after its own invalid reply.
- :class:`OracleWorker` (delegation): acts as the oracle; can end its turn with a summary.
- :class:`MeshOracle` / :class:`HintFollower` (hint mesh): the oracle proposing with
  confidence 1; a random agent that proposes a random legal action and commits the hint it
  is shown, else its own proposal.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from harness_gym.core.task import Action

#: What a scripted agent writes when told to make a mistake (no harness parses it).
GARBAGE = "@@ not an action @@"
CONTROLLER_MODES = ("always", "never", "after_invalid")


class ScriptedController:
    """The controller of a :class:`~harness_gym.multiagent.delegation.DelegationEnv`.

    Args:
        env: the env (the script reads its channel, harness and the task's oracle).
        mode: ``always`` (delegate every turn), ``never`` (act as the oracle) or
            ``after_invalid`` (act as the oracle, but delegate on the turn after its own
            invalid reply).
        mistakes: the controller's own turn numbers (1-based) on which it writes an invalid
            reply instead of acting (a delegating turn is never a mistake).
        instruction: what a delegation asks of the worker.
    """

    def __init__(
        self,
        env: Any,
        mode: str,
        mistakes: Collection[int] = (),
        instruction: str = "Complete the task.",
    ) -> None:
        if mode not in CONTROLLER_MODES:
            raise ValueError(f"mode must be one of {list(CONTROLLER_MODES)}, got {mode!r}")
        self.env, self.mode, self.mistakes, self.instruction = env, mode, set(mistakes), instruction

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        turn = info["turns"] + 1
        delegate = self.mode == "always" or (self.mode == "after_invalid" and info["last_error"] is not None)
        if delegate:
            return self.delegation()
        if turn in self.mistakes:
            return GARBAGE
        return self.env.controller_bound.format_action(self.env.task.oracle())

    def delegation(self) -> str:
        """A delegation written as this episode's channel says."""
        if self.env.channel.delegation_style == "prefix":
            return f"DELEGATE: {self.instruction}"
        return self.env.controller_bound.format_action(Action.of("delegate", instruction=self.instruction))


class OracleWorker:
    """A worker that acts as the oracle; with ``end_after`` it ends its turn (with a summary)
    once it has taken that many turns in the current delegation."""

    def __init__(self, env: Any, end_after: int | None = None) -> None:
        self.env, self.end_after = env, end_after

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        bound = self.env.worker_bound
        done = info["delegation_turn"]
        if self.end_after is not None and done >= self.end_after:
            return bound.format_action(Action.of("end_turn", summary=f"did {done} step(s)"))
        return bound.format_action(self.env.task.oracle())


def run_delegation(env: Any, controller: Any, worker: Any, seed: int) -> dict[str, Any]:
    """Play one episode with two policies ``(observation, info) -> text``; return the team
    return, the last info of each agent and the number of turns."""
    env.reset(seed=seed)
    total = 0.0
    last: dict[str, Any] = {}
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        last[agent] = info
        if agent == "controller_0":
            total += reward
        if term or trunc:
            env.step(None)
            continue
        env.step((controller if agent == "controller_0" else worker)(obs, info))
    return {"team_return": total, "infos": last}


class MeshOracle:
    """A hint-mesh agent that proposes and commits the oracle's action, with confidence 1."""

    def __init__(self, env: Any, agent: str) -> None:
        self.env, self.agent = env, agent

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        member = self.env.member(self.agent)
        action = member.oracle_action()
        return self.env.proposal(action, 1.0) if info["phase"] == "propose" else action


class HintFollower:
    """A random hint-mesh agent: proposes a random legal action with ``confidence``, then
    commits the hint it was shown (``info["hint"]``) if any, else its own proposal.

    Its random choices come from ``np.random.default_rng(seed)`` and only from legal-action
    draws, so with hints hidden it plays exactly like :func:`random_legal_episode`.
    """

    def __init__(self, env: Any, agent: str, seed: int, confidence: float = 0.5) -> None:
        self.env, self.agent, self.confidence = env, agent, confidence
        self.rng = np.random.default_rng(seed)
        self._own = ""

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if info["phase"] == "propose":
            legal = info["legal_actions"]
            self._own = legal[int(self.rng.integers(len(legal)))] if legal else ""
            return self.env.proposal(self._own, self.confidence)
        return info["hint"] if info.get("hint") else self._own


def random_legal_episode(env: Any, seed: int, rng: np.random.Generator) -> bool:
    """One episode of a single-agent HarnessEnv with uniformly random legal actions drawn from
    ``rng`` (the same draws a :class:`HintFollower` makes); return its success."""
    _, info = env.reset(seed=seed)
    done = False
    while not done:
        legal = info["legal_actions"]
        action = legal[int(rng.integers(len(legal)))] if legal else ""
        _, _, term, trunc, info = env.step(action)
        done = term or trunc
    return bool(info["success"])
