"""Public names that moved keep working at their old import paths."""

from __future__ import annotations

import importlib

import pytest

#: Alias modules of moved code, removed: the package had no users of these paths outside its tests.
REMOVED_ALIASES = [
    "harness_gym.analysis.cli_sweep",
    "harness_gym.baselines.cli_train",
    *(f"harness_gym.analysis.search_{name}" for name in ("report", "run", "spec", "stats")),
    *(f"harness_gym.analysis.sweep_{name}" for name in ("cell", "executors", "spec", "store")),
    "harness_gym.core.spaces",
    "harness_gym.llm.rollout",
    "harness_gym.analysis.rollout",
]


@pytest.mark.parametrize("module", REMOVED_ALIASES)
def test_the_deprecated_alias_modules_are_gone(module: str) -> None:
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
