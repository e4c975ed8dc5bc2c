"""Terminal presets modeled on real coding harnesses (see the table in ``docs/terminal.md``).

Each is a :class:`~harness_gym.core.harness.Harness` whose terminal factors ride in
``family_options: {terminal: ...}``. They stay out of the generic preset table (which every
task takes): :func:`harness_gym.envs.terminal.register` registers them as the family's own
presets (``register_family(presets=...)``), so it registers
``harness_gym/Term<Task>-<Preset>-v0`` for every terminal task, a terminal env takes the names
as ``harness=``, and ``harness-gym list presets`` shows them as terminal conventions. The
canonical terminal harness is the generic ``Json`` preset (default terminal options). What
each preset reproduces, and what it cannot:

- ``MiniSweAgentStyle`` (mini-swe-agent): bash only; each reply holds one fenced ```bash
  block (prose around it allowed); every command runs in a fresh subshell; results as
  ``<returncode>`` and ``<output>`` with long output cut to head and tail; completion by
  running ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``; the whole chat as context.
  Not reproduced: its Jinja templates verbatim, the ``<warning>`` text on long output.
- ``TerminusStyle`` (Terminus 2, Terminal-Bench): the reply is a JSON object with analysis,
  plan, commands (keystrokes) and ``task_complete``; one persistent shell; the terminal
  output without exit code or cwd, cut to 10000 characters (head and tail). Not reproduced:
  tmux (keystrokes run as one bash command line; ``duration`` is ignored), the screen
  capture, interactive programs.
- ``OpenHandsStyle`` (OpenHands CodeAct): native function calling with a shell tool
  ``execute_bash``, file-editor tools ``view`` and ``create`` (the ``str_replace_editor``
  commands the task has actions for) and ``finish``; a persistent shell; output, then the
  working directory and exit code, cut to 9500 characters (head and tail). Not reproduced:
  the editor's ``str_replace``/``insert``/``undo_edit`` commands (one ``str_replace_editor``
  tool with a ``command`` enum becomes one tool per command), ``is_input``, ``timeout``.
"""

from __future__ import annotations

from harness_gym.core.harness import Harness
from harness_gym.core.presets import Preset

MINI_SWE_AGENT_TEMPLATE = (
    "You are a helpful assistant that can interact with a computer.\n\n"
    "Observations are written in {format}. Tools:\n{tools}\n\n{format_hint}\n\n"
    "Directory or environment variable changes are not persistent: every action is executed "
    "in a new subshell. Failure to follow these rules will cause your response to be rejected."
)
TERMINUS_TEMPLATE = (
    "You are an AI assistant tasked with solving command-line tasks in a Linux environment. "
    "You will be given a task description and the output from previously executed commands. "
    "Your goal is to solve the task by providing batches of shell commands.\n\n"
    "Observations are written in {format}.\n{tools}\n\n{format_hint}"
)

TERMINAL_PRESETS: dict[str, Harness] = {
    "MiniSweAgentStyle": Harness(
        obs_format="markdown",
        parser="lenient",
        context="transcript",
        history_window="all",
        prompt_template=MINI_SWE_AGENT_TEMPLATE,
        family_options={
            "terminal": {
                "shell": "fresh",
                "reply": "bash_block",
                "completion": "sentinel",
                "result_format": "tagged",
                "max_output_chars": 10000,
                "keep": "both",
                "show_cwd": False,
            }
        },
    ),
    "TerminusStyle": Harness(
        obs_format="markdown",
        parser="lenient",
        context="transcript",
        history_window="all",
        prompt_template=TERMINUS_TEMPLATE,
        family_options={
            "terminal": {
                "shell": "persistent",
                "reply": "terminus_json",
                "completion": "flag",
                "result_format": "raw",
                "max_output_chars": 10000,
                "keep": "both",
                "show_cwd": False,
                "show_exit_code": False,
            }
        },
    ),
    "OpenHandsStyle": Harness(
        tool_channel="native",
        context="transcript",
        history_window="all",
        rename_tools={"run": "execute_bash", "read_file": "view", "write_file": "create", "submit": "finish"},
        rename_args={"content": "file_text"},
        family_options={
            "terminal": {
                "shell": "persistent",
                "result_format": "raw",
                "max_output_chars": 9500,
                "keep": "both",
                "show_cwd": True,
                "show_exit_code": True,
            }
        },
    ),
}

MINI_SWE_AGENT_SOURCES = (
    "SWE-agent/mini-swe-agent: src/minisweagent/config/mini_textbased.yaml (one bash block, "
    "new subshell per action, echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT, <returncode>/<output>, "
    "head 5000 + tail 5000 of output over 10000 characters)",
    "SWE-agent/mini-swe-agent: src/minisweagent/models/utils/actions_text.py (parse_regex_actions: "
    "exactly one action found by regex, else a format error)",
)
TERMINUS_SOURCES = (
    "laude-institute/terminal-bench: terminal_bench/agents/terminus_2/terminus_json_plain_parser.py "
    "(required fields analysis/plan/commands, keystrokes and duration, task_complete, extra text "
    "around the object tolerated with a warning)",
    "laude-institute/terminal-bench: terminal_bench/agents/terminus_2/terminus_2.py "
    "(_limit_output_length: 10000 bytes, head and tail halves; completion confirmed by a second reply)",
)
OPENHANDS_SOURCES = (
    "All-Hands-AI/OpenHands: openhands/agenthub/codeact_agent/tools/bash.py (execute_bash), "
    "tools/str_replace_editor.py (view/create/str_replace/insert/undo_edit), tools/finish.py",
    "All-Hands-AI/OpenHands: openhands/events/observation/commands.py (CmdOutputObservation: "
    "MAX_CMD_OUTPUT_SIZE 9500 head+tail, [Current working directory: ...], "
    "[Command finished with exit code N])",
)
#: Per preset: (summary, what it reproduces, what it cannot, the source files it follows).
PRESET_NOTES: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...]]] = {
    "MiniSweAgentStyle": (
        "mini-swe-agent: one fenced bash block per reply, sentinel submits, fresh subshells",
        "mini-swe-agent's text-based loop: bash only; exactly one fenced code block per reply "
        "(prose such as a THOUGHT around it), several or none a format error; every command in a "
        "new subshell; results as <returncode> and <output>, over 10000 characters cut to the "
        "head and tail halves; completion by running echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; "
        "the whole chat as context",
        (
            "its Jinja system and instance templates verbatim (the prompt says the same rules)",
            "the <warning> text shown with long output",
            "the block's info string is bash (v1) rather than mswea_bash_command (v2 text-based)",
        ),
        MINI_SWE_AGENT_SOURCES,
    ),
    "TerminusStyle": (
        "Terminus 2: a JSON reply with analysis, plan, commands and a task_complete flag",
        "Terminus 2's JSON reply: analysis, plan, commands (keystrokes, duration) and "
        "task_complete; extra text around the object tolerated (lenient parser); one persistent "
        "shell; the terminal output without exit code or working directory, over 10000 "
        "characters cut to head and tail; completion by task_complete with no commands (a "
        "reply that also carries commands runs them first, as Terminus asks to confirm)",
        (
            "tmux: keystrokes run as one bash command line, so interactive programs and "
            "control keys (C-c) do not work and duration is ignored",
            "the screen capture (incremental output) and its XML reply variant",
        ),
        TERMINUS_SOURCES,
    ),
    "OpenHandsStyle": (
        "OpenHands CodeAct: native function calls to execute_bash, a file editor and finish",
        "OpenHands CodeAct's function calling: tools execute_bash(command), the file editor's "
        "view(path) and create(path, file_text), finish(); one persistent shell; output, "
        "then the working directory and exit code, over 9500 characters cut to head and tail",
        (
            "one str_replace_editor tool with a command enum: each editor command the task has an "
            "action for is its own tool (str_replace, insert, undo_edit have none)",
            "execute_bash's is_input and timeout arguments, finish's message, think",
            "its exact observation suffixes ([Command finished with exit code N]): the raw "
            "result format says [exit code: N] and [cwd: ...]",
        ),
        OPENHANDS_SOURCES,
    ),
}
#: The terminal presets as ``register_family(presets=...)`` takes them (``list presets``).
TERMINAL_PRESET_INFO: dict[str, Preset] = {
    name: Preset(name, harness, "convention", PRESET_NOTES[name][0], "terminal", *PRESET_NOTES[name][1:])
    for name, harness in TERMINAL_PRESETS.items()
}
#: The presets the oracle and the docs compare side by side: canonical first.
CODING_PRESETS: tuple[str, ...] = ("Json", *TERMINAL_PRESETS)


def terminal_preset(name: str) -> Harness:
    """A terminal preset by name (a generic preset name works too, e.g. ``Json``)."""
    if name in TERMINAL_PRESETS:
        return TERMINAL_PRESETS[name]
    from harness_gym.core.presets import get_preset

    return get_preset(name)
