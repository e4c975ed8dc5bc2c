"""``harness-gym serve``: an OpenEnv-compatible server (HTTP + WebSocket) for harness envs.

    harness-gym serve --task ClickButton --harness Json --port 8000
    harness-gym serve --task ClickButton --task EnterText --max-sessions 32 --session-timeout 600

Each reset may choose ``seed``, ``task`` and ``harness`` (preset name, spec object or id).
Needs the ``openenv`` extra. See :mod:`harness_gym.integrations.openenv_server`.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from harness_gym.cli.common import CommandError, non_negative_float, positive_int, tcp_port

HELP = "serve harness envs over openenv's HTTP / WebSocket protocol"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--task", action="append", help="task id a reset may choose (repeatable; the first is the default)"
    )
    parser.add_argument("--harness", default="Json", help="the default harness (preset name or YAML path)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=tcp_port(1), default=8000)
    parser.add_argument(
        "--max-sessions", type=positive_int, default=8, help="most WebSocket sessions at once"
    )
    parser.add_argument(
        "--session-timeout",
        type=non_negative_float,
        default=300.0,
        help="seconds a session with no connected WebSocket may stay idle (0: never)",
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    from harness_gym.core.presets import resolve_harness
    from harness_gym.core.registry import family_of, make_env

    if args.port > 65535:
        raise CommandError(f"--port must be <= 65535, got {args.port}")
    if args.session_timeout < 0:
        raise CommandError(f"--session-timeout must be >= 0, got {args.session_timeout}")
    tasks = args.task or ["ClickButton"]
    try:  # a family's own preset (the terminal's MiniSweAgentStyle, say) is a name for its tasks
        harness = resolve_harness(args.harness, family=family_of(tasks[0]))
    except KeyError as err:
        raise CommandError(f"--task: {err.args[0]}") from None
    for task in tasks:  # unknown tasks and harnesses fail here, before the port opens
        try:
            make_env(task, harness).close()
        except KeyError as err:
            raise CommandError(f"--task: {err.args[0]}") from None
    try:
        from harness_gym.integrations.openenv_server import serve
    except ImportError as err:
        raise CommandError(
            f"serve needs openenv ({err.name} is missing): pip install 'harness-gym[openenv]' "
            "(in its own venv: see docs/integrations.md)"
        ) from None
    out.write(f"serving {', '.join(tasks)} on http://{args.host}:{args.port} (openenv protocol)\n")
    out.flush()
    sys.stdout.flush()
    serve(
        host=args.host,
        port=args.port,
        task=tasks[0],
        harness=harness.to_dict(full=False),
        tasks=tasks,
        max_sessions=args.max_sessions,
        session_timeout=args.session_timeout or None,
    )
    return 0
