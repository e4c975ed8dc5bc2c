"""The harness panel as a PettingZoo Parallel env: one agent per harness, one task instance.

Every agent plays its own copy of the same seeded task instance through its own harness.
This is :class:`~harness_gym.core.panel.HarnessPanel` (the vector-env view) seen as agents:
the same members, reset and stepped by its ``reset_members`` / ``step_members``. An agent's
episode ends on its own (it leaves ``env.agents``); the others go on. Each agent's info is
its HarnessEnv info (``harness_id``, ``harness``, ``seed``, ``state_digest`` -- equal across
agents for one seed -- ``success``, ``invalid_actions``, ``legal_actions`` ...) plus ``agent``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness_gym.core.panel import HarnessLike, HarnessPanel
from harness_gym.core.task import Task
from harness_gym.multiagent.agents import agent_names, check_agent, check_parallel_actions
from harness_gym.multiagent.pz import ParallelEnv
from harness_gym.multiagent.text import ObjectText, TextObservation


class HarnessPanelEnv(ParallelEnv):
    """K harnesses as K agents over one seeded task instance (PettingZoo Parallel API).

    Args:
        task: a task id or Task class.
        harnesses: preset names, specs, YAML paths or Harness objects; agents are named by
            preset name, else by harness id (a repeat gets ``_2`` ...).
        render_mode: ``"ansi"``: ``render()`` returns every live agent's observation.
    """

    metadata = {"name": "harness_panel_v0", "render_modes": ["ansi"], "is_parallelizable": True}

    def __init__(
        self, task: str | type[Task], harnesses: Sequence[HarnessLike], render_mode: str | None = None
    ) -> None:
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.panel = HarnessPanel(task, harnesses)
        self.render_mode = render_mode
        self.possible_agents = agent_names(harnesses, self.panel.harnesses)
        self.agents: list[str] = []
        self._started = False
        self._index = {name: i for i, name in enumerate(self.possible_agents)}
        # Text as NumPy object dtype, so PettingZoo's AEC checks pass through parallel_to_aec.
        size = self.panel.envs[0].observation_space.max_length
        self.observation_spaces = {a: ObjectText(size) for a in self.possible_agents}
        self.action_spaces = {a: ObjectText(size) for a in self.possible_agents}

    def observation_space(self, agent: str) -> Any:
        return self.observation_spaces[check_agent(agent, self.possible_agents)]

    def action_space(self, agent: str) -> Any:
        return self.action_spaces[check_agent(agent, self.possible_agents)]

    def env_of(self, agent: str) -> Any:
        """The agent's HarnessEnv (for its oracle, legal actions and grammar)."""
        return self.panel.envs[self._index[check_agent(agent, self.possible_agents)]]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        infos = self.panel.reset_members(seed=seed, options=options)
        self.agents = list(self.possible_agents)
        self._started = True
        obs = self.panel.observations
        return (
            {a: TextObservation(obs[i]) for a, i in self._index.items()},
            {a: {**infos[i], "agent": a} for a, i in self._index.items()},
        )

    def step(self, actions: dict[str, str]) -> tuple[dict, dict, dict, dict, dict]:
        check_parallel_actions(actions, self.agents, self.possible_agents, self._started)
        results = self.panel.step_members({self._index[a]: text for a, text in actions.items()})
        obs, rewards, terms, truncs, infos = {}, {}, {}, {}, {}
        for agent in self.agents:
            r = results[self._index[agent]]
            obs[agent], rewards[agent] = TextObservation(r.observation), r.reward
            terms[agent], truncs[agent] = r.terminated, r.truncated
            r.info["agent"] = agent  # a fresh dict per step (HarnessEnv builds a new info)
            infos[agent] = r.info
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        obs = self.panel.observations
        return "\n\n".join(f"== {a} ==\n{obs[self._index[a]]}" for a in self.agents)

    def close(self) -> None:
        self.panel.close()


def panel_env(task: str | type[Task], harnesses: Sequence[HarnessLike], **kwargs: Any) -> HarnessPanelEnv:
    """A :class:`HarnessPanelEnv` (PettingZoo's ``parallel_env`` constructor convention)."""
    return HarnessPanelEnv(task, harnesses, **kwargs)
