"""The harness: an immutable, serializable spec of everything between the world and the policy.

:class:`Harness` is a frozen value. It round-trips through dict, JSON and YAML, and its
:attr:`Harness.id` is a content hash of the factor levels that differ from the defaults (so
adding a new factor with a default keeps every existing id). :meth:`Harness.bind` joins it to
a task's fields and actions, giving a :class:`BoundHarness` that renders observations, writes
the system prompt and tool schemas, formats canonical actions and parses agent output.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import string
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_gym.core.formats import FORMATS, HISTORY_FIELD, HISTORY_SPLICES, RENDERERS
from harness_gym.core.grammar import ActionGrammar
from harness_gym.core.task import Action, ActionSpec
from harness_gym.core.tools import (
    STYLE_LEVELS,
    TOOL_DESCRIPTIONS,
    TOOL_NAMINGS,
    ActionError,
    Toolbox,
    action_grammar,
    preview,
    reserved_word,
)

#: Optional harness-provided fields a harness may show after the task's fields.
EXTRA_FIELDS = ("step", "last_error")

PROMPT_TEMPLATES: dict[str, str] = {
    "default": (
        "You are an agent completing a task through the interface below.\n"
        "Each turn you receive an observation written in {format}. Reply with exactly one "
        "action.\n\nTools:\n{tools}\n\n{format_hint}"
    ),
    "terse": "Observation format: {format}.\nTools:\n{tools}\n{format_hint}",
    "verbose": (
        "You are a careful agent operating a user interface on someone's behalf.\n"
        "Read the whole observation before acting. Observations are written in {format}; "
        "each turn, reply with exactly one action and nothing else. An action that cannot "
        "be parsed or applied wastes a turn.\n\n"
        "Available tools:\n{tools}\n\n"
        "How to write an action: {format_hint}\n"
        "Think about which element the instruction refers to, then act."
    ),
}

#: What the system prompt says in place of the tool list when tools go through the native channel.
NATIVE_TOOLS_NOTE = "(the tools are given to you as functions)"
NATIVE_FORMAT_HINT = "Call exactly one function per turn."

FORMAT_NAMES = {
    "json": "JSON",
    "markdown": "Markdown",
    "xml": "XML",
    "yaml": "YAML",
    "key_value": "plain key = value lines",
    "html": "HTML",
    "axtree": "an accessibility-tree-like text ([id] role name lines)",
}

#: Levels of ``element_order``: the order of the keys inside every mapping a field's value
#: holds (a page's elements: ``ref, tag, text`` or ``text, tag, ref``); see :func:`order_elements`.
ELEMENT_ORDERS = ("canonical", "reversed")

#: Levels of every categorical factor (the other factors take numbers or permutations).
LEVELS: dict[str, Collection[Any]] = {
    # Live: registered levels and installed plugins' levels count too (harness_gym.core.plugins).
    "obs_format": FORMATS,
    "tool_style": STYLE_LEVELS,
    "tool_naming": TOOL_NAMINGS,
    "tool_descriptions": TOOL_DESCRIPTIONS,
    "parser": ("strict", "lenient"),
    "invalid_action": ("feedback", "end", "ignore"),
    "context": ("observation", "transcript"),
    "tool_channel": ("text", "native"),
    "element_order": ELEMENT_ORDERS,
}
#: Levels of ``reasoning`` (checked by itself: a language-model-only factor no preset varies).
REASONING_LEVELS = ("hidden", "shown")

#: An accepted value of each factor, as YAML, for error messages.
EXAMPLES: dict[str, str] = {
    "field_order": "field_order: [instruction, page, title]",
    "tool_order": "tool_order: [type, click]",
    "extra_fields": "extra_fields: [step, last_error]",
    "drop_tools": "drop_tools: [click, type]",
    "rename_tools": "rename_tools: {click: tap}",
    "rename_args": "rename_args: {ref: element}",
    "history_window": "history_window: 2",
    "step_budget": "step_budget: 10",
    "few_shot": "few_shot: 2",
    "max_action_chars": "max_action_chars: 4096",
    "prompt_template": "prompt_template: 'Reply as {{\"name\": ...}}. Tools: {tools}'",
    "family_options": "family_options: {terminal: {shell: persistent}}",
}

#: Validators of the options a task family adds (``family_options: {family: {...}}``), by
#: family name: each returns its options with the default levels left out, or raises
#: HarnessSpecError. Families add theirs with :func:`register_family_options`.
FAMILY_OPTIONS: dict[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]] = {}


def register_family_options(family: str, normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> None:
    """Let harnesses carry ``family``'s options, checked and normalized by ``normalize``."""
    FAMILY_OPTIONS[family] = normalize


#: Most worked examples a harness writes into its system prompt.
MAX_FEW_SHOT = 8


class HarnessSpecError(ValueError):
    """A harness spec names an unknown factor or level, or an inconsistent combination.

    The message is cut to :data:`MAX_ERROR_CHARS`: it may echo a value from a file, and a
    file's value can be large (the error stays one readable line)."""

    def __init__(self, message: object = "") -> None:
        text = str(message)
        if len(text) > MAX_ERROR_CHARS:
            text = text[:MAX_ERROR_CHARS] + f"... ({len(text):,} characters in all)"
        super().__init__(text)


#: Longest :class:`HarnessSpecError` message.
MAX_ERROR_CHARS = 2_000


@dataclass(frozen=True)
class Harness:
    """How a task is presented to a policy. Every attribute is one harness factor.

    Attributes:
        obs_format: how fields become text: one of ``LEVELS["obs_format"]``.
        field_order: ``"canonical"``, ``"reversed"`` or a permutation of the task's field names.
        element_order: ``canonical`` (each element's keys as the task emits them: ``ref``,
            ``tag``, ..., ``text``) or ``reversed`` (``text``, ..., ``tag``, ``ref``): the order
            of the keys inside every mapping in a field's value, at any depth (the top-level
            fields keep ``field_order``). A factor of its own, not a level of ``field_order``, so
            that either order can change alone and permutations of the fields combine with it.
        extra_fields: harness fields shown after the task's: a subset of ``EXTRA_FIELDS``.
        history_window: previous (observation, action) pairs shown: an int >= 0 or ``"all"``.
        tool_style: how an action is written: ``json`` (OpenAI function call object),
            ``xml``, ``python`` (``click(ref=3)``) or ``command`` (``click 3``).
        tool_naming: ``canonical``, ``synonyms`` or ``opaque`` (``tool_1(arg_1=...)``).
        tool_order: ``"canonical"``, ``"reversed"``, ``"alphabetical"`` or a permutation of
            the task's canonical tool names.
        tool_descriptions: ``full``, ``terse`` (first clause) or ``none``.
        drop_tools: canonical tool names hidden from the agent (this may lower the ceiling).
        rename_tools: canonical tool name -> the name the agent sees (applied after naming).
        rename_args: canonical argument name -> the name the agent sees, for every tool.
        parser: ``strict`` or ``lenient`` (code fences, surrounding prose, trailing commas).
        invalid_action: ``feedback`` (show the error, costs a step), ``end`` (episode ends
            with reward 0) or ``ignore`` (no message, costs a step).
        step_budget: maximum agent turns, or ``None`` for the task's own budget.
        prompt_template: a name from ``PROMPT_TEMPLATES`` or a custom template using
            ``{format}``, ``{tools}`` and ``{format_hint}``.
        context: what a language-model agent is shown each turn: ``observation`` (the system
            prompt and the current observation, which carries the harness's own history
            window) or ``transcript`` (the chat so far as alternating user / assistant
            messages, cut to ``history_window`` earlier turns).
        tool_channel: ``text`` (tools described in the system prompt in ``tool_style``; the
            reply is parsed by the harness) or ``native`` (tools sent as function tools; the
            returned call is written back in ``tool_style`` and parsed the same way).
        few_shot: worked examples shown before the episode (0 to ``MAX_FEW_SHOT``): oracle
            steps on other seeds of the same task, written by this harness; the env gives
            them in ``info["examples"]`` and a language-model agent sends them as earlier
            chat turns (a small model follows turns, not examples pasted into the prompt).
        reasoning: whether a reasoning model's thinking on earlier turns is sent back with
            them in a ``transcript`` context (``shown``, as the assistant message's
            ``reasoning_content``, which the chat template renders or drops) or not
            (``hidden``, the default: what most reasoning models' templates expect).
        max_action_chars: longer agent outputs are rejected unparsed.
        family_options: factors of one task family, ``{family: {option: level}}`` (e.g. the
            terminal family's shell and result format); checked by the family's validator,
            defaults dropped, so an empty value keeps every other harness's id.
    """

    obs_format: str = "json"
    field_order: str | tuple[str, ...] = "canonical"
    element_order: str = "canonical"
    extra_fields: tuple[str, ...] = ()
    history_window: int | str = 0
    tool_style: str = "json"
    tool_naming: str = "canonical"
    tool_order: str | tuple[str, ...] = "canonical"
    tool_descriptions: str = "full"
    drop_tools: tuple[str, ...] = ()
    rename_tools: tuple[tuple[str, str], ...] = ()
    rename_args: tuple[tuple[str, str], ...] = ()
    parser: str = "strict"
    invalid_action: str = "feedback"
    step_budget: int | None = None
    prompt_template: str = "default"
    context: str = "observation"
    tool_channel: str = "text"
    few_shot: int = 0
    reasoning: str = "hidden"
    max_action_chars: int = 8192
    family_options: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    _id: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("field_order", "tool_order", "extra_fields", "drop_tools"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        for name in ("extra_fields", "drop_tools"):
            _check_names(name, getattr(self, name))
        for factor, levels in LEVELS.items():
            value = getattr(self, factor)
            if not isinstance(value, str) or value not in levels:
                raise HarnessSpecError(
                    f"unknown level {value!r} for factor {factor!r}; valid levels: {list(levels)} "
                    f"(e.g. {factor}: {next(iter(levels))})"
                )
        for factor, named in (
            ("field_order", ("canonical", "reversed")),
            ("tool_order", ("canonical", "reversed", "alphabetical")),
        ):
            value = getattr(self, factor)
            if not isinstance(value, (str, tuple)):
                raise HarnessSpecError(
                    f"{factor} must be one of {list(named)} or a list of names, got "
                    f"{type(value).__name__} {value!r} (e.g. {EXAMPLES[factor]})"
                )
            if isinstance(value, str) and value not in named:
                raise HarnessSpecError(
                    f"unknown level {value!r} for factor {factor!r}; valid levels: "
                    f"{list(named)} or a list naming every field/tool once (e.g. {EXAMPLES[factor]})"
                )
            if isinstance(value, tuple):
                repeated = sorted({v for v in value if value.count(v) > 1}, key=repr)
                if repeated or not all(isinstance(v, str) for v in value):
                    raise HarnessSpecError(
                        f"{factor} permutation must name each item once as a string; repeated: "
                        f"{repeated} (e.g. {EXAMPLES[factor]})"
                    )
        bad = [f for f in self.extra_fields if f not in EXTRA_FIELDS]
        if bad or len(set(self.extra_fields)) != len(self.extra_fields):
            raise HarnessSpecError(
                f"extra_fields {list(self.extra_fields)} must be distinct values from {list(EXTRA_FIELDS)}"
            )
        # Canonical order for the optional fields, so equal sets give equal ids.
        object.__setattr__(self, "extra_fields", tuple(f for f in EXTRA_FIELDS if f in self.extra_fields))
        object.__setattr__(self, "drop_tools", tuple(sorted(set(self.drop_tools))))
        for name in ("rename_tools", "rename_args"):
            object.__setattr__(self, name, _renames(name, getattr(self, name)))
        for name, is_tool in (("rename_tools", True), ("rename_args", False)):
            for old, new in getattr(self, name):
                if reserved_word(self.tool_style, new, is_tool):
                    raise HarnessSpecError(
                        f"{name} renames {old!r} to {new!r}, a reserved word of the "
                        f"{self.tool_style!r} tool style, so no action using it could be parsed; "
                        f"choose another name (e.g. {name}: {{{old}: {new}_}})"
                    )
        clash = sorted({old for old, _ in self.rename_tools} & set(self.drop_tools))
        if clash:
            raise HarnessSpecError(
                f"rename_tools renames {clash}, which drop_tools removes; drop or rename, not both"
            )
        hw = self.history_window
        if not (hw == "all" or (isinstance(hw, int) and not isinstance(hw, bool) and hw >= 0)):
            raise HarnessSpecError(
                f"history_window must be an integer >= 0 or 'all', got {hw!r} "
                f"(e.g. {EXAMPLES['history_window']})"
            )
        sb = self.step_budget
        if sb is not None and (isinstance(sb, bool) or not isinstance(sb, int) or sb < 1):
            raise HarnessSpecError(
                f"step_budget must be a positive integer or None, got {sb!r} (e.g. {EXAMPLES['step_budget']})"
            )
        _check_template(self.prompt_template)
        fs = self.few_shot
        if isinstance(fs, bool) or not isinstance(fs, int) or not 0 <= fs <= MAX_FEW_SHOT:
            raise HarnessSpecError(
                f"few_shot must be an integer from 0 to {MAX_FEW_SHOT}, got {fs!r} "
                f"(e.g. {EXAMPLES['few_shot']})"
            )
        if not isinstance(self.reasoning, str) or self.reasoning not in REASONING_LEVELS:
            raise HarnessSpecError(
                f"unknown level {self.reasoning!r} for factor 'reasoning'; valid levels: "
                f"{list(REASONING_LEVELS)} (e.g. reasoning: shown)"
            )
        mc = self.max_action_chars
        if isinstance(mc, bool) or not isinstance(mc, int) or mc < 16:
            raise HarnessSpecError(
                f"max_action_chars must be an integer >= 16, got {mc!r} (e.g. {EXAMPLES['max_action_chars']})"
            )
        object.__setattr__(self, "family_options", _family_options(self.family_options))
        object.__setattr__(self, "_id", "h-" + _hash(self.to_dict(full=False)))

    # -- identity and serialization --------------------------------------------------------

    @property
    def id(self) -> str:
        """Stable content hash of the non-default factor levels, e.g. ``"h-3f2a9c01d4e5"``."""
        return self._id

    @classmethod
    def factor_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.init)

    def to_dict(self, full: bool = True) -> dict[str, Any]:
        """The spec as plain data (lists for tuples). ``full=False`` keeps only non-defaults."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if not f.init:
                continue
            value = getattr(self, f.name)
            if not full and value == f.default:
                continue
            if f.name in ("rename_tools", "rename_args"):
                value = dict(value)
            if f.name == "family_options":
                value = {family: dict(options) for family, options in value}
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Harness:
        if not isinstance(data, Mapping):
            raise HarnessSpecError(
                f"a harness spec must be a mapping of factor names to levels, got {type(data).__name__} "
                "(e.g. {'obs_format': 'yaml', 'drop_tools': ['type']})"
            )
        unknown = [k for k in data if k not in cls.factor_names()]
        if unknown:
            raise HarnessSpecError(
                f"unknown harness factor(s) {unknown}; valid factors: {list(cls.factor_names())}"
            )
        return cls(**dict(data))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=False)

    @classmethod
    def from_json(cls, text: str) -> Harness:
        return cls.from_dict(json.loads(text))

    def to_yaml(self) -> str:
        return _yaml().safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_yaml(cls, source: str | Path) -> Harness:
        """Load from a YAML file path or YAML text."""
        return cls.from_dict(read_yaml(source, "harness", _is_path(source)) or {})

    def replace(self, **changes: Any) -> Harness:
        """A copy with some factors changed (validated like a new spec)."""
        unknown = [k for k in changes if k not in self.factor_names()]
        if unknown:
            raise HarnessSpecError(
                f"unknown harness factor(s) {unknown}; valid factors: {list(self.factor_names())}"
            )
        return dataclasses.replace(self, **changes)

    def family(self, name: str) -> dict[str, Any]:
        """The options this harness sets for task family ``name`` (non-defaults only)."""
        return dict(dict(self.family_options).get(name, ()))

    def describe(self) -> str:
        """One line naming the non-default levels, e.g. ``obs_format=yaml tool_style=xml``."""
        diff = self.to_dict(full=False)
        return " ".join(f"{k}={v}" for k, v in diff.items()) or "defaults"

    # -- binding to a task -----------------------------------------------------------------

    def bind(self, field_names: Sequence[str], action_specs: Sequence[ActionSpec]) -> BoundHarness:
        """Join this harness to a task's field names and canonical actions."""
        return BoundHarness(self, tuple(field_names), tuple(action_specs))


class BoundHarness:
    """A harness joined to one task's fields and actions: renders, writes schemas, parses."""

    def __init__(
        self, harness: Harness, field_names: tuple[str, ...], action_specs: tuple[ActionSpec, ...]
    ) -> None:
        self.harness = harness
        self.field_names = field_names
        self.field_order = _field_order(harness.field_order, field_names)
        try:
            self.toolbox = Toolbox(
                action_specs,
                style=harness.tool_style,
                naming=harness.tool_naming,
                order=harness.tool_order,
                drop=harness.drop_tools,
                descriptions=harness.tool_descriptions,
                rename_tools=dict(harness.rename_tools),
                rename_args=dict(harness.rename_args),
                lenient=harness.parser == "lenient",
                max_chars=harness.max_action_chars,
            )
        except ValueError as err:
            raise HarnessSpecError(str(err)) from None
        self._render = RENDERERS[harness.obs_format]
        # A field named like the history would merge with it: such a task renders in full.
        self._splice = HISTORY_SPLICES.get(harness.obs_format) if HISTORY_FIELD not in field_names else None
        template = PROMPT_TEMPLATES.get(harness.prompt_template, harness.prompt_template)
        native = harness.tool_channel == "native"
        self.system_prompt = template.format(
            format=FORMAT_NAMES.get(harness.obs_format, harness.obs_format),
            tools=NATIVE_TOOLS_NOTE if native else self.toolbox.text_schema(),
            format_hint=NATIVE_FORMAT_HINT if native else self.toolbox.format_hint(),
        )
        self.openai_tools = self.toolbox.openai_tools()
        self.tool_names = tuple(t.spec.name for t in self.toolbox.tools)
        #: Per action (its name and arguments): its text when it round-trips through this
        #: harness, else ``None``.
        self._written: dict[tuple[str, tuple[tuple[str, Any], ...]], str | None] = {}
        #: Texts known to round-trip, and the action each parses to (parse_cached answers them).
        self._known: dict[str, Action] = {}

    def example_reply(self, action: Action) -> str:
        """``action`` as this harness's channel expects the agent to reply with it."""
        if self.harness.tool_channel == "native":
            name, arguments = self.toolbox.call(action)
            return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        return self.toolbox.format(action)

    def write_call(self, name: Any, arguments: Any) -> str:
        """A native tool call (the name and arguments a model returned) in this harness's syntax.

        Nothing is checked here: an unknown tool, arguments that are not a JSON object or a
        wrong argument come out as text that :meth:`parse` rejects with the same error as
        on the text channel, so both channels share one path for errors.
        """
        return self.toolbox.write_call(name, arguments)

    def grammar(self, actions: Sequence[Action]) -> ActionGrammar:
        """The grammar of this step's valid replies, given the legal canonical ``actions``."""
        return action_grammar(self.toolbox, actions, native=self.harness.tool_channel == "native")

    def render(
        self,
        fields: Mapping[str, Any],
        *,
        step: int = 0,
        error: str | None = None,
        history: Sequence[Mapping[str, Any]] = (),
        history_texts: list[Any] | None = None,
    ) -> str:
        """Write the task's fields (plus the harness's own) as one observation string.

        ``error`` is the message to show for the agent's last action; it appears in the
        ``last_error`` field when the harness shows that field, else in an ``error`` field
        that is present only when there is an error to show.

        ``history_texts``, when given, is where this harness keeps what it wrote for the
        ``history`` entries (text, or lines) (the caller keeps one list per history and
        never changes an entry once shown): each entry is written once, and later steps
        join the texts (for the formats in ``HISTORY_SPLICES``; the same observation).
        """
        level = self.harness.element_order
        pairs = [(name, order_elements(fields[name], level)) for name in self.field_order]
        extras = self.harness.extra_fields
        if "step" in extras:
            pairs.append(("step", step))
        if "last_error" in extras:
            pairs.append(("last_error", error or ""))
        elif error:
            pairs.append(("error", error))
        window = self.harness.history_window
        if not window:
            return self._render(pairs)
        if history_texts is not None and self._splice is not None:
            item, join = self._splice
            for entry in history[len(history_texts) :]:
                history_texts.append(item(entry))
            return join(self._render(pairs), history_texts if window == "all" else history_texts[-window:])
        shown = list(history) if window == "all" else list(history)[-window:]
        pairs.append((HISTORY_FIELD, shown))
        return self._render(pairs)

    def ordered_fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The task's fields in this harness's order (what a history entry stores)."""
        level = self.harness.element_order
        return {name: order_elements(fields[name], level) for name in self.field_order}

    def format_action(self, action: Action) -> str:
        return self.toolbox.format(action)

    def parse(self, text: str) -> Action:
        return self.toolbox.parse(text)

    def parse_cached(self, text: str) -> Action:
        """:meth:`parse`, answered from memory for a text this harness wrote for an action
        that round-trips (the legal actions it listed): that text parses back to the action."""
        known = self._known.get(text)
        return known if known is not None else self.parse(text)

    def exposes(self, action: Action) -> bool:
        """Whether this harness offers a tool for ``action`` (dropped tools are hidden)."""
        return action.name in self.tool_names

    def expressible(self, action: Action) -> bool:
        """Whether an agent can take ``action`` through this harness at all.

        True when the harness exposes its tool and the formatted text parses back to
        ``action`` within the harness's limits (``max_action_chars``, names, parser). An
        action that fails this is out of every policy's reach, like a dropped tool, so
        ceilings and legal-action lists leave it out. Memoized per action.
        """
        return self._written_text(action) is not None

    def legal_texts(self, actions: Sequence[Action]) -> list[str]:
        """The texts of the ``actions`` this harness can express, in order (memoized per action)."""
        written = self._written
        texts = [written.get((a.name, a.args), False) for a in actions]  # a tuple hashes in C
        if False in texts or None in texts:  # not all known yet, or some not expressible
            texts = [self._written_text(a) for a in actions]
            return [text for text in texts if text is not None]
        return texts

    def _written_text(self, action: Action) -> str | None:
        written, key = self._written, (action.name, action.args)
        if key in written:
            return written[key]
        if len(written) >= 8192:
            written.clear()
            self._known.clear()
        text = self.format_action(action) if self.round_trip_error(action) is None else None
        written[key] = text
        if text is not None and (self.harness.tool_channel != "native" or self._parses_to(text, action)):
            # Seen to parse back to ``action`` (on the native channel the round trip checked
            # the written-back call, so this text is parsed once here).
            self._known[text] = action
        return text

    def _parses_to(self, text: str, action: Action) -> bool:
        try:
            return self.toolbox.parse(text) == action
        except ActionError:
            return False

    def round_trip_error(self, action: Action) -> ActionError | None:
        """Why ``action`` cannot be written and read back through this harness, or ``None``."""
        if not self.exposes(action):
            return ActionError("unknown_tool", f"this harness has no tool for {action.name!r}")
        if self.harness.tool_channel == "native":  # the path a model's call takes
            name, arguments = self.toolbox.call(action)
            text = self.write_call(name, json.dumps(arguments, ensure_ascii=False))
        else:
            text = self.toolbox.format(action)
        try:
            back = self.toolbox.parse(text)
        except ActionError as err:
            return err
        if back != action:
            return ActionError("malformed", f"{text!r} parses back as {back}, not {action}")
        return None


def order_elements(value: Any, level: str) -> Any:
    """``value`` with the keys of every mapping inside it in ``element_order`` ``level``.

    Only the order changes: the same keys and values, lists keep their items' order, and
    ``canonical`` returns ``value`` itself. Every renderer writes a mapping's keys in the order
    given, so this is the one place the factor acts.
    """
    if level == "canonical":
        return value
    if isinstance(value, Mapping):
        return {k: order_elements(value[k], level) for k in reversed(list(value))}
    if isinstance(value, list | tuple):
        return type(value)(order_elements(v, level) for v in value)
    return value


def _field_order(order: str | tuple[str, ...], names: tuple[str, ...]) -> tuple[str, ...]:
    if order == "canonical":
        return names
    if order == "reversed":
        return names[::-1]
    missing = [n for n in names if n not in order]
    unknown = [n for n in order if n not in names]
    repeated = sorted({n for n in order if order.count(n) > 1})
    if missing or unknown or repeated:
        raise HarnessSpecError(
            f"field_order must list each of the task's fields {list(names)} exactly once; "
            f"missing {missing}, unknown {unknown}, repeated {repeated}"
        )
    return tuple(order)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _renames(factor: str, value: Any) -> tuple[tuple[str, str], ...]:
    """Normalize a rename map (dict or pairs) to sorted pairs of identifiers."""
    example = f"(e.g. {EXAMPLES[factor]})"
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 for p in value
    ):
        pairs = [tuple(p) for p in value]
    else:
        raise HarnessSpecError(
            f"{factor} must map canonical names to new names, got {type(value).__name__} {value!r} {example}"
        )
    for old, new in pairs:
        if not (isinstance(old, str) and isinstance(new, str) and _IDENTIFIER.match(new)):
            raise HarnessSpecError(
                f"{factor} must map names to identifiers (letters, digits, _), got {old!r}: {new!r} {example}"
            )
    olds = [p[0] for p in pairs]
    if len(set(olds)) != len(olds):
        raise HarnessSpecError(f"{factor} renames a name twice: {olds}")
    return tuple(sorted(pairs))


def _family_options(value: Any) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """Normalize ``{family: {option: level}}`` (or its pairs) through each family's validator."""
    example = f"(e.g. {EXAMPLES['family_options']})"
    if isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        value = {fam: dict(opts) if isinstance(opts, tuple) else opts for fam, opts in value}
    if not isinstance(value, Mapping):
        raise HarnessSpecError(f"family_options must map family names to options, got {value!r} {example}")
    out = []
    for family, options in value.items():
        if family not in FAMILY_OPTIONS:
            raise HarnessSpecError(
                f"unknown family {family!r} in family_options; families with options: "
                f"{sorted(FAMILY_OPTIONS)} {example}"
            )
        if not isinstance(options, Mapping):
            raise HarnessSpecError(
                f"family_options.{family} must be a mapping of options, got {options!r} {example}"
            )
        normalized = dict(FAMILY_OPTIONS[family](options))
        if normalized:
            out.append((family, tuple(sorted(normalized.items()))))
    return tuple(sorted(out))


def _check_names(factor: str, value: Any) -> None:
    """A tuple-valued factor must be a list of strings: a bare string is not split into letters."""
    if isinstance(value, str):
        raise HarnessSpecError(
            f"{factor} must be a list of names, got the string {value!r} "
            f"(write {factor}: [{value}], e.g. {EXAMPLES[factor]})"
        )
    if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
        raise HarnessSpecError(
            f"{factor} must be a list of names (strings), got {value!r} (e.g. {EXAMPLES[factor]})"
        )


_PLACEHOLDERS = ("format", "tools", "format_hint")


def _check_template(template: Any) -> None:
    """A prompt template is a preset name, or text whose only fields are the three placeholders.

    Checked here, so a stray brace fails when the harness is built rather than when it is bound.
    """
    if isinstance(template, str) and template in PROMPT_TEMPLATES:
        return
    hint = (
        "a custom template uses only the placeholders {format}, {tools} (required) and "
        "{format_hint}, and writes literal braces as {{ and }}, "
        f"e.g. {EXAMPLES['prompt_template']}; or name a preset: {list(PROMPT_TEMPLATES)}"
    )
    if not isinstance(template, str):
        raise HarnessSpecError(f"prompt_template must be text, got {type(template).__name__}; {hint}")
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(template)]
    except ValueError as err:
        raise HarnessSpecError(
            f"prompt_template {preview(template)} has a stray brace ({err}); {hint}"
        ) from None
    names = [name for name, _, _ in fields if name is not None]
    bad = [n for n in names if n not in _PLACEHOLDERS]
    if bad:
        raise HarnessSpecError(
            f"prompt_template {preview(template)} has unknown placeholder(s) {bad}; {hint}"
        )
    if any(spec or conv for name, spec, conv in fields if name is not None):
        raise HarnessSpecError(
            f"prompt_template {preview(template)} gives a placeholder a format spec or conversion; {hint}"
        )
    if "tools" not in names:
        raise HarnessSpecError(f"prompt_template {preview(template)} lacks {{tools}}; {hint}")


def _hash(data: Mapping[str, Any]) -> str:
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _is_path(source: str | Path) -> bool:
    if isinstance(source, Path):
        return True
    return "\n" not in source and source.endswith((".yaml", ".yml"))


def read_yaml(source: str | Path, kind: str, is_path: bool) -> Any:
    """The data of a YAML file (``is_path``) or YAML text; a file that is not UTF-8 or not
    valid YAML is a :class:`HarnessSpecError` naming it (``kind``: "harness", "space")."""
    yaml = _yaml()
    where = f"{kind} file {source}" if is_path else f"{kind} YAML"
    try:
        text = Path(source).read_text(encoding="utf-8") if is_path else str(source)
        return yaml.load(text, Loader=_no_alias_loader(yaml))  # noqa: S506 - a SafeLoader
    except UnicodeDecodeError as err:
        raise HarnessSpecError(f"{where} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    except yaml.YAMLError as err:
        raise HarnessSpecError(f"{where} is not valid YAML: {' '.join(str(err).split())}") from None


def _no_alias_loader(yaml: Any) -> Any:
    """PyYAML's SafeLoader that refuses aliases (``*name``): a few hundred bytes of nested
    aliases expand to gigabytes (a "YAML bomb"); a harness or space file never needs them."""

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, f"aliases (*{event.anchor}) are not allowed here", event.start_mark
                )
            return super().compose_node(parent, index)

    return NoAliasLoader


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("YAML support needs PyYAML: pip install 'harness-gym[yaml]'") from None
    return yaml
