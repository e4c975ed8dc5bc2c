"""The one error a parser raises on agent output, and a safe preview of untrusted text."""

from __future__ import annotations


class ActionError(Exception):
    """Agent output that does not make a legal action. ``kind`` names the problem class."""

    KINDS = (
        "empty",
        "too_long",
        "malformed",
        "unknown_tool",
        "missing_argument",
        "extra_argument",
        "wrong_type",
        "illegal_action",
        "multiple_actions",
    )

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def preview(text: str, limit: int = 80) -> str:
    """A short, printable, escape-safe view of untrusted text for error messages."""
    shown = text[:limit].encode("unicode_escape", "backslashreplace").decode("ascii")
    return shown + (f"... ({len(text)} chars)" if len(text) > limit else "")
