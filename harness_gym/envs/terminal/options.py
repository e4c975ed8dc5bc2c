"""Terminal harness factors: how a coding harness runs and shows commands.

These factors are specific to the terminal family: :class:`TerminalOptions` validates them,
and a harness carries their non-default levels as ``family_options: {terminal: {...}}``, so
they are part of the harness spec and id (a harness that sets none keeps its id). The env
also records them in ``info["terminal"]`` and ``info["terminal_id"]``.

Presentation (result format, truncation, cwd / exit code, completion signal) is applied by
:class:`TerminalBoundHarness` on the harness side of the boundary; the world part (fresh or
persistent shell) is handed to the task, which owns the sandbox.

Whether file tools exist beside the shell is the generic ``drop_tools`` factor
(``drop_tools=("read_file", "write_file")``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness_gym.core.harness import BoundHarness, Harness, HarnessSpecError, register_family_options
from harness_gym.core.task import Action, ActionSpec
from harness_gym.envs.terminal.replies import HINTS, REPLIES, TOOLS_TEXT, read_reply, write_reply

SENTINEL = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

OPTION_LEVELS: dict[str, tuple[Any, ...]] = {
    "shell": ("fresh", "persistent"),
    "result_format": ("raw", "json", "xml", "tagged"),
    "keep": ("head", "tail", "both"),
    "completion": ("tool", "sentinel", "flag"),
    "reply": REPLIES,
}
#: Tools a reply convention cannot carry (only ``run`` and the completion signal).
FILE_TOOLS = ("read_file", "write_file")


@dataclass(frozen=True)
class TerminalOptions:
    """The terminal factors of a harness.

    Attributes:
        shell: ``fresh`` (every command in a new ``bash -c`` in ``/app``) or ``persistent``
            (one bash session per episode: cwd, variables and functions carry over).
        result_format: how a command's result is shown: ``raw`` (stdout, then stderr, as
            text), ``json`` (an object with stdout/stderr/exit_code...), ``xml`` (a block) or
            ``tagged`` (``<returncode>``, then ``<output>`` with stdout and stderr, as
            mini-swe-agent shows it).
        max_output_chars: shown characters of each of stdout and stderr (at least 64).
        keep: which end of longer output is shown: ``head``, ``tail`` or ``both`` (half each).
        show_cwd: whether the result shows the working directory after the command.
        show_exit_code: whether the result shows the exit code.
        completion: how the agent ends the episode: ``tool`` (the ``submit`` tool) or
            ``sentinel`` (running exactly ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``;
            the ``submit`` tool is then hidden) or ``flag`` (the ``task_complete`` flag of a
            ``terminus_json`` reply).
        reply: ``tool`` (the harness's tool style and channel) or a coding harness's reply
            convention (:mod:`~harness_gym.envs.terminal.replies`): ``bash_block`` (one
            fenced block; needs ``completion: sentinel``) or ``terminus_json`` (needs
            ``completion: flag``). Under a convention only ``run`` and completion exist.
    """

    shell: str = "fresh"
    result_format: str = "raw"
    max_output_chars: int = 4000
    keep: str = "both"
    show_cwd: bool = True
    show_exit_code: bool = True
    completion: str = "tool"
    reply: str = "tool"

    def __post_init__(self) -> None:
        for name, levels in OPTION_LEVELS.items():
            if getattr(self, name) not in levels:
                raise HarnessSpecError(
                    f"unknown level {getattr(self, name)!r} for terminal factor {name!r}; "
                    f"valid levels: {list(levels)}"
                )
        n = self.max_output_chars
        if isinstance(n, bool) or not isinstance(n, int) or n < 64:
            raise HarnessSpecError(f"max_output_chars must be an integer >= 64, got {n!r}")
        for name in ("show_cwd", "show_exit_code"):
            if not isinstance(getattr(self, name), bool):
                raise HarnessSpecError(f"{name} must be true or false, got {getattr(self, name)!r}")
        needs = {"bash_block": "sentinel", "terminus_json": "flag"}
        if self.reply in needs and self.completion != needs[self.reply]:
            raise HarnessSpecError(
                f"reply {self.reply!r} signals completion by completion: {needs[self.reply]}, "
                f"not {self.completion!r}"
            )
        if self.completion == "flag" and self.reply != "terminus_json":
            raise HarnessSpecError("completion 'flag' is the task_complete flag of reply: terminus_json")

    @classmethod
    def from_any(cls, value: TerminalOptions | Mapping[str, Any] | None) -> TerminalOptions:
        if value is None:
            return cls()
        if isinstance(value, TerminalOptions):
            return value
        if isinstance(value, Mapping):
            names = [f.name for f in dataclasses.fields(cls)]
            unknown = [k for k in value if k not in names]
            if unknown:
                raise HarnessSpecError(f"unknown terminal factor(s) {unknown}; valid factors: {names}")
            return cls(**dict(value))
        raise TypeError(f"terminal options must be a TerminalOptions or a dict, got {type(value).__name__}")

    def to_dict(self, full: bool = True) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if not full:
            default = dataclasses.asdict(TerminalOptions())
            out = {k: v for k, v in out.items() if v != default[k]}
        return out

    @property
    def id(self) -> str:
        blob = json.dumps(self.to_dict(full=False), sort_keys=True, separators=(",", ":"))
        return "t-" + hashlib.sha256(blob.encode()).hexdigest()[:12]

    def replace(self, **changes: Any) -> TerminalOptions:
        return TerminalOptions.from_any({**self.to_dict(), **changes})


#: The family name under which a harness carries terminal options (``family_options``).
FAMILY = "terminal"


def normalize_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Checked terminal options with the default levels left out (the harness's validator)."""
    return TerminalOptions.from_any(options).to_dict(full=False)


register_family_options(FAMILY, normalize_options)


def harness_options(harness: Harness) -> TerminalOptions:
    """The terminal options a harness carries (defaults for those it does not set)."""
    return TerminalOptions.from_any(harness.family(FAMILY))


def with_options(harness: Harness, options: TerminalOptions | Mapping[str, Any] | None) -> Harness:
    """``harness`` with terminal options set (each given option replaces the harness's own)."""
    if options is None:
        return harness
    given = options.to_dict(full=False) if isinstance(options, TerminalOptions) else dict(options)
    merged = {**harness.family(FAMILY), **given}
    families = {**{f: dict(o) for f, o in harness.family_options}, FAMILY: merged}
    return harness.replace(family_options=families)


def cut(text: str, limit: int, keep: str) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters keeping ``keep``; returns (shown, omitted count)."""
    if len(text) <= limit:
        return text, 0
    omitted = len(text) - limit
    if keep == "head":
        return text[:limit] + f"\n[... {omitted} more characters]", omitted
    if keep == "tail":
        return f"[{omitted} earlier characters ...]\n" + text[-limit:], omitted
    half = limit // 2
    return text[:half] + f"\n[... {omitted} characters omitted ...]\n" + text[
        len(text) - (limit - half) :
    ], omitted


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def present_result(result: Mapping[str, Any] | None, options: TerminalOptions) -> Any:
    """The ``result`` field as this harness shows it (a string, or an object for ``json``)."""
    if not result:
        return "" if options.result_format != "json" else {}
    kind = result.get("kind", "run")
    lim, keep = options.max_output_chars, options.keep
    if kind != "run":  # read_file / write_file / submit: one text body
        body, _ = cut(str(result.get("text", "")), lim, keep)
        if options.result_format == "json":
            return {"tool": kind, "ok": bool(result.get("ok", True)), "text": body}
        if options.result_format in ("xml", "tagged"):
            return f'<{kind} ok="{str(bool(result.get("ok", True))).lower()}">{_xml(body)}</{kind}>'
        return body
    stdout, _ = cut(str(result.get("stdout", "")), lim, keep)
    stderr, _ = cut(str(result.get("stderr", "")), lim, keep)
    notes = list(result.get("notes", ()))
    if options.result_format == "json":
        out: dict[str, Any] = {"stdout": stdout, "stderr": stderr}
        if options.show_exit_code:
            out["exit_code"] = result.get("exit_code")
        if options.show_cwd:
            out["cwd"] = result.get("cwd")
        if notes:
            out["notes"] = notes
        return out
    if options.result_format == "tagged":
        parts = []
        if options.show_exit_code:
            parts.append(f"<returncode>{result.get('exit_code')}</returncode>")
        if options.show_cwd:
            parts.append(f"<cwd>{result.get('cwd')}</cwd>")
        parts += [f"<note>{n}</note>" for n in notes]
        return "\n".join([*parts, f"<output>\n{stdout}{stderr}</output>"])
    if options.result_format == "xml":
        attrs = ""
        if options.show_exit_code:
            attrs += f' exit_code="{result.get("exit_code")}"'
        if options.show_cwd:
            attrs += f' cwd="{_xml(str(result.get("cwd")))}"'
        parts = [f"<result{attrs}>", f"<stdout>{_xml(stdout)}</stdout>", f"<stderr>{_xml(stderr)}</stderr>"]
        parts += [f"<note>{_xml(n)}</note>" for n in notes]
        return "".join(parts) + "</result>"
    lines = [stdout.rstrip("\n")] if stdout else []
    if stderr:
        lines.append(stderr.rstrip("\n"))
    lines += [f"[{n}]" for n in notes]
    if options.show_exit_code:
        lines.append(f"[exit code: {result.get('exit_code')}]")
    if options.show_cwd:
        lines.append(f"[cwd: {result.get('cwd')}]")
    return "\n".join(lines)


class TerminalBoundHarness(BoundHarness):
    """A harness bound to a terminal task, with the terminal factors applied on top.

    Completion by sentinel hides ``submit`` and writes it as the sentinel command; a reply
    convention (``bash_block``, ``terminus_json``) replaces the tool syntax for the whole
    reply, so only ``run`` and completion are expressible and no native tools are sent.
    """

    def __init__(
        self,
        harness: Harness,
        field_names: tuple[str, ...],
        action_specs: tuple[ActionSpec, ...],
        options: TerminalOptions,
    ) -> None:
        self.options = options
        self.reply = options.reply
        names = [s.name for s in action_specs]
        self._sentinel = options.completion == "sentinel" and "submit" in names
        hidden = {"submit"} if self._sentinel or self.reply == "terminus_json" else set()
        if self.reply != "tool":
            if harness.tool_channel == "native":
                raise HarnessSpecError(
                    f"reply {self.reply!r} is a text convention; it cannot use tool_channel: native"
                )
            hidden |= set(FILE_TOOLS)
        shown = harness
        if hidden:
            renames = tuple(p for p in harness.rename_tools if p[0] not in hidden)
            drop = tuple(sorted(set(harness.drop_tools) | (hidden & set(names))))
            shown = harness.replace(drop_tools=drop, rename_tools=renames)
        super().__init__(shown, field_names, action_specs)
        self.harness = harness
        if self.reply != "tool":
            from harness_gym.core.harness import FORMAT_NAMES, PROMPT_TEMPLATES

            template = PROMPT_TEMPLATES.get(harness.prompt_template, harness.prompt_template)
            self.system_prompt = template.format(
                format=FORMAT_NAMES.get(harness.obs_format, harness.obs_format),
                tools=TOOLS_TEXT[self.reply],
                format_hint=HINTS[self.reply],
            )
            self.openai_tools = []
            self._reply_tools = ("run", "submit") if "run" in self.tool_names else ()
        if self._sentinel:
            how = "in a code block" if self.reply == "bash_block" else "with the run tool"
            self.system_prompt += (
                f"\n\nWhen the task is done, signal completion by running exactly this command "
                f"({how}), on its own: {SENTINEL}"
            )

    def render(self, fields: Mapping[str, Any], **kwargs: Any) -> str:
        return super().render(self.present(fields), **kwargs)

    def present(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(fields)
        if "result" in out:
            out["result"] = present_result(out["result"], self.options)
        return out

    def ordered_fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        # History entries store what the agent saw (the presented result).
        return (
            super().ordered_fields(self.present(fields))
            if "result" in fields and isinstance(fields["result"], Mapping)
            else super().ordered_fields(fields)
        )

    def _as_run(self, action: Action) -> Action:
        return Action.of("run", command=SENTINEL) if self._sentinel and action.name == "submit" else action

    def format_action(self, action: Action) -> str:
        action = self._as_run(action)
        if self.reply != "tool":
            return write_reply(self.reply, action)
        return super().format_action(action)

    def example_reply(self, action: Action) -> str:
        if self.reply != "tool":
            return self.format_action(action)
        return super().example_reply(self._as_run(action))

    def write_call(self, name: Any, arguments: Any) -> str:
        if self.reply != "tool":  # no native tools are offered; show the model's call as text
            return json.dumps({"name": str(name), "arguments": arguments}, ensure_ascii=False, default=str)
        return super().write_call(name, arguments)

    def parse(self, text: str) -> Action:
        if self.reply != "tool":
            if len(text) > self.harness.max_action_chars:
                from harness_gym.core.tools import ActionError

                raise ActionError(
                    "too_long",
                    f"action is {len(text)} characters long; the limit is {self.harness.max_action_chars}",
                )
            action = read_reply(self.reply, text, lenient=self.harness.parser == "lenient")
        else:
            action = super().parse(text)
        if self._sentinel and action.name == "run" and action["command"].strip() == SENTINEL:
            return Action.of("submit")
        return action

    def exposes(self, action: Action) -> bool:
        if self.reply != "tool":
            return action.name in self._reply_tools
        if self._sentinel and action.name == "submit":
            return "run" in self.tool_names
        return super().exposes(action)

    def round_trip_error(self, action: Action) -> Any:
        """Why ``action`` cannot be written and read back here (the sentinel counts as submit)."""
        from harness_gym.core.tools import ActionError

        if not self.exposes(action):
            return ActionError("unknown_tool", f"this harness has no tool for {action.name!r}")
        text = self.format_action(action)
        try:
            back = self.parse(text)
        except ActionError as err:
            return err
        if back != action:
            return ActionError("malformed", f"{text!r} parses back as {back}, not {action}")
        return None

    def grammar(self, actions: Sequence[Action]) -> Any:
        if self.reply != "tool":
            from harness_gym.core.grammar import ActionGrammar, regex_literal

            texts = [self.format_action(a) for a in actions if self.exposes(a)]
            if not texts:  # nothing listed (the episode is over): any reply, and not exact
                return ActionGrammar("regex", f"[\\s\\S]{{1,{self.toolbox.max_chars}}}", False, 0)
            return ActionGrammar("regex", "|".join(regex_literal(t) for t in texts), True, len(texts))
        return super().grammar([self._as_run(a) for a in actions])
