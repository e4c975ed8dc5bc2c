"""Reply conventions of real coding harnesses: how an agent's whole reply carries its command.

The generic harness writes an action as one tool call in its ``tool_style``. Some coding
harnesses have a reply convention of their own instead; the terminal factor ``reply`` picks
one, and only ``run`` and the completion signal can be written in it:

- ``bash_block`` (mini-swe-agent): the reply holds exactly one fenced code block whose body is
  the command; prose around it (the THOUGHT) is allowed, several blocks are an error.
- ``terminus_json`` (Terminus): the reply is a JSON object ``{"analysis", "plan", "commands":
  [{"keystrokes", "duration"}], "task_complete"}``; the keystrokes of all commands form one
  command line; ``task_complete: true`` with no commands ends the episode (the completion
  flag; with commands, they run first and completion needs a reply without commands, as
  Terminus 2 asks to confirm). ``strict`` parsing takes the object alone; ``lenient``
  tolerates text around it, as Terminus does (with a warning).

:func:`write_reply` and :func:`read_reply` are inverse on ``run`` and ``submit`` (``submit``
written as the sentinel command under ``bash_block``).
"""

from __future__ import annotations

import json
import re

from harness_gym.core.task import Action
from harness_gym.core.tools import ActionError, DuplicateKeyError, load_json, preview

REPLIES = ("tool", "bash_block", "terminus_json")
#: The info string of the fenced block (mini-swe-agent v1 wrote ```bash).
FENCE_LANGUAGE = "bash"
_FENCE = re.compile(r"```([A-Za-z0-9_-]*)[ \t]*\n(.*?)```", re.DOTALL)
TERMINUS_FIELDS = ("analysis", "plan", "commands")

TOOLS_TEXT = {
    "bash_block": (
        "bash: run one shell command line (several may be joined with && or ||) in the sandbox; "
        "you see its exit code and output."
    ),
    "terminus_json": (
        "commands: keystrokes sent to a bash shell in the sandbox (a list of objects "
        '{"keystrokes": "...", "duration": seconds}; end each command with a newline); you '
        "see the terminal output."
    ),
}
HINTS = {
    "bash_block": (
        "Your reply must contain exactly ONE bash code block with ONE command (or commands "
        "joined with && or ||). Explain your reasoning first, then write the block, e.g.\n"
        "THOUGHT: list the files.\n\n```bash\nls -la\n```"
    ),
    "terminus_json": (
        "Reply with one JSON object with the fields analysis, plan, commands and task_complete, "
        'e.g. {"analysis": "The directory is unknown.", "plan": "List it.", "commands": '
        '[{"keystrokes": "ls -la\\n", "duration": 0.1}], "task_complete": false}. When the '
        'task is done, reply with "commands": [] and "task_complete": true.'
    ),
}


def write_reply(reply: str, action: Action) -> str:
    """``action`` (``run`` or ``submit``) written in the ``reply`` convention."""
    if reply == "bash_block" and action.name == "run":
        return f"```{FENCE_LANGUAGE}\n{action['command']}\n```"
    if reply == "terminus_json" and action.name in ("run", "submit"):
        commands = [{"keystrokes": action["command"] + "\n", "duration": 1.0}] if action.name == "run" else []
        return json.dumps(
            {"analysis": "", "plan": "", "commands": commands, "task_complete": action.name == "submit"},
            ensure_ascii=False,
        )
    raise KeyError(f"{action.name!r} cannot be written as a {reply} reply")


def read_reply(reply: str, text: str, lenient: bool) -> Action:
    """The action a ``reply``-convention reply carries, or an :class:`ActionError`."""
    if not text.strip():
        raise ActionError("empty", "empty reply")
    if reply == "bash_block":
        return _read_block(text)
    return _read_terminus(text, lenient)


def _read_block(text: str) -> Action:
    blocks = _FENCE.findall(text)
    if len(blocks) != 1:
        kind = "multiple_actions" if blocks else "malformed"
        raise ActionError(
            kind,
            f"found {len(blocks)} code blocks; your reply must contain exactly ONE fenced block "
            f"(```{FENCE_LANGUAGE} ... ```) holding one command",
        )
    language, body = blocks[0]
    if language not in ("", FENCE_LANGUAGE, "sh", "shell"):
        raise ActionError(
            "unknown_tool", f"the code block is {language!r}; write a ```{FENCE_LANGUAGE} block"
        )
    command = body[:-1] if body.endswith("\n") else body
    if not command.strip():
        raise ActionError("empty", "the code block is empty: put one command in it")
    return Action.of("run", command=command)


def _read_terminus(text: str, lenient: bool) -> Action:
    body = text.strip()
    objects = _objects(body)
    if len(objects) >= 2 and (lenient or _only_separators(body, objects)):
        if sum(1 for start, end in objects if _is_object(body[start:end])) >= 2:
            raise ActionError(
                "multiple_actions",
                f"found {len(objects)} JSON objects; reply with exactly ONE object holding all commands",
            )
    if lenient and objects:
        body = body[objects[0][0] : objects[0][1]]
    try:
        data = load_json(body)
    except DuplicateKeyError as err:
        raise ActionError("malformed", f"Invalid JSON: {err}; give each field once") from None
    except (ValueError, RecursionError) as err:
        raise ActionError("malformed", f"Invalid JSON: {err} | Content: {preview(body)}") from None
    if not isinstance(data, dict):
        raise ActionError("malformed", "Response must be a JSON object")
    missing = [f for f in TERMINUS_FIELDS if f not in data]
    if missing:
        raise ActionError("missing_argument", f"Missing required fields: {', '.join(missing)}")
    commands = data["commands"]
    if not isinstance(commands, list):
        raise ActionError("wrong_type", "Field 'commands' must be an array")
    keys = []
    for i, command in enumerate(commands, 1):
        if not isinstance(command, dict) or not isinstance(command.get("keystrokes"), str):
            raise ActionError("wrong_type", f"Command {i} must be an object with a string 'keystrokes' field")
        keys.append(command["keystrokes"])
    complete = data.get("task_complete", False)
    if lenient and isinstance(complete, str):  # Terminus 2's own reading of a string (docs/terminal.md)
        complete = complete.lower() in ("true", "1", "yes")
    if not isinstance(complete, bool):
        raise ActionError(
            "wrong_type", f"Field 'task_complete' must be true or false, got {preview(repr(complete))}"
        )
    line = "".join(keys)
    if line.strip():
        return Action.of("run", command=line[:-1] if line.endswith("\n") else line)
    if complete is True:
        return Action.of("submit")
    raise ActionError("empty", "no commands and task_complete is false: send keystrokes or finish")


_BETWEEN = " \t\r\n,;[]"


def _only_separators(text: str, spans: list[tuple[int, int]]) -> bool:
    ends = [0] + [end for _, end in spans]
    starts = [start for start, _ in spans] + [len(text)]
    return not any(text[a:b].strip(_BETWEEN) for a, b in zip(ends, starts))


def _is_object(text: str) -> bool:
    try:
        return isinstance(load_json(text), dict)
    except (ValueError, RecursionError):
        return False


def _objects(text: str) -> list[tuple[int, int]]:
    """The spans of the balanced top-level ``{...}`` of ``text`` (strings and escapes
    respected), in linear time; the strict reader also asks whether only separators lie
    between them."""
    spans: list[tuple[int, int]] = []
    start, depth, in_string, escape = -1, 0, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = start >= 0
        elif ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
    return spans
