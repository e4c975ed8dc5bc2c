"""Perturbations: pure functions Harness -> Harness.

Each perturbation is a small frozen value (a kind and its parameters) that can be printed,
compared and recorded. Applying a list of them in order is the same as stacking the matching
wrappers from :mod:`harness_gym.wrappers` (innermost first). None edits rendered text: they
change the spec, and the harness renders from the spec.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness_gym.core.harness import Harness, HarnessSpecError


def _reverse_fields(h: Harness) -> Harness:
    order = h.field_order
    if order == "canonical":
        return h.replace(field_order="reversed")
    if order == "reversed":
        return h.replace(field_order="canonical")
    return h.replace(field_order=tuple(reversed(order)))


def _merge(h: Harness, factor: str, mapping: Mapping[str, str]) -> Harness:
    return h.replace(**{factor: {**dict(getattr(h, factor)), **dict(mapping)}})


_CONTROL = ("step_budget", "invalid_action", "history_window")


def _set_control(h: Harness, **changes: Any) -> Harness:
    bad = [k for k in changes if k not in _CONTROL]
    if bad:
        raise HarnessSpecError(f"set_control changes only {list(_CONTROL)}, got {bad}")
    return h.replace(**changes)


_APPLY: dict[str, Callable[..., Harness]] = {
    "reverse_fields": _reverse_fields,
    "permute_fields": lambda h, order: h.replace(field_order=tuple(order)),
    "rename_tools": lambda h, mapping: _merge(h, "rename_tools", mapping),
    "rename_args": lambda h, mapping: _merge(h, "rename_args", mapping),
    "restyle_tools": lambda h, style: h.replace(tool_style=style),
    "change_naming": lambda h, naming: h.replace(tool_naming=naming),
    "reorder_tools": lambda h, order: h.replace(tool_order=order if isinstance(order, str) else tuple(order)),
    "rewrite_descriptions": lambda h, level: h.replace(tool_descriptions=level),
    "reformat": lambda h, obs_format: h.replace(obs_format=obs_format),
    "set_control": _set_control,
    "drop_tools": lambda h, tools: h.replace(drop_tools=tuple(sorted({*h.drop_tools, *tools}))),
    "set_factors": lambda h, **changes: h.replace(**changes),
}


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


@dataclass(frozen=True)
class Perturbation:
    """A named pure function on harness specs; call it on a :class:`Harness`."""

    kind: str
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in _APPLY:
            raise HarnessSpecError(f"unknown perturbation {self.kind!r}; valid: {sorted(_APPLY)}")

    def __call__(self, harness: Harness) -> Harness:
        kwargs = {k: dict(v) if k == "mapping" else v for k, v in self.params}
        return _APPLY[self.kind](harness, **kwargs)

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(f'{k}={v!r}' for k, v in self.params)})"


def _make(kind: str, **params: Any) -> Perturbation:
    return Perturbation(kind, tuple((k, _freeze(v)) for k, v in params.items()))


def reverse_fields() -> Perturbation:
    """Reverse the field order (canonical <-> reversed; a permutation is reversed)."""
    return _make("reverse_fields")


def permute_fields(order: Sequence[str]) -> Perturbation:
    """Show the task's fields in an explicit order (checked against the task when bound)."""
    return _make("permute_fields", order=list(order))


def shuffle_fields(field_names: Sequence[str], seed: int) -> Perturbation:
    """A seeded random permutation of ``field_names``, as an explicit order."""
    order = [field_names[i] for i in np.random.default_rng(seed).permutation(len(field_names))]
    return permute_fields(order)


def rename_tools(mapping: Mapping[str, str]) -> Perturbation:
    """Show canonical tools under new names, e.g. ``{"click": "tap"}``."""
    return _make("rename_tools", mapping=dict(mapping))


def rename_args(mapping: Mapping[str, str]) -> Perturbation:
    """Show canonical argument names under new names, e.g. ``{"ref": "node_id"}``."""
    return _make("rename_args", mapping=dict(mapping))


def restyle_tools(style: str) -> Perturbation:
    """Change how actions are written (json, xml, python, command)."""
    return _make("restyle_tools", style=style)


def change_naming(naming: str) -> Perturbation:
    """Change the naming scheme (canonical, synonyms, opaque)."""
    return _make("change_naming", naming=naming)


def reorder_tools(order: str | Sequence[str]) -> Perturbation:
    """List tools in another order (canonical, reversed, alphabetical or explicit)."""
    return _make("reorder_tools", order=order if isinstance(order, str) else list(order))


def rewrite_descriptions(level: str) -> Perturbation:
    """Rewrite tool descriptions (full, terse, none)."""
    return _make("rewrite_descriptions", level=level)


def reformat(obs_format: str) -> Perturbation:
    """Change the observation format."""
    return _make("reformat", obs_format=obs_format)


def set_control(**changes: Any) -> Perturbation:
    """Change control: ``step_budget``, ``invalid_action`` and/or ``history_window``."""
    return _make("set_control", **changes)


def drop_tools(tools: Iterable[str]) -> Perturbation:
    """Hide tools from the agent (this may lower the ceiling)."""
    return _make("drop_tools", tools=sorted(tools))


def set_factors(**changes: Any) -> Perturbation:
    """Set any factors directly."""
    return _make("set_factors", **changes)


def apply_all(harness: Harness, perturbations: Iterable[Callable[[Harness], Harness]]) -> Harness:
    """Apply perturbations in order (what a stack of wrappers does, innermost first)."""
    for perturbation in perturbations:
        harness = perturbation(harness)
    return harness
