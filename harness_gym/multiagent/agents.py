"""Checks of the caller's agent names and action dicts, shared by the multi-agent envs.

These are programming errors of the caller (a wrong agent, a wrong dict), so they raise with
a message naming the fix; they run before anything steps, so no agent's episode is touched.
Bad agent *text* never raises: it follows the agent's harness's invalid-action policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness_gym.core.harness import Harness


class AgentError(ValueError):
    """The caller named an unknown agent, left one out, or let one act out of turn."""


def check_agent(agent: Any, possible: Sequence[str]) -> str:
    """``agent`` if it is one of ``possible``, else an :class:`AgentError` listing them."""
    if not isinstance(agent, str) or agent not in possible:
        raise AgentError(f"unknown agent {agent!r}; this env's agents are {list(possible)}")
    return agent


def check_parallel_actions(
    actions: Any, live: Sequence[str], possible: Sequence[str], started: bool = True, what: str = "action"
) -> None:
    """A parallel action dict must map every live agent, and only live agents, to a str."""
    if not started:
        raise RuntimeError("call reset() before step()")
    if not isinstance(actions, Mapping):
        raise TypeError(
            f"step takes a dict from agent name to {what} text, got {type(actions).__name__}; "
            f"e.g. {{{live[0] if live else 'agent_0'!r}: '...'}}"
        )
    unknown = [a for a in actions if a not in possible]
    if unknown:
        raise AgentError(f"unknown agent(s) {unknown} in the action dict; agents: {list(possible)}")
    finished = [a for a in actions if a not in live]
    if finished:
        raise AgentError(
            f"agent(s) {finished} already finished their episode and cannot act (acting out of "
            f"turn); live agents: {list(live)}"
        )
    missing = [a for a in live if a not in actions]
    if missing:
        raise AgentError(
            f"the action dict lacks live agent(s) {missing}; every live agent acts each step "
            f"(live: {list(live)})"
        )
    wrong = {a: type(v).__name__ for a, v in actions.items() if not isinstance(v, str)}
    if wrong:
        raise TypeError(f"{what}s are the agents' output texts (str); got {wrong}")


def agent_names(given: Iterable[Any], harnesses: Sequence[Harness]) -> list[str]:
    """One name per harness: the preset name when given as one, else the harness id; a
    repeated name gets ``_2``, ``_3`` ... so every agent is distinct."""
    names: list[str] = []
    for spec, harness in zip(given, harnesses, strict=True):
        base = spec if isinstance(spec, str) and not spec.endswith((".yaml", ".yml")) else harness.id
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}_{n}"
        names.append(name)
    return names
