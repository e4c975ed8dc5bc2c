"""Action grammars: the language of one step's valid replies, for constrained decoding.

A server with structured outputs (vLLM's ``json`` / ``regex`` structured outputs) can be told
to sample only strings in a grammar. :func:`~harness_gym.core.tools.toolbox_grammar.
action_grammar` writes, for one step, a grammar whose language is exactly the legal actions
as the harness writes them: a JSON schema when the reply is a call object (the ``json`` tool
style, or any style on the ``native`` channel, whose reply is ``{"name": ..., "arguments":
{...}}``), a regular expression otherwise. With it, format errors are impossible and what is
left of the mismatch is the agent's choice.

When a step has more legal actions than ``max_alternatives`` (or lists none), the grammar is
per tool instead (tool names and typed arguments, strings bounded by ``max_string``): every
valid action still matches, but so do some illegal ones, and :attr:`ActionGrammar.exact`
says so. Per-tool or exact, every string a grammar admits parses (an illegal action is a
legal reply's shape with other values, never a format error); JSON schemas count ``2.0`` as
the integer 2, and so do the parsers.

This module holds what lies below the tool styles: :class:`ActionGrammar` and the building
blocks of the styles' patterns. The toolbox's assembly of a step's grammar from its style
lives in the tools package (:mod:`harness_gym.core.tools.toolbox_grammar`), above the styles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Regex metacharacters escaped in literal alternatives (a portable subset: no ``\\ `` escapes
#: of ordinary characters, which some grammar engines reject).
_META = set(".^$*+?{}[]|()\\")


@dataclass(frozen=True)
class ActionGrammar:
    """One step's grammar.

    Attributes:
        kind: ``"json_schema"`` (``value`` is a JSON schema dict) or ``"regex"`` (a pattern).
        value: the schema or the pattern.
        exact: whether the language is exactly the legal actions (else a superset).
        alternatives: how many legal actions it was written for.
    """

    kind: str
    value: Any
    exact: bool
    alternatives: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "value": self.value,
            "exact": self.exact,
            "alternatives": self.alternatives,
        }


def regex_literal(text: str) -> str:
    """``text`` as a regular expression matching only itself."""
    out = []
    for ch in text:
        if ch in _META:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        else:
            out.append(ch)
    return "".join(out)


# -- building blocks of the styles' per-tool patterns ---------------------------------------

#: An integer as the text styles read it (``[+-]?`` digits, at most 18) and as Python does
#: (no leading zeros: ``01`` is not a Python literal).
INT_TEXT = r"-?[0-9]{1,18}"
INT_PYTHON = r"-?(0|[1-9][0-9]{0,17})"
#: The escapes ``repr`` writes in a string (no ``\N{...}``, no octal, no unknown escapes,
#: which Python rejects or warns about).
_PY_ESCAPE = r"\\([\\'\"abfnrtv]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U000[0-9a-fA-F]{5}|U0010[0-9a-fA-F]{4})"
#: Integer bounds of per-tool JSON schemas: the 18 digits every parser reads as an integer.
INT_BOUND = 10**18 - 1


def python_string(n: int) -> str:
    """A Python string literal as ``repr`` writes it: either quote, the escapes above, no raw
    newline, carriage return or NUL (Python rejects all three)."""
    single = f"'([^'\\\\\\n\\r\\x00]|{_PY_ESCAPE}){{0,{n}}}'"
    double = f'"([^"\\\\\\n\\r\\x00]|{_PY_ESCAPE}){{0,{n}}}"'
    return f"({single}|{double})"


#: A float as ``repr`` and JSON write it (``12.5``, ``1e-05``, ``-0.25``).
FLOAT = r"-?[0-9]{1,17}(\.[0-9]{1,17})?([eE][+-]?[0-9]{1,3})?"
#: At most this many items in a list argument of a per-tool pattern.
MAX_ITEMS = 32


def json_string(n: int) -> str:
    """A JSON string literal of at most ``n`` characters, on one line."""
    return f'"([^"\\\\\\n]|\\\\["\\\\/bfnrt]|\\\\u[0-9a-fA-F]{{4}}){{0,{n}}}"'


def typed(param: Any, string: str, item_string: str, integer: str) -> str:
    """The pattern of an argument where the style writes it as a literal: ``integer``,
    ``string``, a number, or ``[item, item]`` with the style's items."""
    if param.type == "int":
        return integer
    if param.type == "float":
        return FLOAT
    if param.type.startswith("list["):
        item = integer if param.type == "list[int]" else item_string
        return f"\\[({item}(, {item}){{0,{MAX_ITEMS - 1}}})?\\]"
    return string


def describe(grammar: ActionGrammar | None) -> str:
    """A short record of which grammar constrained a request (for result rows)."""
    if grammar is None:
        return "none"
    return f"{grammar.kind}:{'exact' if grammar.exact else 'per-tool'}"
