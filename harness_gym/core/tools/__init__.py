"""Tools: how canonical actions are named, described, written and parsed under a harness.

A :class:`Toolbox` (:mod:`.toolbox`) binds a task's canonical actions to the tool factors,
one :class:`Tool` (:mod:`.tool`) per action it shows; each level of ``tool_style`` is a
:class:`Style` (:mod:`.style`, which also declares the :class:`ToolboxView` a style sees),
one module per built-in style, registered like a plugin's (:mod:`.registry`; a plugin may
give a :class:`ToolStyle` of plain functions, :mod:`.plugin_style`). :func:`action_grammar`
(:mod:`.toolbox_grammar`) writes one step's grammar through the toolbox's style. Adding a
built-in style is one new module here, its import and its place in the registration tuple
below (see docs/adding-a-factor.md).

Every name this package had as one module (``harness_gym.core.tools``) is importable here.
"""

from __future__ import annotations

from harness_gym.core.plugins import LiveLevels, PluginError, set_loader
from harness_gym.core.task import Action, ActionSpec, Param
from harness_gym.core.tools.bracket_style import BRACKET
from harness_gym.core.tools.command_style import COMMAND
from harness_gym.core.tools.errors import ActionError, preview
from harness_gym.core.tools.json_flat_style import FLAT_KEY, JSON_FLAT
from harness_gym.core.tools.json_style import JSON
from harness_gym.core.tools.json_text import DuplicateKeyError, dump_json, json_integer, load_json
from harness_gym.core.tools.plugin_style import ToolStyle
from harness_gym.core.tools.python_positional_style import PYTHON_POSITIONAL
from harness_gym.core.tools.python_style import PYTHON
from harness_gym.core.tools.registry import (
    _ALL_STYLES,
    STYLE_LEVELS,
    STYLES,
    get_style,
    register_tool_style,
    reserved_word,
    seal_builtin_styles,
)
from harness_gym.core.tools.style import Style, StyleNotImplemented, ToolboxView
from harness_gym.core.tools.tool import Tool
from harness_gym.core.tools.toolbox import SYNONYMS, TOOL_DESCRIPTIONS, TOOL_NAMINGS, Toolbox
from harness_gym.core.tools.toolbox_grammar import action_grammar
from harness_gym.core.tools.xml_style import XML

# The built-in styles, in level order: registered as a plugin's are.
for _style in (JSON, XML, PYTHON, COMMAND, PYTHON_POSITIONAL, BRACKET, JSON_FLAT):
    register_tool_style(_style)

#: The tool styles this package defines; :func:`register_tool_style` adds more.
TOOL_STYLES: tuple[str, ...] = seal_builtin_styles()
#: Tool styles added to reproduce real systems (BrowserGym, WebArena, MiniWoB++; see
#: docs/presets.md): full levels everywhere, but left out of ``DEFAULT_SPACE`` so that its
#: designs (and results recorded over them) stay as they were.
CONVENTION_STYLES = ("python_positional", "bracket", "json_flat")
#: Words each built-in style's syntax reserves: a tool or argument with such a name could
#: never be parsed (``None(ref=1)`` is not a Python call), so harnesses reject them when
#: they are built (``json_flat`` also reserves :data:`FLAT_KEY` as an argument name).
RESERVED_WORDS: dict[str, frozenset[str]] = {name: _ALL_STYLES[name].reserved for name in TOOL_STYLES}

__all__ = [
    "CONVENTION_STYLES",
    "FLAT_KEY",
    "RESERVED_WORDS",
    "STYLES",
    "STYLE_LEVELS",
    "SYNONYMS",
    "TOOL_DESCRIPTIONS",
    "TOOL_NAMINGS",
    "TOOL_STYLES",
    "Action",
    "ActionError",
    "ActionSpec",
    "DuplicateKeyError",
    "LiveLevels",
    "Param",
    "PluginError",
    "Style",
    "StyleNotImplemented",
    "Tool",
    "ToolStyle",
    "Toolbox",
    "ToolboxView",
    "action_grammar",
    "dump_json",
    "get_style",
    "json_integer",
    "load_json",
    "preview",
    "register_tool_style",
    "reserved_word",
    "set_loader",
]
