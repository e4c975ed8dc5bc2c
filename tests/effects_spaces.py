"""Spaces and agents whose true effects are known by construction, shared by the known-answer
suites (tests/test_effects_known_answers.py, tests/test_effects_every_design.py)."""

from __future__ import annotations

from harness_gym.core.space import HarnessSpace

#: Five factors, mixed levels (the space of tests/test_effects.py).
MIXED = HarnessSpace(
    {
        "obs_format": ["json", "markdown", "xml", "yaml", "key_value", "html"],
        "field_order": ["canonical", "reversed"],
        "tool_style": ["json", "xml", "python", "command"],
        "invalid_action": ["feedback", "end", "ignore"],
        "parser": ["strict", "lenient"],
    }
)
#: Five two-level factors: the fold-over of its 8-run array is resolution IV.
BINARY = HarnessSpace(
    {
        "obs_format": ["json", "yaml"],
        "tool_style": ["json", "xml"],
        "tool_naming": ["canonical", "opaque"],
        "parser": ["strict", "lenient"],
        "field_order": ["canonical", "reversed"],
    }
)


def xml_and_yaml(task: str, lv: dict) -> float:
    """Fails only when tool_style = xml AND obs_format = yaml (an interaction, nothing else)."""
    return 0.1 if (lv.get("tool_style") == "xml" and lv.get("obs_format") == "yaml") else 0.8


def xml_only(task: str, lv: dict) -> float:
    """A main effect of tool_style alone."""
    return 0.3 if lv.get("tool_style") == "xml" else 0.7
