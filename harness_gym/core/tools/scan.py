"""Lexical scanning shared by the tool styles: quotes, brackets, fences, command lines.

Every function runs in time linear in the length of its text (agent output is untrusted).
"""

from __future__ import annotations

import re

#: What may stand around several actions for them to count as a list of actions.
SEPARATORS = re.compile(r"[\s;,\[\]]*\Z")
#: Characters a command-like action may start with in prose (a prompt, a backtick).
COMMAND_PREFIX = " \t$>`"


_SHELL_SPACE = " \t\r\n"


def split_command(text: str) -> list[str]:
    """Split a command line into words as ``shlex.split`` does (POSIX quotes and backslashes).

    Written out because it must run in linear time with small constants on any input.
    """
    words: list[str] = []
    current: list[str] = []
    in_word = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in _SHELL_SPACE:
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            i += 1
            continue
        in_word = True
        if ch == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ValueError("No closing quotation")
            current.append(text[i + 1 : end])
            i = end + 1
        elif ch == '"':
            i += 1
            while True:
                stop = _DQUOTE_STOP.search(text, i)
                if stop is None:
                    raise ValueError("No closing quotation")
                current.append(text[i : stop.start()])
                i = stop.start()
                if text[i] == '"':
                    i += 1
                    break
                if i + 1 < n and text[i + 1] in '"\\':
                    current.append(text[i + 1])
                else:
                    current.append(text[i : i + 2])
                i += 2
        elif ch == "\\":
            if i + 1 >= n:
                raise ValueError("No escaped character")
            current.append(text[i + 1])
            i += 2
        else:
            m = _SHELL_RUN.match(text, i)
            current.append(m.group(0))  # type: ignore[union-attr]
            i = m.end()  # type: ignore[union-attr]
    if in_word:
        words.append("".join(current))
    return words


_DQUOTE_STOP = re.compile(r'["\\]')
_SHELL_RUN = re.compile(r"[^ \t\r\n'\"\\]+")


def fences(text: str) -> list[tuple[int, int]]:
    """Regions between pairs of triple backticks, found with one forward scan."""
    regions, pos = [], 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            return regions
        end = text.find("```", start + 3)
        if end < 0:
            return regions
        regions.append((start + 3, end))
        pos = end + 3


def skip_quoted(text: str, i: int, quote: str, escapes: bool = True) -> int:
    """Index just past the quote closing the one at ``i`` (with backslash escapes), or -1."""
    j = i + 1
    while True:
        k = text.find(quote, j)
        if k < 0:
            return -1
        if not escapes:
            return k + 1
        backslashes = 0
        while text[k - 1 - backslashes] == "\\" and k - 1 - backslashes > i:
            backslashes += 1
        if backslashes % 2 == 0:
            return k + 1
        j = k + 1


def balanced_end(text: str, start: int, opener: str, closer: str) -> int:
    """End of the bracketed group opened at ``start`` (quote-aware), or -1 if it never closes."""
    depth, i, n = 0, start, len(text)
    special = re.compile("[" + re.escape(opener + closer) + "'\"]")
    while i < n:
        m = special.search(text, i)
        if m is None:
            return -1
        ch, i = m.group(0), m.start()
        if ch in "'\"":
            i = skip_quoted(text, i, ch)
            if i < 0:
                return -1
            continue
        depth += 1 if ch == opener else -1
        i += 1
        if depth == 0:
            return i
    return -1


def command_end(text: str, i: int, unclosed: dict[str, int]) -> int:
    """End of the command whose name ends at ``i``: the first unquoted newline, ``;`` or ``&&``.

    A quote that never closes ends the command at its line. ``unclosed`` remembers, per
    quote character, a position from which no closing quote exists, so later lines do not
    search again (that would be quadratic).
    """
    n = len(text)
    special = re.compile(r"[\n;&'\"\\]")
    while i < n:
        m = special.search(text, i)
        if m is None:
            return n
        ch, i = m.group(0), m.start()
        if ch in "\n;" or (ch == "&" and text.startswith("&&", i)):
            return i
        if ch == "&":
            i += 1
        elif ch == "\\":
            i += 2
        else:
            end = -1 if i >= unclosed.get(ch, n + 1) else skip_quoted(text, i, ch, escapes=ch == '"')
            if end < 0:
                unclosed[ch] = min(i, unclosed.get(ch, n + 1))
                line_end = text.find("\n", i)
                return n if line_end < 0 else line_end
            i = end
    return n


def only_separators(text: str, spans: list[tuple[int, int, bool]]) -> bool:
    """Whether nothing but whitespace, ``;``, ``,`` and list brackets lies around the spans."""
    pos = 0
    for start, end, _ in spans:
        if not SEPARATORS.match(text[pos:start]):
            return False
        pos = end
    return bool(SEPARATORS.match(text[pos:]))
