"""The toolbox's grammar of one step: the legal actions as its style writes them.

:func:`action_grammar` asks the toolbox's style (:meth:`~harness_gym.core.tools.style.Style.
grammar`) for the grammar of one step's replies and wraps it in an
:class:`~harness_gym.core.grammar.ActionGrammar`; :func:`bounded_arguments` is the per-tool
argument schema the JSON styles build on. What a grammar is, and the building blocks of the
styles' patterns, live below the styles in :mod:`harness_gym.core.grammar`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from harness_gym.core.grammar import INT_BOUND, ActionGrammar
from harness_gym.core.task import Action

if TYPE_CHECKING:
    from harness_gym.core.tools.style import ToolboxView
    from harness_gym.core.tools.tool import Tool


def action_grammar(
    toolbox: ToolboxView,
    actions: Sequence[Action],
    *,
    native: bool = False,
    max_alternatives: int = 256,
    max_string: int = 200,
) -> ActionGrammar:
    """The grammar of replies that write one of ``actions`` through ``toolbox``.

    The toolbox's style writes it (:meth:`~harness_gym.core.tools.style.Style.grammar`); on
    the native channel the reply is a call object, so the ``json`` style does.
    """
    exposed = [a for a in actions if a.name in {t.spec.name for t in toolbox.tools}]
    exact = 0 < len(exposed) <= max_alternatives
    style = toolbox.native_syntax if native else toolbox.syntax
    kind, value = style.grammar(toolbox, exposed, exact, max_string)
    return ActionGrammar(kind, value, exact, len(exposed))


def bounded_arguments(toolbox: ToolboxView, tool: Tool, max_string: int) -> dict[str, Any]:
    """The tool's argument schema with every string bounded to ``max_string`` characters
    (and to the style's ``native_string_pattern``, where it cannot write every string)."""
    args = toolbox.json_schema(tool)
    pattern = toolbox.syntax.native_string_pattern
    for prop in args["properties"].values():
        if prop.get("type") == "string":
            prop["maxLength"] = max_string
            if pattern is not None:
                prop["pattern"] = pattern
        else:
            prop["minimum"], prop["maximum"] = -INT_BOUND, INT_BOUND
    return args
