"""HarnessEnv: one (task, harness) pair as a Gymnasium environment.

Observations are the harness-rendered text; actions are the agent's output text. The task
owns the world; the harness owns presentation, parsing and control (step budget,
invalid-action policy, history). Bad agent output never raises: it follows the harness's
invalid-action policy and ``info`` says what went wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from harness_gym.core.grammar import ActionGrammar
from harness_gym.core.harness import Harness
from harness_gym.core.presets import resolve_harness
from harness_gym.core.task import Action, Task
from harness_gym.core.text_space import UnicodeText
from harness_gym.core.tools import ActionError, preview

#: Observations longer than this are cut (with a visible marker) to stay in the space.
MAX_OBSERVATION_CHARS = 262_144
_TRUNCATED = "\n...[observation truncated]"
#: Worked examples use seeds counting down from here (far from the seeds people pick).
EXAMPLE_SEED = 2**31 - 2


class HarnessEnv(gym.Env[str, str]):
    """A task presented through a harness.

    Args:
        task: a :class:`~harness_gym.core.task.Task` instance or class.
        harness: a :class:`~harness_gym.core.harness.Harness`, a preset name, a spec dict or a
            YAML path. Defaults to the canonical ``Json`` preset.
        render_mode: ``"ansi"`` (``render()`` returns the observation) or ``"human"`` (prints it).

    ``info`` after every ``reset`` and ``step`` carries ``task_id``, ``harness_id``,
    ``harness`` (the spec as a dict), ``seed`` (replays the episode with ``reset(seed=...)``),
    ``step``, ``budget``, ``state_digest`` (a hash of the task instance built by ``reset``;
    equal under every harness for the same seed), ``success``, ``invalid_actions``, ``last_error``,
    ``error_kind`` and ``legal_actions`` (the task's legal actions as this harness writes
    them). The ``info`` of ``reset`` adds what stays fixed for the episode:
    ``system_prompt``, ``tools`` (OpenAI-style function tools) and ``examples`` (the harness's
    worked examples, ``few_shot``); all are also available as ``env.unwrapped.system_prompt``,
    ``env.unwrapped.bound.openai_tools`` and ``env.unwrapped.examples``.
    """

    metadata = {"render_modes": ["ansi", "human"]}

    def __init__(
        self,
        task: Task | type[Task],
        harness: Harness | str | Mapping[str, Any] | Path | None = None,
        render_mode: str | None = None,
    ) -> None:
        if isinstance(task, type) and issubclass(task, Task):
            task = task()
        if not isinstance(task, Task):
            raise TypeError(f"task must be a harness_gym Task instance or class, got {type(task).__name__}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        self.task = task
        self.render_mode = render_mode
        self.observation_space = UnicodeText(MAX_OBSERVATION_CHARS)
        self.action_space = UnicodeText(MAX_OBSERVATION_CHARS)
        #: The harness given at construction; perturbations and samplers start from it.
        self.base_harness = resolve_harness(harness)
        self._perturbations: list[Callable[[Harness], Harness]] = []
        self._harness_source: Callable[[int], Harness] | None = None
        self._perturbed_cache: tuple[Harness | None, Harness | None] = (None, None)
        self.harness: Harness = self.base_harness
        self._bind(self.base_harness)
        self._fields: dict[str, Any] = {}
        self._seed: int | None = None
        self._digest = ""
        self._steps = 0
        self._invalid = 0
        self._success = False
        self._done = True
        self._last_error: str | None = None
        self._error_kind: str | None = None
        self._history: list[dict[str, Any]] = []
        self._observation = ""
        self._episode_examples: list[tuple[str, Action]] = []
        self._examples: dict[tuple[str, tuple[int, ...]], list[tuple[str, Action]]] = {}

    # -- Gymnasium API ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        # Every episode gets an explicit integer seed, so any episode replays from its record.
        episode_seed = seed if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        self._seed = int(episode_seed)
        source = self._harness_source(self._seed) if self._harness_source else self.base_harness
        self._bind(self._perturbed(source))
        self._episode_examples = self._worked_examples(self._seed)
        self.task.reset(np.random.default_rng(self._seed))
        self._digest = self.task.digest()
        self._steps = 0
        self._invalid = 0
        self._success = False
        self._done = False
        self._last_error = None
        self._error_kind = None
        self._history = []
        self._observation = self._render(self.task.fields(), shown_error=None)
        info = self._info()
        info["system_prompt"] = self.bound.system_prompt
        info["examples"] = self.examples
        info["tools"] = json.loads(self._tools_json)  # a fresh copy per episode
        return self._observation, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if not isinstance(action, str):
            raise TypeError(
                "HarnessEnv.step takes the agent's output text (a str), got "
                f"{type(action).__name__}. For index actions wrap the env in "
                "harness_gym.wrappers.DiscreteActions."
            )
        if self._done and self._seed is None:
            raise RuntimeError("call reset() before step()")
        self._steps += 1
        reward = 0.0
        terminated = False
        shown_error: str | None = None
        try:
            parsed = self.bound.parse(action)
            problem = self.task.check(parsed)
            if problem is not None:
                raise ActionError("illegal_action", problem)
        except ActionError as err:
            self._invalid += 1
            self._last_error, self._error_kind = err.message, err.kind
            written = preview(action, 200)
            policy = self.harness.invalid_action
            if policy != "ignore":
                shown_error = err.message
            if policy == "end":
                terminated = True
        else:
            self._last_error, self._error_kind = None, None
            result = self.task.step(parsed)
            reward = float(result.reward)
            terminated = bool(result.terminated)
            self._success = self._success or bool(result.success)
            written = self.bound.format_action(parsed)
        if self.harness.history_window:
            self._history.append({"observation": self.bound.ordered_fields(self._fields), "action": written})
        truncated = not terminated and self._steps >= self.budget
        self._done = terminated or truncated
        self._observation = self._render(self.task.fields(), shown_error=shown_error)
        if self.render_mode == "human":
            self.render()
        return self._observation, reward, terminated, truncated, self._info()

    def close(self) -> None:
        """Release what the task holds (a browser, for the real MiniWoB++ tasks)."""
        close = getattr(self.task, "close", None)
        if callable(close):
            close()
        super().close()

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._observation
        if self.render_mode == "human":
            print(self._observation)
        return None

    # -- the harness pipeline (used by harness_gym.wrappers) --------------------------------

    def add_perturbation(self, perturbation: Callable[[Harness], Harness]) -> None:
        """Apply ``perturbation`` on top of the current ones, now and at every reset.

        Perturbations apply in the order they were added (a wrapper stack applies inside
        out), so stacking wrappers equals composing the perturbations on the spec. A
        perturbation that makes an invalid harness for this task raises
        :class:`~harness_gym.core.harness.HarnessSpecError` and is not kept.
        """
        harness = perturbation(self.harness)
        harness.bind(self.task.field_names, self.task.action_specs)  # validate before keeping
        self._perturbations.append(perturbation)
        self._perturbed_cache = (None, None)
        self._bind(harness)

    def set_harness_source(self, source: Callable[[int], Harness] | None) -> None:
        """Draw the pre-perturbation harness from ``source(episode_seed)`` at every reset."""
        self._harness_source = source

    def _perturbed(self, harness: Harness) -> Harness:
        # Perturbations are pure: the same source gives the same result, so keep the last one.
        cached_source, cached = self._perturbed_cache
        if cached_source is harness and cached is not None:
            return cached
        source = harness
        for perturbation in self._perturbations:
            harness = perturbation(harness)
        self._perturbed_cache = (source, harness)
        return harness

    def _bind(self, harness: Harness) -> None:
        if harness == self.harness and hasattr(self, "bound"):
            return
        bound = harness.bind(self.task.field_names, self.task.action_specs)
        self.harness, self.bound = harness, bound
        self.budget = harness.step_budget or self.task.max_steps
        self._spec_dict = {k: tuple(v) if isinstance(v, list) else v for k, v in harness.to_dict().items()}
        self._spec_nested = [k for k, v in self._spec_dict.items() if isinstance(v, dict)]
        self._tools_json = json.dumps(bound.openai_tools)

    # -- helpers for agents, tests and analysis --------------------------------------------

    def legal_actions(self) -> list[Action]:
        """The task's legal canonical actions an agent can take through this harness.

        An action counts when the harness exposes its tool and its formatted text parses
        back to it within the harness's limits (see :meth:`BoundHarness.expressible`).
        """
        return [a for a in self.task.legal_actions() if self.bound.expressible(a)]

    def format_action(self, action: Action) -> str:
        """Write a canonical action as this harness expects the agent to."""
        return self.bound.format_action(action)

    def oracle_action(self) -> str:
        """The task oracle's next action, written through this harness.

        When the harness hides the tool the oracle needs (``drop_tools``) or cannot express
        its action (longer than ``max_action_chars``), the oracle falls back to the first
        action the harness does express, so such a harness shows a lower oracle success rate
        instead of an error.
        """
        action = self.task.oracle()
        if not self.bound.expressible(action):
            exposed = self.legal_actions()
            if not exposed:
                return ""
            action = exposed[0]
        return self.bound.format_action(action)

    @property
    def system_prompt(self) -> str:
        return self.bound.system_prompt

    @property
    def examples(self) -> list[dict[str, str]]:
        """This episode's worked examples (``few_shot``): each an ``observation`` and the
        ``reply`` that acts correctly on it, written as this harness expects replies."""
        return [
            {"observation": obs, "reply": self.bound.example_reply(action)}
            for obs, action in self._episode_examples
        ]

    def action_grammar(self) -> ActionGrammar:
        """The grammar of this step's valid replies (for constrained decoding)."""
        return self.bound.grammar(self.legal_actions())

    def _worked_examples(self, episode_seed: int) -> list[tuple[str, Action]]:
        """The harness's worked examples: oracle steps on other seeds of this task.

        Example ``i`` is step ``i`` of the oracle's episode on seed ``EXAMPLE_SEED - i`` (a
        later step shows a later kind of decision; a shorter episode gives its last step).
        Seeds that equal the episode's are skipped, so an example never shows the instance
        being played. Built before the episode's own reset and cached per harness.
        """
        n = self.harness.few_shot
        if n == 0:
            return []
        seeds = [s for s in range(EXAMPLE_SEED, EXAMPLE_SEED - n - 1, -1) if s != episode_seed][:n]
        key = (self.harness.id, tuple(seeds))
        if key not in self._examples:
            examples = []
            for i, seed in enumerate(seeds):
                self.task.reset(np.random.default_rng(seed))
                fields, action = self.task.fields(), self.task.oracle()
                step = 0
                while step < i and not self.task.step(action).terminated:
                    step += 1
                    fields, action = self.task.fields(), self.task.oracle()
                if self.bound.exposes(action):
                    examples.append((self.bound.render(fields, step=step), action))
            self._examples = {key: examples}  # one harness at a time: keep the last only
        return self._examples[key]

    # -- internals -------------------------------------------------------------------------

    def _render(self, fields: dict[str, Any], shown_error: str | None) -> str:
        self._fields = fields
        text = self.bound.render(fields, step=self._steps, error=shown_error, history=self._history)
        if len(text) > MAX_OBSERVATION_CHARS:
            text = text[: MAX_OBSERVATION_CHARS - len(_TRUNCATED)] + _TRUNCATED
        return text

    def _spec_copy(self) -> dict[str, Any]:
        """A fresh copy of the spec per info (users keep infos; nothing may be shared)."""
        spec = self._spec_dict.copy()
        for key in self._spec_nested:
            spec[key] = dict(spec[key])
        return spec

    def _info(self) -> dict[str, Any]:
        return {
            "task_id": self.task.task_id,
            "harness_id": self.harness.id,
            "harness": self._spec_copy(),
            "seed": self._seed,
            "step": self._steps,
            "budget": self.budget,
            "state_digest": self._digest,
            "success": self._success,
            "invalid_actions": self._invalid,
            "last_error": self._last_error,
            "error_kind": self._error_kind,
            "legal_actions": [self.bound.format_action(a) for a in self.legal_actions()],
        }


def unwrap_harness_env(env: gym.Env, user: str = "this") -> HarnessEnv:
    """The HarnessEnv under any wrappers, or a TypeError naming who needed one."""
    base = env.unwrapped
    if not isinstance(base, HarnessEnv):
        raise TypeError(f"{user} needs a harness_gym HarnessEnv underneath, got {type(base).__name__}")
    return base
