"""HarnessEnv: one (task, harness) pair as a Gymnasium environment.

Observations are the harness-rendered text; actions are the agent's output text. The task
owns the world; the harness owns presentation, parsing and control (step budget,
invalid-action policy, history). Bad agent output never raises: it follows the harness's
invalid-action policy and ``info`` says what went wrong.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from harness_gym.core.grammar import ActionGrammar
from harness_gym.core.harness import BoundHarness, Harness
from harness_gym.core.presets import resolve_harness, task_family
from harness_gym.core.task import Action, Task
from harness_gym.core.text_space import UnicodeText
from harness_gym.core.tools import ActionError, preview

#: Observations longer than this are cut (with a visible marker) to stay in the space.
MAX_OBSERVATION_CHARS = 262_144
_TRUNCATED = "\n...[observation truncated]"
#: Worked examples use seeds counting down from here (far from the seeds people pick).
EXAMPLE_SEED = 2**31 - 2
#: How many example seeds beyond ``few_shot`` may be skipped for showing the episode's instance.
EXAMPLE_SKIPS = 16


#: The ``reset`` option through which harness wrappers ask for an episode's harness.
HARNESS_REQUEST = "harness_gym.harness_request"


@dataclass(frozen=True)
class HarnessRequest:
    """What the harness wrappers above a HarnessEnv ask of one episode's harness.

    ``source(seed)`` draws the harness to start from (``None``: the env's own); then the
    ``perturbations`` apply in order, innermost wrapper first. Wrappers build a request on
    the way down, in ``reset(options={HARNESS_REQUEST: request})``, so the env they wrap
    keeps its own harness (Gymnasium's convention: a wrapper's state lives in the wrapper).
    """

    source: Callable[[int | None], Harness | None] | None = None
    perturbations: tuple[Callable[[Harness], Harness], ...] = ()


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
        self.base_harness = resolve_harness(harness, family=task_family(type(task)))
        self._perturbations: list[Callable[[Harness], Harness]] = []
        self._harness_source: Callable[[int], Harness] | None = None
        self._perturbed_cache: tuple[Any, Harness | None] = (None, None)
        self._tools_of: Any = None
        self._tools_copy: Callable[[], list[dict[str, Any]]] = list
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
        #: The texts of the history's entries as ``bound`` wrote them (see BoundHarness.render).
        self._history_texts: tuple[BoundHarness | None, list[Any]] = (None, [])
        self._observation = ""
        self._episode_examples: list[tuple[str, Action]] = []
        # Worked-example caches: each example seed's instance digest (harness-independent),
        # and (seed, step) -> example under the harness named first (one harness at a time).
        self._example_digests: dict[int, tuple[str, str]] = {}
        self._examples: tuple[str, dict[tuple[int, int], tuple[str, Action] | None]] = ("", {})

    # -- Gymnasium API ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        # Every episode gets an explicit integer seed, so any episode replays from its record.
        episode_seed = seed if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        self._seed = int(episode_seed)
        self._bind(self.harness_for(_request(options), self._seed))
        self.task.reset(np.random.default_rng(self._seed))
        self._digest = self.task.digest()
        if self.harness.few_shot:
            self._episode_examples, disturbed = self._worked_examples(self._digest)
            if disturbed:  # building examples reset the task on other seeds: back to this one
                self.task.reset(np.random.default_rng(self._seed))
        else:
            self._episode_examples = []
        self._steps = 0
        self._invalid = 0
        self._success = False
        self._done = False
        self._last_error = None
        self._error_kind = None
        self._history = []
        self._history_texts = (self.bound, [])
        self._observation = self._render(self.task.fields(), shown_error=None)
        info = self._info()
        info["system_prompt"] = self.bound.system_prompt
        info["examples"] = self.examples
        info["tools"] = self._tools_copy()
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
            parsed = self.bound.parse_cached(action)
            problem = self.task.check(parsed)
            if problem is not None:
                raise ActionError("illegal_action", problem)
        except ActionError as err:
            self._invalid += 1
            self._last_error, self._error_kind = err.message, err.kind
            written = None  # the reply itself, cut (below, only when a history shows it)
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
            written = parsed
        if self.harness.history_window:
            text = preview(action, 200) if written is None else self.bound.format_action(written)
            self._history.append({"observation": self.bound.ordered_fields(self._fields), "action": text})
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
        """Configure this env itself: apply ``perturbation`` on top of the current ones, now
        and at every reset. (Wrappers leave the env they wrap alone and send their
        perturbations with each reset instead, see :class:`HarnessRequest`.)

        Perturbations apply in the order they were added (a wrapper stack applies inside
        out), so stacking wrappers equals composing the perturbations on the spec. A
        perturbation that makes an invalid harness for this task raises
        :class:`~harness_gym.core.harness.HarnessSpecError` and is not kept.
        """
        harness = perturbation(self.harness_for())  # this env's own harness, not a wrapper's
        harness.bind(self.task.field_names, self.task.action_specs)  # validate before keeping
        self._perturbations.append(perturbation)
        self._perturbed_cache = (None, None)
        self._bind(harness)

    def set_harness_source(self, source: Callable[[int], Harness] | None) -> None:
        """Configure this env itself: draw the pre-perturbation harness from
        ``source(episode_seed)`` at every reset (a wrapper's request overrides it)."""
        self._harness_source = source

    def harness_for(self, request: HarnessRequest | None = None, seed: int | None = None) -> Harness:
        """The harness an episode on ``seed`` gets when reset with ``request`` (changes nothing).

        The request's source draws the starting harness (else the one set with
        :meth:`set_harness_source`, else :attr:`base_harness`); this env's own perturbations
        apply first, then the request's. ``seed=None`` previews: only sources that draw
        without a seed (a harness drawn once per env) are asked.
        """
        request = request or _NO_REQUEST
        start: Harness | None = None
        if request.source is not None:
            start = request.source(seed)
        elif self._harness_source is not None and seed is not None:
            start = self._harness_source(seed)
        return self._perturbed(start or self.base_harness, (*self._perturbations, *request.perturbations))

    def _perturbed(
        self, harness: Harness, perturbations: tuple[Callable[[Harness], Harness], ...]
    ) -> Harness:
        # Perturbations are pure: the same source and perturbations give the same result.
        key, cached = self._perturbed_cache
        if cached is not None and key[0] is harness and key[1] == perturbations:
            return cached
        result = harness
        for perturbation in perturbations:
            result = perturbation(result)
        self._perturbed_cache = ((harness, perturbations), result)
        return result

    def bind_harness(self, harness: Harness) -> BoundHarness:
        """Bind ``harness`` to this env's task: the family hook.

        Called whenever the episode's harness changes (construction, a wrapper's perturbation,
        a sampled harness), never twice for the same harness in a row. A task family whose
        harnesses carry ``family_options`` overrides it to apply them (hand options to the
        task, return a :class:`BoundHarness` subclass that presents the family's way); the
        env then takes budget, tools and spec from what it returns.
        """
        return harness.bind(self.task.field_names, self.task.action_specs)

    def _bind(self, harness: Harness) -> None:
        if hasattr(self, "bound") and (harness is self.harness or harness == self.harness):
            return
        bound = self.bind_harness(harness)
        self.harness, self.bound = harness, bound
        self.budget = harness.step_budget or self.task.max_steps
        spec = {k: tuple(v) if isinstance(v, list) else v for k, v in harness.to_dict().items()}
        #: A fresh copy of the spec per info (users keep infos; nothing may be shared).
        self._spec_copy = fresh_copies(spec)
        #: A fresh copy of the bound harness's function tools per reset info.
        self._tools_copy = fresh_copies(bound.openai_tools)

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

    def _worked_examples(self, episode_digest: str) -> tuple[list[tuple[str, Action]], bool]:
        """The harness's worked examples: oracle steps on other instances of this task, and
        whether building them reset the task (so the caller resets the episode again).

        Example ``i`` is step ``i`` of the oracle's episode on the ``i``-th seed counted down
        from ``EXAMPLE_SEED`` whose instance is not the episode's (a later step shows a later
        kind of decision; a shorter episode gives its last step). Instances are compared by
        state digest and by the page the agent sees (the task's fields), not seed: many seeds
        of a small task build the same instance, or the same page over other hidden state,
        and an example must never show the page being played (or its answer). Cached per
        harness; at most ``few_shot + EXAMPLE_SKIPS`` seeds are tried.
        """
        n = self.harness.few_shot
        # What the agent sees of this instance: an example whose page is the same shows the
        # episode's own page and answer, even where hidden state makes the digests differ.
        episode_page = _page_digest(self.task.fields())
        if self._examples[0] != self.harness.id:
            self._examples = (self.harness.id, {})
        cache = self._examples[1]
        disturbed = False
        examples: list[tuple[str, Action]] = []
        seed, position = EXAMPLE_SEED, 0
        while position < n and seed > EXAMPLE_SEED - n - EXAMPLE_SKIPS:
            known = self._example_digests.get(seed)
            if known is None:
                self.task.reset(np.random.default_rng(seed))
                disturbed = True
                known = self._example_digests[seed] = (self.task.digest(), _page_digest(self.task.fields()))
            if episode_digest != known[0] and episode_page != known[1]:
                key = (seed, position)
                if key not in cache:
                    disturbed = True
                    cache[key] = self._example_at(seed, position)
                if cache[key] is not None:
                    examples.append(cache[key])  # type: ignore[arg-type]
                position += 1
            seed -= 1
        return examples, disturbed

    def _example_at(self, seed: int, step: int) -> tuple[str, Action] | None:
        """Step ``step`` of the oracle's episode on ``seed`` (its last step if shorter), as
        this harness shows it; ``None`` when the harness hides the oracle's tool."""
        self.task.reset(np.random.default_rng(seed))
        fields, action = self.task.fields(), self.task.oracle()
        done = 0
        while done < step and not self.task.step(action).terminated:
            done += 1
            fields, action = self.task.fields(), self.task.oracle()
        if not self.bound.exposes(action):
            return None
        return self.bound.render(fields, step=done), action

    # -- internals -------------------------------------------------------------------------

    def _render(self, fields: dict[str, Any], shown_error: str | None) -> str:
        self._fields = fields
        if self._history_texts[0] is not self.bound:  # entries written by another harness
            self._history_texts = (self.bound, [])
        text = self.bound.render(
            fields,
            step=self._steps,
            error=shown_error,
            history=self._history,
            history_texts=self._history_texts[1],
        )
        if len(text) > MAX_OBSERVATION_CHARS:
            text = text[: MAX_OBSERVATION_CHARS - len(_TRUNCATED)] + _TRUNCATED
        return text

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
            "legal_actions": self.bound.legal_texts(self.task.legal_actions()),
        }


_NO_REQUEST = HarnessRequest()


def _page_digest(fields: dict[str, Any]) -> str:
    """A digest of what the agent sees of an instance (its fields), whatever the hidden state."""
    blob = json.dumps(fields, sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def fresh_copies(value: Any) -> Callable[[], Any]:
    """A function that returns a new deep copy of the plain data ``value`` at each call.

    The value is written as a Python literal and compiled once into a function that returns
    it (per distinct value, so an env that binds a harness again pays no second compile):
    calling it builds the copy several times faster than ``pickle.loads`` or
    ``copy.deepcopy`` do (and faster than ``eval`` of the literal). A dict shares its
    immutable values (text, numbers, tuples of them) with its copies: each copy is a copy of
    the dict with fresh copies of its other values (the harness spec, copied into every
    info, is mostly text). Data a literal cannot write (other types, non-finite floats) is
    copied through a pickle instead.
    """
    if not _literal(value):
        return _pickled_copies(value)
    if type(value) is dict:
        mutable = {k: v for k, v in value.items() if not _immutable(v)}
        if not mutable:
            return value.copy().copy
        if len(mutable) < len(value):
            return functools.partial(_dict_copy, value.copy(), _literal_copies(mutable))
    return _literal_copies(value)


def _dict_copy(shared: dict[Any, Any], fresh_values: Callable[[], dict[Any, Any]]) -> dict[Any, Any]:
    # ``shared``'s mutable values are never handed out: every copy gets fresh ones in their place.
    copy = shared.copy()
    copy.update(fresh_values())
    return copy


def _literal_copies(value: Any) -> Callable[[], Any]:
    source = repr(value)
    copier = _LITERAL_COPIERS.get(source)
    if copier is None:
        copier = eval(compile(f"lambda: {source}", "<fresh copy>", "eval"), {"__builtins__": {}})
        if copier() != value:  # pragma: no cover - a literal that does not round-trip
            return _pickled_copies(value)
        if len(_LITERAL_COPIERS) >= 1024:
            _LITERAL_COPIERS.clear()
        _LITERAL_COPIERS[source] = copier
    return copier


#: Compiled copiers by the literal they evaluate.
_LITERAL_COPIERS: dict[str, Callable[[], Any]] = {}


def _pickled_copies(value: Any) -> Callable[[], Any]:
    return functools.partial(pickle.loads, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def _immutable(value: Any) -> bool:
    """Whether the literal ``value`` cannot be changed in place (a scalar, or a tuple of such)."""
    if type(value) is tuple:
        return all(_immutable(v) for v in value)
    return type(value) not in (list, dict)


def _literal(value: Any) -> bool:
    """Whether ``repr(value)`` is a literal that evaluates to an equal value."""
    kind = type(value)
    if kind in (str, int, bool) or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind in (list, tuple):
        return all(_literal(v) for v in value)
    if kind is dict:
        return all(_literal(k) and _literal(v) for k, v in value.items())
    return False


def _request(options: Mapping[str, Any] | None) -> HarnessRequest | None:
    request = (options or {}).get(HARNESS_REQUEST)
    if request is not None and not isinstance(request, HarnessRequest):
        raise TypeError(
            f"reset option {HARNESS_REQUEST!r} must be a harness_gym.core.env.HarnessRequest, got "
            f"{type(request).__name__}; to change the harness, wrap the env (harness_gym.wrappers)"
        )
    return request


def stack_request(env: gym.Env) -> HarnessRequest:
    """The request the harness wrappers of ``env`` (outermost first) send down at reset.

    A wrapper takes part by defining ``harness_request(request) -> request``.
    """
    request = _NO_REQUEST
    layer: Any = env
    while isinstance(layer, gym.Wrapper):
        contribute = getattr(type(layer), "harness_request", None)
        if contribute is not None:
            request = contribute(layer, request)
        layer = layer.env
    return request


def presented_harness(env: gym.Env, seed: int | None = None) -> Harness:
    """The harness a possibly wrapped HarnessEnv presents (for ``seed``, else a preview)."""
    return unwrap_harness_env(env).harness_for(stack_request(env), seed)


def unwrap_harness_env(env: gym.Env, user: str = "this") -> HarnessEnv:
    """The HarnessEnv under any wrappers, or a TypeError naming who needed one."""
    base = env.unwrapped
    if not isinstance(base, HarnessEnv):
        raise TypeError(f"{user} needs a harness_gym HarnessEnv underneath, got {type(base).__name__}")
    return base
