"""The command-line options every verb that runs agents takes for language-model agents.

``--temperature``, ``--max-tokens``, ``--concurrency``, ``--constrain`` (and ``--in-flight``)
apply to every LLM agent spec of the command that does not set the option itself; they are
written into the spec string (``llm?temperature=0.7``), which is the agent's name in result
rows, so every row records the options it ran with. Given with no LLM agent, they are refused
(they would be ignored).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence


def _positive(kind: type) -> object:
    def parse(text: str) -> object:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


#: Episodes of a language-model agent run at once when ``--in-flight`` is not given.
DEFAULT_IN_FLIGHT = 8
#: The ``dest`` of every option :func:`add_llm_arguments` adds.
LLM_OPTIONS = ("temperature", "max_tokens", "concurrency", "constrain", "in_flight")


def add_llm_arguments(parser: argparse.ArgumentParser, in_flight: bool = True) -> None:
    """The LLM options; ``in_flight=False`` leaves out ``--in-flight`` (a verb that plays one
    episode at a time, such as ``export``, would ignore it)."""
    group = parser.add_argument_group("language-model agents (llm, hf:PATH, openai:MODEL@URL)")
    group.add_argument(
        "--temperature",
        type=_non_negative_float,
        default=None,
        help="sampling temperature (default 0: greedy)",
    )
    group.add_argument(
        "--max-tokens", type=_positive(int), default=None, help="most tokens per reply (default 64)"
    )
    group.add_argument(
        "--concurrency",
        type=_positive(int),
        default=None,
        help="most requests in flight per server (default 8)",
    )
    group.add_argument(
        "--constrain",
        action="store_true",
        help="send each step's action grammar as structured output (vLLM): no format errors",
    )
    if in_flight:
        group.add_argument(
            "--in-flight",
            type=_positive(int),
            default=None,
            help=f"episodes of an LLM agent run at once (default {DEFAULT_IN_FLIGHT})",
        )


def apply_llm_options(agents: Sequence[str], args: argparse.Namespace) -> list[str]:
    """The agent specs with the command's LLM options written into the LLM ones; an LLM option
    given with no LLM agent is an :class:`~harness_gym.llm.spec.LLMSpecError`."""
    from harness_gym.llm.spec import is_llm_spec, parse_llm_spec

    options = {
        "temperature": args.temperature,
        "max_tokens": args.max_tokens,
        "concurrency": args.concurrency,
        "constrain": True if args.constrain else None,
    }
    asked = {**options, "in_flight": getattr(args, "in_flight", None)}
    given = [k for k, v in asked.items() if v is not None]
    if given and not any(isinstance(a, str) and is_llm_spec(a) for a in agents):
        from harness_gym.llm.spec import LLMSpecError

        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise LLMSpecError(
            f"{flags} appl{'ies' if len(given) == 1 else 'y'} to language-model agents (llm, hf:PATH, "
            f"openai:MODEL@URL), and no --agent is one; drop {flags} or add such an agent"
        )
    return [
        parse_llm_spec(a).with_defaults(options).text if isinstance(a, str) and is_llm_spec(a) else a
        for a in agents
    ]
