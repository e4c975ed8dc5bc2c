"""The parse status of one attempted action: ``ok``, or the kind of malformed reply.

Defined once here; the rows count each status per episode (``parse_status``), recorded
trajectories carry it per step, and the report gives its rate per factor level and agent.
A reply that parsed but that the task refused (``illegal_action``) is ``ok`` here: the parser
understood it, the policy chose badly.

The statuses refine the env's ``error_kind`` (:class:`~harness_gym.core.tools.errors.ActionError`):
``malformed`` is split by what the parser said into ``invalid_json`` and ``unclosed_call``
(anything else stays ``malformed``), the argument errors are ``bad_argument``, and a reply cut at
the model's token limit (the language-model agent sends it as an empty reply) is ``truncated``.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Every parse status, ``ok`` first.
PARSE_STATUSES = (
    "ok",
    "invalid_json",
    "unclosed_call",
    "malformed",
    "unknown_tool",
    "bad_argument",
    "multiple_actions",
    "empty",
    "truncated",
    "too_long",
)

#: The env's error kinds that are not the parser's: the reply parsed, the task refused it.
POLICY_KINDS = frozenset({"illegal_action"})

_BY_KIND = {
    "missing_argument": "bad_argument",
    "extra_argument": "bad_argument",
    "wrong_type": "bad_argument",
    "confidence_range": "bad_argument",
    "empty_instruction": "empty",
    "empty_proposal": "empty",
}


def parse_status(error_kind: str | None, message: str | None = None) -> str:
    """The parse status of a step whose env ``info`` said ``error_kind`` / ``last_error``."""
    if error_kind is None or error_kind in POLICY_KINDS:
        return "ok"
    if error_kind == "malformed":
        text = (message or "").lower()
        if "json" in text:
            return "invalid_json"
        if "not closed" in text or "unclosed" in text or "unterminated" in text:
            return "unclosed_call"
        return "malformed"
    status = _BY_KIND.get(error_kind, error_kind)
    return status if status in PARSE_STATUSES else "malformed"


def failures(counts: Mapping[str, int] | None) -> int:
    """How many of the counted actions the parser refused (every status but ``ok``)."""
    return sum(n for status, n in (counts or {}).items() if status != "ok")


def mark_truncated(counts: dict[str, int], truncated: int) -> dict[str, int]:
    """Move ``truncated`` of the ``empty`` replies to ``truncated`` (a language model's reply cut
    at its token limit reaches the env as an empty reply)."""
    moved = min(int(truncated or 0), counts.get("empty", 0))
    if moved:
        counts["empty"] -= moved
        if not counts["empty"]:
            del counts["empty"]
        counts["truncated"] = counts.get("truncated", 0) + moved
    return counts
