"""Tasks: the world behind every harness.

A :class:`Task` owns true state, dynamics, reward and success. It knows nothing about
text: it emits *fields* (an ordered mapping of named, JSON-like values) and accepts
*canonical actions* (:class:`Action`, typed primitives such as ``click(ref=3)``).
A harness turns the fields into an observation and agent output back into actions.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from harness_gym.core.json_dumps import dumps_function

#: The types a canonical action argument may have: name -> Python type of its values.
PARAM_TYPES: dict[str, type] = {"int": int, "str": str, "float": float, "list[int]": list, "list[str]": list}
#: How each type is written in a JSON schema (OpenAI / Anthropic tools).
_SCHEMA: dict[str, dict[str, Any]] = {
    "int": {"type": "integer"},
    "str": {"type": "string"},
    "float": {"type": "number"},
    "list[int]": {"type": "array", "items": {"type": "integer"}},
    "list[str]": {"type": "array", "items": {"type": "string"}},
}
_EXAMPLE: dict[str, Any] = {"int": 0, "float": 0.5, "list[int]": [0, 1], "list[str]": ["a", "b"]}


@dataclass(frozen=True)
class Param:
    """One argument of a canonical action: its name, type, meaning and (for an enum) choices.

    ``type`` is one of :data:`PARAM_TYPES`: ``"int"``, ``"str"``, ``"float"`` (a number),
    ``"list[int]"`` or ``"list[str]"``. ``choices`` makes it an enum: the values it may take
    (the JSON schema says ``enum``; a parsed value outside them is a ``wrong_type`` error). A
    list argument's value in an :class:`Action` is a tuple (actions are hashable); styles that
    write text write a list or a number as JSON text, and read that back.
    """

    name: str
    type: str
    description: str
    choices: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"Param type must be one of {sorted(PARAM_TYPES)}, got {self.type!r}")
        if not isinstance(self.choices, tuple):
            object.__setattr__(self, "choices", tuple(self.choices))
        for choice in self.choices:
            try:
                self.coerce(choice)
            except ValueError as err:
                raise ValueError(
                    f"Param {self.name!r}: choice {choice!r} is not a {self.type}: {err}"
                ) from None

    @property
    def is_text_or_int(self) -> bool:
        """Whether the tool styles write this argument natively (an ``int`` or ``str``)."""
        return self.type in ("int", "str")

    def json_schema(self) -> dict[str, Any]:
        """This argument's JSON schema (without its description)."""
        schema = dict(_SCHEMA[self.type])
        if self.choices:
            schema["enum"] = [list(c) if isinstance(c, tuple) else c for c in self.choices]
        return schema

    def example(self) -> Any:
        """A value to show in a tool's written example."""
        if self.choices:
            return self.choices[0]
        value = _EXAMPLE.get(self.type, self.name)
        return tuple(value) if isinstance(value, list) else value

    def coerce(self, value: Any) -> Any:
        """``value`` (decoded JSON, or the JSON text a text style wrote) as this type's value
        (a list as a tuple); raises ValueError saying what was expected."""
        if isinstance(value, str) and self.type != "str":
            try:
                value = json.loads(value)
            except ValueError:
                raise ValueError(f"expected {self.type}, got text that is not one") from None
        if self.type == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"expected a number, got {type(value).__name__}")
            value = float(value)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError("expected a finite number")
        elif self.type.startswith("list["):
            item = int if self.type == "list[int]" else str
            if not isinstance(value, (list, tuple)) or not all(
                isinstance(v, item) and not isinstance(v, bool) for v in value
            ):
                raise ValueError(f"expected a list of {item.__name__}")
            value = tuple(value)
        elif self.type == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError("expected an integer")
        elif self.type == "str" and not isinstance(value, str):
            raise ValueError("expected a string")
        if self.choices and value not in self.choices:
            raise ValueError(f"expected one of {list(self.choices)}")
        return value


@dataclass(frozen=True)
class ActionSpec:
    """The signature of one canonical action (what a harness turns into one tool)."""

    name: str
    description: str
    params: tuple[Param, ...] = ()

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)


@dataclass(frozen=True)
class Action:
    """A canonical action: a name and its typed arguments, in the spec's parameter order.

    Build one with :meth:`Action.of`, e.g. ``Action.of("type", ref=3, text="hi")``.
    Actions are hashable and compare by value, so ``parse(format_action(a)) == a`` is a
    plain equality.
    """

    name: str
    args: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, name: str, **kwargs: Any) -> Action:
        return cls(name, tuple(kwargs.items()))

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.args)

    def __getitem__(self, key: str) -> Any:
        for name, value in reversed(self.args):  # the last one wins, as in dict(self.args)
            if name == key:
                return value
        raise KeyError(key)

    def __str__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.args)
        return f"{self.name}({inner})"


@dataclass(frozen=True)
class StepResult:
    """What the world says after one canonical action."""

    reward: float
    terminated: bool
    success: bool
    message: str = ""


#: JSON-like values a task may put in a field.
FieldValue = Any


class Task(ABC):
    """The world of one task family member.

    Subclasses set the class attributes and implement the abstract methods. Every method
    that draws randomness takes it from the generator passed to :meth:`reset`, so the same
    seed builds the same instance whatever harness presents it (contract 1 of DESIGN.md).
    """

    #: Stable name used in environment ids, e.g. ``"ClickButton"``.
    task_id: ClassVar[str]
    #: One-line description of what the task asks.
    description: ClassVar[str]
    #: Names of the fields :meth:`fields` returns, in canonical order.
    field_names: ClassVar[tuple[str, ...]]
    #: The canonical actions this task accepts.
    action_specs: ClassVar[tuple[ActionSpec, ...]]
    #: Default step budget when the harness does not set one.
    max_steps: ClassVar[int] = 10
    #: True when the same seed may not give identical episodes (e.g. a real browser).
    nondeterministic: ClassVar[bool] = False
    #: The largest return an episode can earn (lets ceiling search stop early).
    max_return: ClassVar[float] = 1.0
    #: The task family (``"web"``, ``"terminal"``, a plugin's own): which family presets and
    #: ``family_options`` the task takes (``register_family``). ``None``: no family, only the
    #: generic presets that bind to its fields and actions.
    family: ClassVar[str | None] = None

    @abstractmethod
    def reset(self, rng: np.random.Generator) -> None:
        """Build a fresh instance from ``rng``."""

    @abstractmethod
    def fields(self) -> dict[str, FieldValue]:
        """The current observation fields, keyed by :attr:`field_names` in canonical order.

        Fresh values on every call: a harness's history shows earlier fields as they were
        returned (and writes each entry once), so they must not change afterwards.
        """

    @abstractmethod
    def legal_actions(self) -> list[Action]:
        """A finite enumeration of sensible actions in the current state (non-empty until done)."""

    @abstractmethod
    def check(self, action: Action) -> str | None:
        """Why ``action`` cannot be applied now (e.g. an unknown ref), or ``None`` if it can.

        The action is already well-typed (the harness checked names and types).
        """

    @abstractmethod
    def step(self, action: Action) -> StepResult:
        """Apply a checked action."""

    @abstractmethod
    def oracle(self) -> Action:
        """The action an optimal policy takes now, computed from the true state."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """The full task state as JSON-serializable data (digested to prove pairing)."""

    # -- provided -------------------------------------------------------------------------

    def snapshot(self) -> Any:
        """An opaque copy of the current state that :meth:`restore` brings back.

        The default pickles the instance's attributes (several times faster than
        ``copy.deepcopy`` and just as faithful: object identity within the state survives).
        Tasks holding unpicklable resources (a browser) override both methods.
        """
        return pickle.dumps(self.__dict__, protocol=pickle.HIGHEST_PROTOCOL)

    def restore(self, snapshot: Any) -> None:
        self.__dict__.update(pickle.loads(snapshot))

    def digest(self) -> str:
        """A short stable hash of :meth:`state`."""
        return state_digest(self.state())


#: The state's canonical JSON text: ``json.dumps(state, sort_keys=True, separators=(",", ":"),
#: default=str)``, from an encoder built once.
_state_json = dumps_function(sort_keys=True, separators=(",", ":"), default=str)


def state_text(state: Any, written: Mapping[str, str] | None = None) -> str:
    """The canonical JSON text of ``state``: what :func:`state_digest` hashes.

    ``written`` gives the text of some of the top-level values already written (each exactly
    what this function writes for that value; the value ``state`` holds under the key is not
    looked at): a task that can write a large part of its state faster than the encoder
    hands it in this way (``WebTask`` its page). ``state`` must then be a dict with string keys.
    """
    if not written:
        return _state_json(state)
    items = [
        f"{_state_json(key)}:{written[key] if key in written else _state_json(state[key])}"
        for key in sorted(state)  # the order sort_keys writes
    ]
    return "{" + ",".join(items) + "}"


def text_digest(text: str) -> str:
    """SHA-256 (first 16 hex digits) of a state's canonical JSON text (:func:`state_text`)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def state_digest(state: Mapping[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of a JSON-serializable state."""
    return text_digest(_state_json(state))
