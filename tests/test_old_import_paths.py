"""Public names that moved keep working at their old import paths."""

from __future__ import annotations

import importlib
import sys

import pytest

import harness_gym.rollout as rollout
from harness_gym.core.text_space import UnicodeText


def test_the_old_spaces_module_warns_and_gives_the_same_space() -> None:
    sys.modules.pop("harness_gym.core.spaces", None)
    with pytest.warns(DeprecationWarning, match="renamed harness_gym.core.text_space"):
        old = importlib.import_module("harness_gym.core.spaces")
    assert old.UnicodeText is UnicodeText
    assert isinstance(UnicodeText(8).sample(), str)


def test_rollout_names_resolve_at_their_old_paths() -> None:
    from harness_gym.analysis.rollout import EpisodeResult, evaluate, run_episode
    from harness_gym.baselines.agents import Agent, RandomAgent
    from harness_gym.llm.rollout import Episode, RolloutStats, run_batched

    assert (EpisodeResult, evaluate, run_episode) == (
        rollout.EpisodeResult,
        rollout.evaluate,
        rollout.run_episode,
    )
    assert (Episode, RolloutStats, run_batched) == (
        rollout.Episode,
        rollout.RolloutStats,
        rollout.run_batched,
    )
    assert Agent is rollout.Agent and isinstance(RandomAgent(0), rollout.Agent)


@pytest.mark.parametrize("module", ["harness_gym.analysis.cli_sweep", "harness_gym.baselines.cli_train"])
def test_the_deprecated_cli_alias_modules_are_gone(module: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(module)


#: Every public name ``harness_gym/core/tools.py`` defined or imported before it became a package.
TOOLS_NAMES = (
    "TOOL_STYLES CONVENTION_STYLES TOOL_NAMINGS TOOL_DESCRIPTIONS SYNONYMS RESERVED_WORDS FLAT_KEY "
    "reserved_word ToolStyle STYLES STYLE_LEVELS register_tool_style ActionError preview "
    "DuplicateKeyError load_json json_integer dump_json Tool Toolbox "
    "LiveLevels PluginError set_loader Action ActionSpec Param"
).split()


def test_every_name_of_the_old_tools_module_imports_from_the_tools_package() -> None:
    tools = importlib.import_module("harness_gym.core.tools")
    assert hasattr(tools, "__path__")  # a package now
    missing = [name for name in TOOLS_NAMES if not hasattr(tools, name)]
    assert missing == []
    from harness_gym.core.tools import ActionError, Toolbox, ToolStyle, register_tool_style

    assert ActionError.__module__ == "harness_gym.core.tools.errors"
    assert Toolbox.__module__ == "harness_gym.core.tools.toolbox"
    assert (ToolStyle, register_tool_style) == (tools.ToolStyle, tools.register_tool_style)
    assert tools.RESERVED_WORDS["python"] and tools.FLAT_KEY == "action_type"
