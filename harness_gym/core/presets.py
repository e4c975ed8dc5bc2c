"""Named harness presets. Together they cover every level of every categorical factor.

Each preset is registered with every task as ``harness_gym/<Task>-<Preset>-v0``. The
``Json`` preset is the canonical harness (all defaults); ``JsonReversed`` differs from it
only in field order, the perturbation behind the MiniWoB++ field-order result;
``JsonTranscript``, ``JsonNative`` and ``JsonFewShot`` change only how a language-model agent
is shown the episode (the chat so far), how its tools are sent (as native function tools) and
how many worked examples its system prompt carries (two).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness_gym.core.harness import Harness, HarnessSpecError

PRESETS: dict[str, Harness] = {
    "Json": Harness(),
    "JsonReversed": Harness(field_order="reversed"),
    # One change each, for language-model agents: how the chat is built and tools are sent.
    "JsonTranscript": Harness(context="transcript", history_window="all"),
    "JsonNative": Harness(tool_channel="native"),
    "JsonFewShot": Harness(few_shot=2),
    "Markdown": Harness(
        obs_format="markdown",
        field_order="reversed",
        extra_fields=("step", "last_error"),
        history_window=1,
        tool_style="python",
        tool_naming="synonyms",
        tool_order="reversed",
        tool_descriptions="terse",
        parser="lenient",
        prompt_template="verbose",
    ),
    "Xml": Harness(
        obs_format="xml",
        extra_fields=("last_error",),
        history_window="all",
        tool_style="xml",
        tool_naming="opaque",
        tool_order="alphabetical",
        invalid_action="end",
        prompt_template="terse",
    ),
    "Yaml": Harness(
        obs_format="yaml",
        field_order="reversed",
        extra_fields=("step",),
        tool_style="command",
        parser="lenient",
        invalid_action="ignore",
    ),
    "KeyValue": Harness(
        obs_format="key_value",
        extra_fields=("step", "last_error"),
        history_window=2,
        tool_style="command",
        tool_naming="synonyms",
        tool_descriptions="none",
    ),
    "Html": Harness(
        obs_format="html",
        field_order="reversed",
        tool_style="json",
        tool_naming="opaque",
        tool_order="reversed",
        parser="lenient",
        invalid_action="end",
        prompt_template="verbose",
    ),
    "Python": Harness(
        obs_format="markdown",
        tool_style="python",
        extra_fields=("last_error",),
        history_window=1,
    ),
}


def get_preset(name: str) -> Harness:
    try:
        return PRESETS[name]
    except KeyError:
        raise HarnessSpecError(f"unknown harness preset {name!r}; valid presets: {list(PRESETS)}") from None


def resolve_harness(harness: Harness | str | Mapping[str, Any] | Path | None) -> Harness:
    """Accept a Harness, a preset name, a spec dict, or a YAML path; return a Harness."""
    if harness is None:
        return PRESETS["Json"]
    if isinstance(harness, Harness):
        return harness
    if isinstance(harness, Mapping):
        return Harness.from_dict(harness)
    if isinstance(harness, Path) or (isinstance(harness, str) and harness.endswith((".yaml", ".yml"))):
        path = Path(harness)
        if not path.exists():
            raise FileNotFoundError(f"harness YAML file not found: {path}")
        return Harness.from_yaml(path)
    if isinstance(harness, str):
        return get_preset(harness)
    raise TypeError(
        f"harness must be a Harness, a preset name, a dict spec or a YAML path; got {type(harness).__name__}"
    )
