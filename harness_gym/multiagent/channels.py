"""Channels: the harness *between* agents, as seeded, recorded factors.

A channel is to a multi-agent env what a :class:`~harness_gym.core.harness.Harness` is to a
single agent: a frozen value whose fields are factors with named levels, with a content-hash
id, a dict round trip, and seeded sampling. Envs record ``channel_id`` and ``channel`` (the
spec as a dict) in every agent's info, so a row can be replayed from what it records.

- :class:`DelegationChannel`: what the controller sees of the worker, how a delegation is
  written, how many steps a worker gets and what each costs.
- :class:`MeshChannel`: how a hint is written, where it goes in the observation, whether its
  confidence is shown.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np

from harness_gym.core.harness import HarnessSpecError

C = TypeVar("C", bound="Channel")


class Channel:
    """Base of channel specs: levels, validation, id, dict round trip, seeded sampling."""

    #: Categorical factors and their levels (numeric factors are validated separately).
    LEVELS: ClassVar[dict[str, tuple[Any, ...]]] = {}
    #: Short prefix of ids, e.g. ``"d-"`` for delegation channels.
    ID_PREFIX: ClassVar[str] = "c-"

    def _check_levels(self) -> None:
        for factor, levels in self.LEVELS.items():
            value = getattr(self, factor)
            if isinstance(value, bool) != isinstance(levels[0], bool) or value not in levels:
                raise HarnessSpecError(
                    f"unknown level {value!r} for channel factor {factor!r} of "
                    f"{type(self).__name__}; valid levels: {list(levels)}"
                )

    @property
    def id(self) -> str:
        """Stable content hash of the non-default levels, e.g. ``"d-1a2b3c4d5e6f"``."""
        blob = json.dumps(self.to_dict(full=False), sort_keys=True, separators=(",", ":"))
        return self.ID_PREFIX + hashlib.sha256(blob.encode()).hexdigest()[:12]

    @classmethod
    def factor_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    def to_dict(self, full: bool = True) -> dict[str, Any]:
        """The spec as plain data; ``full=False`` keeps only non-default levels."""
        out = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if full or value != f.default:
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls: type[C], data: Mapping[str, Any]) -> C:
        if not isinstance(data, Mapping):
            raise HarnessSpecError(f"a {cls.__name__} spec must be a mapping, got {type(data).__name__}")
        unknown = [k for k in data if k not in cls.factor_names()]
        if unknown:
            raise HarnessSpecError(
                f"unknown {cls.__name__} factor(s) {unknown}; valid factors: {list(cls.factor_names())}"
            )
        return cls(**dict(data))

    def replace(self: C, **changes: Any) -> C:
        return self.from_dict({**self.to_dict(), **changes})

    def sample(self: C, seed: int) -> C:
        """This channel with every categorical factor drawn uniformly, fully determined by
        ``seed`` (numeric factors keep their values)."""
        rng = np.random.default_rng([int(seed), 0x6368616E])  # a stream apart from the task's
        draws = {f: levels[int(rng.integers(len(levels)))] for f, levels in self.LEVELS.items()}
        return self.replace(**draws)

    def enumerate(self: C) -> list[C]:
        """Every combination of the categorical levels (numeric factors keep their values)."""
        points: list[dict[str, Any]] = [{}]
        for factor, levels in self.LEVELS.items():
            points = [{**p, factor: level} for p in points for level in levels]
        return [self.replace(**p) for p in points]


@dataclass(frozen=True)
class DelegationChannel(Channel):
    """How a controller and a worker talk (see :class:`~harness_gym.multiagent.delegation.DelegationEnv`).

    Attributes:
        worker_view: what the controller is shown when control returns: ``actions`` (the
            worker's actions of that delegation, written in the controller's tool syntax),
            ``summary`` (the summary the worker gave with ``end_turn``, or a note that it ran
            out of steps) or ``none``.
        delegation_style: how the controller writes a delegation: ``tool`` (a
            ``delegate(instruction)`` tool in its harness's tool style) or ``prefix`` (a reply
            whose first line starts with ``DELEGATE:``; the rest is the instruction).
        max_worker_steps: k, the most turns a worker gets per delegation.
        worker_step_cost: subtracted from the team reward for every worker turn.
    """

    LEVELS: ClassVar[dict[str, tuple[Any, ...]]] = {
        "worker_view": ("actions", "summary", "none"),
        "delegation_style": ("tool", "prefix"),
    }
    ID_PREFIX: ClassVar[str] = "d-"

    worker_view: str = "actions"
    delegation_style: str = "tool"
    max_worker_steps: int = 3
    worker_step_cost: float = 0.05

    def __post_init__(self) -> None:
        self._check_levels()
        k = self.max_worker_steps
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise HarnessSpecError(f"max_worker_steps must be an integer >= 1, got {k!r}")
        cost = self.worker_step_cost
        number = isinstance(cost, (int, float)) and not isinstance(cost, bool)
        if not number or not math.isfinite(cost) or cost < 0:
            raise HarnessSpecError(f"worker_step_cost must be a finite number >= 0, got {cost!r}")
        object.__setattr__(self, "worker_step_cost", float(cost))


@dataclass(frozen=True)
class MeshChannel(Channel):
    """How hints travel in a hint mesh (see :class:`~harness_gym.multiagent.mesh.HintMeshEnv`).

    Attributes:
        hint_format: ``native`` (the hinted action written in the receiver's own tool
            syntax), ``canonical`` (``click(ref=3)``) or ``prose`` (a sentence).
        hint_position: ``first`` (before the observation), ``last`` (after it) or ``hidden``
            (no hint is shown; the control condition).
        show_confidence: whether the hint carries its proposer's confidence.
    """

    LEVELS: ClassVar[dict[str, tuple[Any, ...]]] = {
        "hint_format": ("native", "canonical", "prose"),
        "hint_position": ("first", "last", "hidden"),
        "show_confidence": (True, False),
    }
    ID_PREFIX: ClassVar[str] = "m-"

    hint_format: str = "native"
    hint_position: str = "first"
    show_confidence: bool = True

    def __post_init__(self) -> None:
        self._check_levels()


def resolve_channel(
    kind: type[C], channel: C | Mapping[str, Any] | str | None
) -> tuple[C, Callable[[int], C] | None]:
    """A channel spec and, for ``"sample"``, a per-episode source drawing it from the seed."""
    if channel is None:
        return kind(), None
    if isinstance(channel, kind):
        return channel, None
    if isinstance(channel, Mapping):
        return kind.from_dict(channel), None
    if channel == "sample":
        base = kind()
        return base, base.sample
    raise TypeError(
        f"channel must be a {kind.__name__}, a dict of its factors or 'sample' (drawn from each "
        f"episode's seed); got {type(channel).__name__} {channel!r}"
    )
