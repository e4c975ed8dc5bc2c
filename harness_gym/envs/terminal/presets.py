"""Terminal presets modeled on real coding harnesses (see the table in ``docs/terminal.md``).

Each is a :class:`~harness_gym.core.harness.Harness` whose terminal factors ride in
``family_options: {terminal: ...}``; they are registered with every terminal task as
``harness_gym/Term<Task>-<Preset>-v0`` and accepted by name as ``harness=`` of a terminal
env. The canonical terminal harness is the generic ``Json`` preset (default terminal
options). What each preset reproduces, and what it cannot:

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

#: The presets the oracle and the docs compare side by side: canonical first.
CODING_PRESETS: tuple[str, ...] = ("Json", *TERMINAL_PRESETS)


def terminal_preset(name: str) -> Harness:
    """A terminal preset by name (a generic preset name works too, e.g. ``Json``)."""
    if name in TERMINAL_PRESETS:
        return TERMINAL_PRESETS[name]
    from harness_gym.core.presets import get_preset

    return get_preset(name)
