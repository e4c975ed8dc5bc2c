"""The hint mesh as a PettingZoo Parallel env: peers broadcast their most confident proposal.

N agents (``agent_0`` ...) each play their own copy of one seeded task instance through
their own harness (the members of a :class:`~harness_gym.core.panel.HarnessPanel`). Every
round has two parallel steps:

1. ``propose``: each live agent replies with an action (in its harness's syntax) and a last
   line ``confidence: <number from 0 to 1>``. The most confident valid proposal (ties go to
   the lower agent index) becomes the round's hint.
2. ``commit``: every live agent except the hint's proposer sees the hint in its observation
   (the channel's ``hint_format``, ``hint_position`` and ``show_confidence``) and commits an
   action on its own copy; the commit goes through its HarnessEnv as a normal step.

A proposal that is not valid -- no confidence line, a confidence that is not a number or
outside [0, 1], an empty action, an action its harness cannot parse or its copy cannot take --
follows the proposer's harness's invalid-action policy (``feedback``: the error is shown at
commit; ``ignore``: not shown; ``end``: the agent's episode ends) and is not broadcast. When no
proposal is valid, no hint is shown.

Rewards: each agent gets its own task reward at commit (own success). ``info["team_reward"]``
is the share of all agents that have succeeded (the team's reward once the episode is over).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness_gym.core.panel import HarnessLike, HarnessPanel
from harness_gym.core.task import Action, Task
from harness_gym.core.tools import ActionError, preview
from harness_gym.multiagent.agents import check_agent, check_parallel_actions
from harness_gym.multiagent.channels import MeshChannel, resolve_channel
from harness_gym.multiagent.pz import ParallelEnv
from harness_gym.multiagent.text import ObjectText, TextObservation

PROPOSE_NOTE = (
    "Propose an action: reply with one action, then a last line `confidence: <number from 0 to 1>`. "
    "The most confident proposal is shown to the other agents as a hint."
)
COMMIT_NOTE = "Now commit one action on your own copy of the task."
_CONFIDENCE = re.compile(r"^\s*confidence\s*[:=]\s*(.*?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Proposal:
    """A valid proposal: who made it, the canonical action and the confidence."""

    agent: str
    action: Action
    confidence: float


def parse_confidence_line(text: str) -> tuple[str, float]:
    """Split a proposal into its action text and confidence, or raise an ActionError."""
    lines = text.rstrip().splitlines()
    match = _CONFIDENCE.match(lines[-1]) if lines else None
    if match is None:
        raise ActionError(
            "missing_confidence",
            "end your proposal with a line `confidence: <number from 0 to 1>`",
        )
    raw = match.group(1)
    try:
        confidence = float(raw)
    except ValueError:
        raise ActionError(
            "bad_confidence",
            f"confidence {preview(raw, 40)!r} is not a number; write e.g. confidence: 0.8",
        ) from None
    if not math.isfinite(confidence) or not 0.0 <= confidence <= 1.0:
        raise ActionError("confidence_range", f"confidence must be from 0 to 1, got {preview(raw, 40)}")
    body = "\n".join(lines[:-1]).strip()
    if not body:
        raise ActionError("empty_proposal", "the proposal has no action before its confidence line")
    return body, confidence


class HintMeshEnv(ParallelEnv):
    """N peers on copies of one task instance, sharing their most confident proposal.

    Args:
        task: a task id or Task class.
        harnesses: one harness per agent (preset names, specs, YAML paths or Harness
            objects), or an int N for N agents under the canonical ``Json`` harness.
        channel: a :class:`MeshChannel`, a dict of its factors, or ``"sample"`` (drawn from
            each episode's seed).
        render_mode: ``"ansi"``: ``render()`` returns every live agent's observation.
    """

    metadata = {"name": "harness_hint_mesh_v0", "render_modes": ["ansi"], "is_parallelizable": True}

    def __init__(
        self,
        task: str | type[Task],
        harnesses: Sequence[HarnessLike] | int = 3,
        channel: MeshChannel | Mapping[str, Any] | str | None = None,
        render_mode: str | None = None,
    ) -> None:
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if isinstance(harnesses, int) and not isinstance(harnesses, bool):
            if harnesses < 2:
                raise ValueError(f"a hint mesh needs at least 2 agents, got {harnesses}")
            harnesses = ["Json"] * harnesses
        if len(harnesses) < 2:
            raise ValueError(f"a hint mesh needs at least 2 agents, got {len(harnesses)}")
        self.panel = HarnessPanel(task, harnesses)
        self.render_mode = render_mode
        self.base_channel, self._channel_source = resolve_channel(MeshChannel, channel)
        self.channel = self.base_channel
        self.possible_agents = [f"agent_{i}" for i in range(self.panel.num_envs)]
        self.agents: list[str] = []
        self._started = False
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        size = self.panel.envs[0].observation_space.max_length
        self.observation_spaces = {a: ObjectText(size) for a in self.possible_agents}
        self.action_spaces = {a: ObjectText(size) for a in self.possible_agents}
        self.phase = "propose"

    # -- PettingZoo API ----------------------------------------------------------------------

    def observation_space(self, agent: str) -> Any:
        return self.observation_spaces[check_agent(agent, self.possible_agents)]

    def action_space(self, agent: str) -> Any:
        return self.action_spaces[check_agent(agent, self.possible_agents)]

    def member(self, agent: str) -> Any:
        """The HarnessEnv holding ``agent``'s copy of the task."""
        return self.panel.envs[self._index[check_agent(agent, self.possible_agents)]]

    @staticmethod
    def proposal(action_text: str, confidence: float) -> str:
        """A proposal as agents write it: the action, then its confidence line."""
        return f"{action_text}\nconfidence: {confidence}"

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, TextObservation], dict[str, dict[str, Any]]]:
        member_infos = self.panel.reset_members(seed=seed, options=options)
        seed_used = member_infos[0]["seed"]
        self.channel = self._channel_source(seed_used) if self._channel_source else self.base_channel
        self.agents = list(self.possible_agents)
        self._started = True
        self.phase = "propose"
        self.round = 0
        self._member_info = {a: member_infos[i] for a, i in self._index.items()}
        self._invalid_proposals = dict.fromkeys(self.agents, 0)
        self._proposal_error: dict[str, ActionError | None] = dict.fromkeys(self.agents, None)
        self._shown_error: dict[str, str | None] = dict.fromkeys(self.agents, None)
        self._hints: dict[str, str | None] = dict.fromkeys(self.agents, None)
        self._best: Proposal | None = None
        return self._observations(self.agents), self._infos(self.agents)

    def step(self, actions: dict[str, str]) -> tuple[dict, dict, dict, dict, dict]:
        check_parallel_actions(actions, self.agents, self.possible_agents, self._started)
        live = list(self.agents)
        if self.phase == "propose":
            terms = self._propose(actions)
            truncs = dict.fromkeys(live, False)
            rewards = dict.fromkeys(live, 0.0)
            self.phase = "commit"
        else:
            results = self.panel.step_members({self._index[a]: text for a, text in actions.items()})
            rewards, terms, truncs = {}, {}, {}
            for agent in live:
                r = results[self._index[agent]]
                rewards[agent], terms[agent], truncs[agent] = r.reward, r.terminated, r.truncated
                self._member_info[agent] = r.info
            self.phase = "propose"
            self.round += 1
            self._best = None
            self._hints = dict.fromkeys(self.possible_agents, None)
            self._proposal_error = dict.fromkeys(self.possible_agents, None)
            self._shown_error = dict.fromkeys(self.possible_agents, None)
        self.agents = [a for a in live if not (terms[a] or truncs[a])]
        return self._observations(live), rewards, terms, truncs, self._infos(live)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        obs = self._observations(self.agents)
        return "\n\n".join(f"== {a} ({self.phase}) ==\n{obs[a]}" for a in self.agents)

    def close(self) -> None:
        self.panel.close()

    @property
    def team_reward(self) -> float:
        """The share of all agents whose copy of the task succeeded."""
        wins = sum(bool(self._member_info[a]["success"]) for a in self.possible_agents)
        return wins / len(self.possible_agents)

    # -- the two phases ----------------------------------------------------------------------

    def _propose(self, texts: Mapping[str, str]) -> dict[str, bool]:
        valid: list[Proposal] = []
        terms = {}
        for agent, text in texts.items():
            terms[agent] = False
            env = self.member(agent)
            try:
                body, confidence = parse_confidence_line(text)
                action = env.bound.parse(body)
                problem = env.task.check(action)
                if problem is not None:
                    raise ActionError("illegal_action", problem)
            except ActionError as err:
                self._invalid_proposals[agent] += 1
                self._proposal_error[agent] = err
                policy = env.harness.invalid_action
                self._shown_error[agent] = None if policy == "ignore" else f"Your proposal: {err.message}"
                if policy == "end":
                    terms[agent] = True
                continue
            valid.append(Proposal(agent, action, confidence))
        self._best = max(valid, key=lambda p: (p.confidence, -self._index[p.agent]), default=None)
        for agent in texts:
            shown = self._best is not None and agent != self._best.agent and not terms[agent]
            self._hints[agent] = self._hint_text(agent, self._best) if shown else None
        return terms

    def _hint_text(self, receiver: str, best: Proposal) -> str | None:
        """The hinted action as ``receiver`` is shown it, or None when hints are hidden."""
        if self.channel.hint_position == "hidden":
            return None
        bound = self.member(receiver).bound
        if self.channel.hint_format == "native" and bound.expressible(best.action):
            return bound.format_action(best.action)
        if self.channel.hint_format == "prose":
            args = ", ".join(f"{k} {v!r}" for k, v in best.action.args)
            return f"{best.action.name} with {args}" if args else best.action.name
        return str(best.action)

    def _observations(self, agents: Sequence[str]) -> dict[str, TextObservation]:
        obs = self.panel.observations
        out = {}
        for agent in agents:
            text = obs[self._index[agent]]
            if self.phase == "propose":
                text = f"{text}\n\n{PROPOSE_NOTE}"
            else:
                blocks = [b for b in (self._hint_block(agent), self._shown_error[agent]) if b]
                if self.channel.hint_position == "last":
                    text = "\n\n".join([text, *blocks, COMMIT_NOTE])
                else:
                    text = "\n\n".join([*blocks, text, COMMIT_NOTE])
            out[agent] = TextObservation(text)
        return out

    def _hint_block(self, agent: str) -> str | None:
        hint, best = self._hints[agent], self._best
        if hint is None or best is None:
            return None
        if self.channel.hint_format == "prose":
            line = f"Hint: {best.agent} suggests that you {hint}"
        else:
            line = f"Hint from {best.agent}: {hint}"
        if self.channel.show_confidence:
            line += f" (confidence {best.confidence:.2f})"
        return line

    def _infos(self, agents: Sequence[str]) -> dict[str, dict[str, Any]]:
        team = self.team_reward
        best = self._best
        broadcast = (
            None
            if best is None
            else {"agent": best.agent, "action": str(best.action), "confidence": best.confidence}
        )
        out = {}
        for agent in agents:
            err = self._proposal_error[agent]
            out[agent] = {
                **self._member_info[agent],
                "agent": agent,
                "phase": self.phase,
                "round": self.round,
                "channel_id": self.channel.id,
                "channel": self.channel.to_dict(),
                "hint": self._hints[agent] if self.phase == "commit" else None,
                "broadcast": broadcast if self.phase == "commit" else None,
                "invalid_proposals": self._invalid_proposals[agent],
                "proposal_error": err.message if err else None,
                "proposal_error_kind": err.kind if err else None,
                "team_reward": team,
            }
        return out


def mesh_env(task: str | type[Task], **kwargs: Any) -> HintMeshEnv:
    """A :class:`HintMeshEnv` (PettingZoo's ``parallel_env`` constructor convention)."""
    return HintMeshEnv(task, **kwargs)
