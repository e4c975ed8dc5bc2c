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

#: Python types a canonical action argument may have.
PARAM_TYPES: dict[str, type] = {"int": int, "str": str}


@dataclass(frozen=True)
class Param:
    """One argument of a canonical action: its name, type (``"int"`` or ``"str"``) and meaning."""

    name: str
    type: str
    description: str

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"Param type must be one of {sorted(PARAM_TYPES)}, got {self.type!r}")


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
        return dict(self.args)[key]

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

    @abstractmethod
    def reset(self, rng: np.random.Generator) -> None:
        """Build a fresh instance from ``rng``."""

    @abstractmethod
    def fields(self) -> dict[str, FieldValue]:
        """The current observation fields, keyed by :attr:`field_names` in canonical order."""

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


def state_digest(state: Mapping[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of a JSON-serializable state."""
    blob = json.dumps(state, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]
