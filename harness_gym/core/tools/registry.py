"""The levels of the ``tool_style`` factor: one registry for built-in and plugin styles.

Every style, built-in or not, is added by :func:`register_tool_style`; the package's own
styles are registered when :mod:`harness_gym.core.tools` is imported, and installed plugins'
(entry-point group ``harness_gym.tool_styles``) when a level is not found otherwise.
"""

from __future__ import annotations

from typing import Any

from harness_gym.core.plugins import LiveLevels, PluginError, set_loader
from harness_gym.core.tools.plugin_style import PluginStyle, ToolStyle
from harness_gym.core.tools.style import Style

#: Every registered style by name, built-in ones first (a :class:`Style` each).
_ALL_STYLES: dict[str, Style] = {}
#: Registered (non-built-in) tool styles by name, as declared (a ``ToolStyle`` or a ``Style``).
STYLES: dict[str, ToolStyle | Style] = {}
_BUILTIN: list[str] = []

#: Every ``tool_style`` level: built-in, registered, and installed plugins' (loaded on demand).
STYLE_LEVELS = LiveLevels(_ALL_STYLES, "tool_styles")


def register_tool_style(style: ToolStyle | Style) -> ToolStyle | Style:
    """Add a tool style (a level of ``tool_style``); its name must be new.

    ``style`` is a :class:`ToolStyle` (plain functions) or a :class:`Style` (the protocol
    the built-in styles implement). Returns it.
    """
    if isinstance(style, ToolStyle):
        adapted: Style = PluginStyle(style)
    elif isinstance(style, Style):
        adapted = style
        missing = style.missing()
        if missing:
            raise TypeError(
                f"tool style {style.name!r} does not implement {', '.join(missing)}: override "
                "them (see harness_gym.core.tools.style.Style)"
            )
    else:
        raise TypeError(f"register_tool_style takes a ToolStyle, got {type(style).__name__}")
    name = style.name
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"tool style name {name!r} must be an identifier such as slash")
    if name in _BUILTIN and _ALL_STYLES[name] is not adapted:
        raise ValueError(f"tool style {name!r} is a built-in level; choose another name")
    if name in STYLES and STYLES[name] != style:
        raise ValueError(f"tool style {name!r} is already registered")
    if name in STYLES or name in _BUILTIN:
        return style
    _ALL_STYLES[name] = adapted
    if not _sealed:
        _BUILTIN.append(name)
    else:
        STYLES[name] = style
    return style


_sealed = False


def seal_builtin_styles() -> tuple[str, ...]:
    """End the built-in registrations (the package's own, on import); return their names."""
    global _sealed
    _sealed = True
    return tuple(_BUILTIN)


def get_style(name: str) -> Style:
    """The registered style named ``name`` (installed plugins loaded if needed)."""
    style = _ALL_STYLES.get(name)
    if style is None and name in STYLE_LEVELS:
        style = _ALL_STYLES.get(name)
    if style is None:
        raise ValueError(f"unknown tool style {name!r}; valid levels: {list(_ALL_STYLES)}")
    return style


def reserved_word(style: str, name: str, is_tool: bool = True) -> bool:
    """Whether ``name`` (of a tool, or of an argument) is reserved by ``style``'s syntax."""
    found = _ALL_STYLES.get(style)
    return found is not None and found.reserved_word(name, is_tool)


def _register_tool_style_plugin(name: str, obj: Any) -> None:
    """A ``harness_gym.tool_styles`` entry point: a :class:`ToolStyle` (or a :class:`Style`)
    of the same name."""
    if not isinstance(obj, (ToolStyle, Style)):
        raise PluginError(
            "a harness_gym.tool_styles entry point must name a harness_gym.core.tools.ToolStyle "
            f"(or a harness_gym.core.tools.Style), got {obj!r}"
        )
    if obj.name != name:
        raise PluginError(f"entry point {name!r} names the tool style {obj.name!r}; use one name for both")
    register_tool_style(obj)


set_loader("tool_styles", _register_tool_style_plugin)
