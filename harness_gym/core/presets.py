"""Named harness presets, of four kinds, each saying what it changes.

* ``canonical``: ``Json``, every factor at its default.
* ``one-change``: the canonical harness with one factor moved, named by that change
  (``ObsMarkdown``, ``ToolsPython``, ``NamesOpaque``, ``ParserLenient``, ``InvalidEnd``,
  ``JsonReversed``, ...). Comparing one against ``Json`` measures that factor alone.
  ``JsonTranscript`` is the one preset of this kind that sets two factors: a transcript
  context shows earlier turns only with a history window, so it sets ``history_window=all``.
* ``convention``: as close as the factors allow to the harness conventions of a real system
  (BrowserGym, WebArena, Farama MiniWoB++, OpenAI function calling). Each records what it
  reproduces, what it cannot, and the source files it was written from (``docs/presets.md``).
* ``bundle``: coverage bundles (``Bundle*``) that move many factors at once so that a few
  presets touch every categorical level; for sweeps, not for comparing formats.

The names ``Markdown``, ``Xml``, ``Yaml``, ``KeyValue``, ``Html`` and ``Python`` were
bundles that read like formats; they still resolve, to the same harnesses (same ids), with a
:class:`DeprecationWarning` naming the new bundle, for one release.

Every preset is registered with each task it applies to as ``harness_gym/<Task>-<Preset>-v0``.
Task families add presets every task may take with :func:`register_preset`, and presets only
their own tasks take with ``register_family(presets=...)`` (:data:`FAMILY_PRESETS`).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_gym.core.harness import Harness, HarnessSpecError

#: Preset kinds, in the order ``harness-gym list presets`` shows them.
KINDS = ("canonical", "one-change", "convention", "bundle")


@dataclass(frozen=True)
class Preset:
    """A named harness and what it is for.

    Attributes:
        name: the preset name (the ``<Preset>`` of ``harness_gym/<Task>-<Preset>-v0``).
        harness: the harness it names.
        kind: one of :data:`KINDS`.
        summary: one line saying what it is.
        family: the task family it is written for (``"web"``, ``"terminal"``), or ``None``
            for any task. A preset is registered only with tasks its harness binds to.
        reproduces: for conventions, what of the real system it reproduces.
        cannot: for conventions, what it cannot reproduce (and why).
        sources: for conventions, the real system's files it was written from.
    """

    name: str
    harness: Harness
    kind: str
    summary: str
    family: str | None = None
    reproduces: str = ""
    cannot: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    def changes(self) -> dict[str, Any]:
        """The factors this preset moves away from the canonical harness, with their levels."""
        return self.harness.to_dict(full=False)


#: Every preset by name, with its kind and documentation.
PRESET_INFO: dict[str, Preset] = {}
#: Every preset's harness by name (what ``resolve_harness`` and the env ids use).
PRESETS: dict[str, Harness] = {}
#: Old preset names -> the preset now equal to them (same harness, same id). Kept one release.
DEPRECATED_PRESETS: dict[str, str] = {}


def register_preset(
    name: str,
    harness: Harness,
    kind: str,
    summary: str,
    *,
    family: str | None = None,
    reproduces: str = "",
    cannot: tuple[str, ...] = (),
    sources: tuple[str, ...] = (),
) -> Preset:
    """Add a named preset (task families add theirs here; ``harness-gym list presets`` shows it).

    Registering the same preset twice is a no-op; a name taken by another harness, or a
    kind outside :data:`KINDS`, is a :class:`ValueError`. Gymnasium ids for the preset come
    from :func:`~harness_gym.core.registry.register_envs` or ``register_family``.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown preset kind {kind!r}; kinds: {list(KINDS)}")
    if name in DEPRECATED_PRESETS:
        raise ValueError(f"preset name {name!r} is a deprecated alias of {DEPRECATED_PRESETS[name]!r}")
    existing = PRESETS.get(name)
    if existing is not None and existing != harness:
        raise ValueError(f"preset {name!r} is already registered as a different harness ({existing.id})")
    preset = Preset(name, harness, kind, summary, family, reproduces, tuple(cannot), tuple(sources))
    PRESET_INFO[name] = preset
    PRESETS[name] = harness
    return preset


def _one_change(name: str, summary: str, **change: Any) -> None:
    register_preset(name, Harness(**change), "one-change", summary)


register_preset("Json", Harness(), "canonical", "the canonical harness: every factor at its default")

# -- one change each ----------------------------------------------------------------------------
_one_change("JsonReversed", "fields in reverse order (the MiniWoB++ result)", field_order="reversed")
_one_change(
    "JsonElementsReversed",
    "each element's keys in reverse order (text, tag, ref), the fields as they are",
    element_order="reversed",
)
for _level, _name in (
    ("markdown", "Markdown"),
    ("xml", "Xml"),
    ("yaml", "Yaml"),
    ("key_value", "KeyValue"),
    ("html", "Html"),
    ("axtree", "Axtree"),
):
    _one_change(f"Obs{_name}", f"observations written as {_level}", obs_format=_level)
for _level, _name in (
    ("xml", "Xml"),
    ("python", "Python"),
    ("python_positional", "PythonPositional"),
    ("command", "Command"),
    ("bracket", "Bracket"),
    ("json_flat", "JsonFlat"),
):
    _one_change(f"Tools{_name}", f"actions written in the {_level} tool style", tool_style=_level)
_one_change("NamesSynonyms", "tools, arguments renamed to synonyms (click -> press)", tool_naming="synonyms")
_one_change("NamesOpaque", "tools and arguments renamed to tool_N / arg_N", tool_naming="opaque")
_one_change("ParserLenient", "lenient parser (fences, prose, trailing commas forgiven)", parser="lenient")
_one_change("InvalidEnd", "an invalid action ends the episode with reward 0", invalid_action="end")
_one_change("InvalidIgnore", "an invalid action costs a step with no message", invalid_action="ignore")
# For language-model agents: how the chat is built, how tools are sent, worked examples.
register_preset(
    "JsonTranscript",
    Harness(context="transcript", history_window="all"),
    "one-change",
    "the model sees the whole chat so far (context=transcript; history_window=all so it shows)",
)
_one_change("JsonNative", "tools sent as native function tools (tool_channel=native)", tool_channel="native")
_one_change("JsonFewShot", "two worked examples before the episode", few_shot=2)
del _level, _name

# -- conventions of real systems ------------------------------------------------------------------
register_preset(
    "BrowserGymStyle",
    Harness(
        obs_format="axtree",
        tool_style="python_positional",
        rename_tools={"type": "fill", "select": "select_option", "press": "keyboard_press"},
        rename_args={"ref": "bid", "text": "value", "option": "options"},
        parser="lenient",
    ),
    "convention",
    "BrowserGym's high-level action set: click('12'), fill('12', 'text') over an AXTree-like text",
    family="web",
    reproduces=(
        "BrowserGym's action syntax: Python calls with positional arguments, each a Python "
        "literal and element ids (bids) as strings, as HighLevelActionSet.to_python_code writes "
        "them; BrowserGym's names for our four actions (click, fill, select_option, "
        "keyboard_press) and their argument names (bid, value, options, key); the call found "
        "anywhere in the reply (prose, code fences), as its non-strict parser searches for it; "
        "the page as indented '[bid] role text' lines."
    ),
    cannot=(
        "its other actions (dblclick, hover, scroll, mouse_* coordinates, send_msg_to_user, ...): "
        "the task's canonical actions decide which tools exist",
        "several actions in one reply (HighLevelActionSet's default multiaction=True): a harness "
        "takes one action per turn, as multiaction=False does",
        "the real accessibility tree (roles, properties, bids like 'a51'): the page field is "
        "rendered in that shape from the task's elements",
        "optional arguments (click's button and modifiers)",
    ),
    sources=(
        "ServiceNow/BrowserGym browsergym/core/src/browsergym/core/action/functions.py",
        "ServiceNow/BrowserGym browsergym/core/src/browsergym/core/action/highlevel.py",
        "ServiceNow/BrowserGym browsergym/core/src/browsergym/utils/obs.py (flatten_axtree_to_str)",
    ),
)
register_preset(
    "WebArenaStyle",
    Harness(obs_format="axtree", tool_style="bracket", parser="lenient"),
    "convention",
    "WebArena's id-based actions: click [12], type [12] [text], press [Enter] over an accessibility tree",
    family="web",
    reproduces=(
        "WebArena's id-based action syntax (the action word, then each argument in square "
        "brackets; the last argument runs to the last ']'), the action in a ``` fence after "
        "free reasoning, and an accessibility-tree-like observation of [id] role 'name' lines, "
        "one tab per level."
    ),
    cannot=(
        "its prompt's sections (OBSERVATION:, URL:, OBJECTIVE:, PREVIOUS ACTION:): each field is "
        "shown under the task's own name (instruction:, title:, page:); there is no URL",
        "type's press_enter_after flag: WebArena presses Enter after typing unless the action "
        "ends in [0]; here type never presses Enter and takes no third argument",
        "select: WebArena has no select action (a combobox is clicked, then its option); the "
        "task's select is written select [id] [option]",
        "its other actions (hover, scroll, goto, tabs, stop [answer]) and its CoT prompt text",
    ),
    sources=(
        "web-arena-x/webarena browser_env/actions.py (create_id_based_action)",
        "web-arena-x/webarena agent/prompts/raw/p_cot_id_actree_2s.py",
    ),
)
register_preset(
    "MiniWoBStyle",
    Harness(
        tool_style="json_flat",
        rename_tools={"click": "CLICK_ELEMENT", "type": "FOCUS_ELEMENT_AND_TYPE_TEXT", "press": "PRESS_KEY"},
    ),
    "convention",
    'Farama MiniWoB++ element-ref actions: {"action_type": "CLICK_ELEMENT", "ref": 12}',
    family="web",
    reproduces=(
        "the action dict of Farama MiniWoB++'s Gymnasium environment: an action_type named by "
        "its ActionTypes member (CLICK_ELEMENT, FOCUS_ELEMENT_AND_TYPE_TEXT, PRESS_KEY) beside "
        "the element ref and the text or key, as create_action(action_type, ref=..., text=...) "
        "builds it; the observation as JSON with elements carrying their ref."
    ),
    cannot=(
        "select: MiniWoB++ has no select action type (its CLICK_ELEMENT on a <select> clicks "
        "at the element); the task's select keeps its name",
        "coordinate actions (CLICK_COORDS, ...) and TYPE_FIELD: the task has no coordinates or fields",
        "integer action types and key indices: MiniWoB++'s action space encodes action_type and "
        "key as Discrete indices; here they are written by name",
        "the observation's names and shape (utterance, a flat dom_elements list with parent refs, "
        "pixel boxes, screenshot): fields keep the task's names (instruction, title, page)",
    ),
    sources=(
        "Farama-Foundation/miniwob-plusplus miniwob/action.py (ActionTypes, ActionSpaceConfig)",
        "Farama-Foundation/miniwob-plusplus miniwob/environment.py (create_action)",
    ),
)
register_preset(
    "OpenAIFunctions",
    Harness(tool_channel="native", context="transcript", history_window="all"),
    "convention",
    "native OpenAI function calling: tools as function tools, calls and results in the chat",
    reproduces=(
        "the OpenAI chat-completions tool protocol: tools sent as {type: function, function: "
        "{name, description, parameters}} with a JSON-schema object of required arguments; the "
        "model's reply is a tool_calls entry whose arguments are JSON text; each later "
        "observation comes back as the role=tool message answering that call, in one growing chat."
    ),
    cannot=(
        'strict structured outputs ("strict": true on a function): not sent; the harness\'s '
        "own parser checks the arguments",
        "parallel tool calls: one call per turn is taken",
    ),
    sources=(
        "openai/openai-python src/openai/types/chat/chat_completion_function_tool_param.py",
        "openai/openai-python src/openai/types/shared_params/function_definition.py",
        "openai/openai-python src/openai/types/chat/chat_completion_message_function_tool_call.py",
        "openai/openai-python src/openai/types/chat/chat_completion_tool_message_param.py",
    ),
)

# -- coverage bundles -------------------------------------------------------------------------------
_BUNDLES: dict[str, Harness] = {
    "Markdown": Harness(
        obs_format="markdown",
        field_order="reversed",
        extra_fields=("step", "last_error"),
        history_window=1,
        tool_style="python",
        tool_naming="synonyms",
        tool_order="reversed",
        tool_descriptions="terse",
        parser="lenient",
        prompt_template="verbose",
    ),
    "Xml": Harness(
        obs_format="xml",
        extra_fields=("last_error",),
        history_window="all",
        tool_style="xml",
        tool_naming="opaque",
        tool_order="alphabetical",
        invalid_action="end",
        prompt_template="terse",
    ),
    "Yaml": Harness(
        obs_format="yaml",
        field_order="reversed",
        extra_fields=("step",),
        tool_style="command",
        parser="lenient",
        invalid_action="ignore",
    ),
    "KeyValue": Harness(
        obs_format="key_value",
        extra_fields=("step", "last_error"),
        history_window=2,
        tool_style="command",
        tool_naming="synonyms",
        tool_descriptions="none",
    ),
    "Html": Harness(
        obs_format="html",
        field_order="reversed",
        tool_style="json",
        tool_naming="opaque",
        tool_order="reversed",
        parser="lenient",
        invalid_action="end",
        prompt_template="verbose",
    ),
    "Python": Harness(
        obs_format="markdown",
        tool_style="python",
        extra_fields=("last_error",),
        history_window=1,
    ),
}
for _old, _harness in _BUNDLES.items():
    _changed = list(_harness.to_dict(full=False))
    _summary = f"coverage bundle of {len(_changed)} changes ({', '.join(_changed)})"
    register_preset(f"Bundle{_old}", _harness, "bundle", _summary)
    DEPRECATED_PRESETS[_old] = f"Bundle{_old}"
del _old, _harness, _changed, _summary

#: Package prefixes a deprecation warning looks past, so it points at the caller's line.
_INTERNAL = ("harness_gym", "gymnasium")


def _deprecated(name: str) -> Harness:
    new = DEPRECATED_PRESETS[name]
    harness = PRESETS[new]
    level, frame = 1, sys._getframe(0)
    while frame is not None and str(frame.f_globals.get("__name__", "")).split(".")[0] in _INTERNAL:
        level, frame = level + 1, frame.f_back
    warnings.warn(
        f"harness preset {name!r} is deprecated: it is a coverage bundle of "
        f"{len(harness.to_dict(full=False))} changes, not a {name} format; use {new!r}, the same "
        f"harness ({harness.id}). For one change from the canonical harness see "
        "`harness-gym list presets` (e.g. ObsMarkdown, ToolsPython).",
        DeprecationWarning,
        stacklevel=level,
    )
    return harness


def get_preset(name: str) -> Harness:
    """The harness a preset name stands for (old bundle names warn and still resolve)."""
    if name in PRESETS:
        return PRESETS[name]
    if name in DEPRECATED_PRESETS:
        return _deprecated(name)
    raise HarnessSpecError(f"unknown harness preset {name!r}; valid presets: {list(PRESETS)}")


#: The families whose presets ``tests/test_registration.py`` binds with every task of theirs.
BUILTIN_FAMILIES = ("web", "browser", "terminal")
#: Presets that only one family's envs take (``register_family(presets=...)``), kept out of
#: :data:`PRESETS`: family -> preset name -> Preset. ``harness-gym list presets`` shows them.
FAMILY_PRESETS: dict[str, dict[str, Preset]] = {}


def add_family_presets(family: str, presets: Mapping[str, Harness | Preset | Mapping[str, Any]]) -> list[str]:
    """Put a family's own presets into :data:`FAMILY_PRESETS` (a bare Harness or spec dict
    becomes a convention preset); return their names. A name a generic preset holds is a
    ValueError."""
    table = FAMILY_PRESETS.setdefault(family, {})
    for name, preset in presets.items():
        if name in PRESETS or name in DEPRECATED_PRESETS:
            raise ValueError(f"family {family!r} preset {name!r} clashes with a generic preset name")
        if isinstance(preset, Mapping):
            preset = Harness.from_dict(preset)
        if isinstance(preset, Harness):
            preset = Preset(name, preset, "convention", f"a {family} preset", family=family)
        if not isinstance(preset, Preset):
            raise TypeError(
                f"family {family!r} preset {name!r} must be a Harness or a Preset, got {preset!r}"
            )
        table[name] = preset
    return list(presets)


def task_family(task: type) -> str | None:
    """A task's family: its declared ``family`` attribute, else (for built-in tasks written
    before the attribute) the ``harness_gym.envs.<family>`` package it lives in."""
    declared = getattr(task, "family", None)
    if declared is not None:
        return str(declared)
    parts = str(getattr(task, "__module__", "")).split(".")
    return parts[2] if parts[:2] == ["harness_gym", "envs"] and len(parts) > 2 else None


#: Families whose tasks also take other families' presets (real-browser tasks are web pages),
#: as each family says with ``register_family(also=...)``.
FAMILY_ALSO: dict[str, tuple[str, ...]] = {}

_binds: dict[tuple[str, Harness, tuple, tuple], bool] = {}


def preset_applies(name: str, task: type) -> bool:
    """Whether preset ``name`` (of :data:`PRESETS`) is registered with ``task``.

    A preset for any family, or for the task's own (or one :data:`FAMILY_ALSO` names), applies
    to every task of a built-in family: the presets are written for those tasks, and
    ``tests/test_registration.py`` binds every such pair, so registering the package's ids binds
    nothing. Any other task (one outside the package, even a subclass of a built-in family's
    base) takes the presets whose harness binds to its fields and actions (a preset renaming
    ``click`` cannot bind to a task without it), and of those, when it declares a family, only
    the ones for any family or its own.
    """
    harness = PRESETS[name]
    family = task_family(task)
    if family in BUILTIN_FAMILIES and str(getattr(task, "__module__", "")).startswith("harness_gym."):
        return preset_for_family(name, family)
    if family is not None and not preset_for_family(name, family):
        return False
    return _binds_to(name, harness, task)


def _binds_to(name: str, harness: Harness, task: type) -> bool:
    fields, actions = tuple(task.field_names), tuple(task.action_specs)  # type: ignore[attr-defined]
    key = (name, harness, fields, actions)
    if key not in _binds:
        try:
            harness.bind(fields, actions)
            _binds[key] = True
        except HarnessSpecError:
            _binds[key] = False
    return _binds[key]


def preset_for_family(name: str, family: str) -> bool:
    """Whether preset ``name`` is registered with the tasks of the built-in ``family``: it is
    written for any family, for ``family``, or for one that :data:`FAMILY_ALSO` names."""
    info = PRESET_INFO.get(name)  # None for a harness put into PRESETS directly
    wanted = info.family if info is not None else None
    return wanted is None or wanted == family or wanted in FAMILY_ALSO.get(family, ())


def preset_name(harness: Harness) -> str | None:
    """The (current) name of the preset equal to ``harness``, or ``None``."""
    for name, preset in PRESETS.items():
        if preset == harness:
            return name
    return None


def resolve_harness(
    harness: Harness | str | Mapping[str, Any] | Path | None, family: str | None = None
) -> Harness:
    """Accept a Harness, a preset name, a spec dict, or a YAML path; return a Harness. With
    ``family``, that family's own presets (:data:`FAMILY_PRESETS`) are names too."""
    if isinstance(harness, str) and harness in FAMILY_PRESETS.get(family or "", {}):
        return FAMILY_PRESETS[family][harness].harness  # type: ignore[index]
    if harness is None:
        return PRESETS["Json"]
    if isinstance(harness, Harness):
        return harness
    if isinstance(harness, Mapping):
        return Harness.from_dict(harness)
    if isinstance(harness, Path) or (isinstance(harness, str) and harness.endswith((".yaml", ".yml"))):
        path = Path(harness)
        if not path.exists():
            raise FileNotFoundError(f"harness YAML file not found: {path}")
        return Harness.from_yaml(path)
    if isinstance(harness, str):
        return get_preset(harness)
    raise TypeError(
        f"harness must be a Harness, a preset name, a dict spec or a YAML path; got {type(harness).__name__}"
    )
