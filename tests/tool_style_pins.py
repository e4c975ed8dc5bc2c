"""What every built-in tool style writes and reads, recorded as data.

:func:`record` runs a fixed sample through the toolbox of every built-in tool style (web,
terminal and typed action sets; three namings; strict and lenient; every description level)
and returns what comes out: schemas, hints, formatted actions, native calls written back,
parses of well-formed, cross-style, prose-wrapped, doubled and broken replies (the action
or the error kind and message), and constrained-decoding grammars. ``tests/data/
tool_style_pins.json`` holds digests of the record made on main before ``core/tools.py`` became a
package; ``tests/test_tool_style_pins.py`` checks that the code still gives it byte for byte.

``python tests/tool_style_pins.py`` rewrites the file (only do that for an intended change).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from harness_gym.core.task import Action, ActionSpec, Param
from harness_gym.core.tools import ActionError, Toolbox, action_grammar
from harness_gym.envs.terminal.task import TERMINAL_ACTIONS
from harness_gym.envs.web.base import WEB_ACTIONS

PINS = Path(__file__).parent / "data" / "tool_style_pins.json"
#: The built-in styles as main defined them (a constant, so that a lost style is noticed).
STYLES = ("json", "xml", "python", "command", "python_positional", "bracket", "json_flat")

TYPED_ACTIONS = (
    ActionSpec(
        "refund",
        "Refund an order. Money goes back.",
        (
            Param("order", "int", "The order id."),
            Param("amount", "float", "How much."),
            Param("items", "list[str]", "Which items."),
            Param("ids", "list[int]", "Item ids."),
            Param("reason", "str", "Why.", choices=("damaged", "late")),
        ),
    ),
    ActionSpec("note", "Leave a note.", (Param("text", "str", "The note."),)),
    ActionSpec("done", "Finish.", ()),
)

ACTION_SETS = {"web": WEB_ACTIONS, "terminal": TERMINAL_ACTIONS, "typed": TYPED_ACTIONS}

STRINGS = (
    "hello",
    'say "hi"',
    "it's",
    "two\nlines",
    "back\\slash",
    "ünïcødé 日本",
    "",
    "x]y [z]",
    "</text><b>&amp;",
    "tab\there\r",
    "a; b && c",
    "{json: 1}",
    "click(ref=1)",
    "\x00\x1b",
)
INTS = (0, 7, -3, 10**17)
VALUES: dict[str, tuple[Any, ...]] = {
    "int": INTS,
    "str": STRINGS,
    "float": (1.5, -0.25, 1e-05, 3.0),
    "list[int]": ((1, 2), (), (5,)),
    "list[str]": (("a", "b c"), ("",), ('q"',)),
}


def sample_actions(specs: tuple[ActionSpec, ...], count: int = 5) -> list[Action]:
    """``count`` actions per spec, cycling through the value samples of each argument."""
    out = []
    for spec in specs:
        for k in range(count if spec.params else 1):
            args = []
            for j, p in enumerate(spec.params):
                pool = p.choices or VALUES[p.type]
                args.append((p.name, pool[(k + j) % len(pool)]))
            out.append(Action(spec.name, tuple(args)))
    return out


def _result(fn: Any) -> Any:
    try:
        value = fn()
    except ActionError as err:
        return ["error", err.kind, err.message]
    except (KeyError, ValueError, TypeError) as err:
        return ["raised", type(err).__name__, str(err)]
    return ["ok", repr(value)]


def _replies(box: Toolbox, others: dict[str, Toolbox], actions: list[Action]) -> list[str]:
    """Replies to parse: each action as written, wrapped in prose and fences, doubled, broken,
    written in every other style, plus junk."""
    out = ["", "   ", "hello there", "{", "```\n```", "x" * 9000, "<a>", "[]", "$ ", "()"]
    for i, a in enumerate(actions):
        text = box.format(a)
        nxt = box.format(actions[(i + 1) % len(actions)])
        out += [
            text,
            f"  {text}\n",
            f"I will act now: {text} and that is all.",
            f"Thinking...\n```\n{text}\n```\nDone.",
            f"```python\n{text}\n```",
            f"$ {text}",
            f"`{text}`",
            f"{text}\n{nxt}",
            f"{text}; {nxt}",
            f"[{text}, {nxt}]",
            f"{text} {nxt}",
            f"```\n{text}\n```\n```\n{nxt}\n```",
            text[:-1],
            text + ",",
            text.replace('"', "'", 1),
            text.upper(),
        ]
        if i % 3 == 0:
            out += [o.format(a) for o in others.values()]
    return out


def _native_calls(box: Toolbox, actions: list[Action]) -> list[tuple[Any, Any]]:
    calls: list[tuple[Any, Any]] = []
    for a in actions[:6]:
        name, args = box.call(a)
        calls += [
            (name, args),
            (name, json.dumps(args)),
            (name, {**args, "extra": 1}),
            (name, dict(list(args.items())[1:])),
            (name, {"action_type": "x", **args}),
            (name, dict(reversed(list(args.items())))),
        ]
    calls += [
        ("nope", {}),
        ("click", "not json"),
        ("click", "[1, 2]"),
        ("click", '{"ref": 1, "ref": 2}'),
        ("click", ""),
        ("click", {"ref": 2.0}),
        ("type", {"ref": "3", "text": 12}),
        (7, {"a": [1, 2]}),
    ]
    return calls


def record_case(specs: tuple[ActionSpec, ...], style: str, **factors: Any) -> dict[str, Any]:
    """What one toolbox writes and reads over the sample."""
    box = Toolbox(specs, style=style, **factors)
    others = {s: Toolbox(specs, style=s) for s in STYLES if s != style}
    actions = sample_actions(specs)
    out: dict[str, Any] = {
        "text_schema": box.text_schema(),
        "format_hint": box.format_hint(),
        "openai_tools": box.openai_tools(),
        "anthropic_tools": box.anthropic_tools(),
        "format": [_result(lambda a=a: box.format(a)) for a in actions],
        "call": [_result(lambda a=a: box.call(a)) for a in actions],
        "write_call": [],
        "parse": [],
        "grammar": {},
    }
    for name, args in _native_calls(box, actions):
        try:
            text = box.write_call(name, args)
        except (KeyError, ValueError, TypeError) as err:
            out["write_call"].append(["raised", type(err).__name__, str(err)])
            continue
        out["write_call"].append([text, _result(lambda t=text: box.parse(t))])
    for text in _replies(box, others, actions):
        out["parse"].append([text, _result(lambda t=text: box.parse(t))])
    for native in (False, True):
        for limit in (256, 2):
            for subset in (actions, actions[:1], []):
                key = f"native={native} max={limit} n={len(subset)}"
                out["grammar"][key] = _result(
                    lambda s=subset, n=native, m=limit: action_grammar(
                        box, s, native=n, max_alternatives=m, max_string=40
                    ).to_dict()
                )
    return out


def cases() -> list[tuple[str, tuple[ActionSpec, ...], str, dict[str, Any]]]:
    """(key, specs, style, toolbox factors) of every recorded case."""
    out = []
    variants = [
        {},
        {"naming": "synonyms", "lenient": True},
        {"naming": "opaque", "descriptions": "terse", "order": "reversed"},
        {"lenient": True, "descriptions": "none", "order": "alphabetical", "max_chars": 300},
    ]
    for set_name, specs in ACTION_SETS.items():
        for style in STYLES:
            for i, factors in enumerate(variants):
                out.append((f"{set_name}/{style}/{i}", specs, style, factors))
    return out


#: Tasks and presets whose episodes are pinned too (every preset: every style, channel, naming,
#: parser and prompt the presets combine).
ENV_TASKS = ("EnterText", "LoginUser", "BookFlight")


def env_cases() -> list[tuple[str, str, str]]:
    """(key, task, preset) of every recorded episode."""
    from harness_gym import PRESETS

    return [(f"env/{task}/{preset}", task, preset) for task in ENV_TASKS for preset in PRESETS]


def record_env(task: str, preset: str) -> dict[str, Any]:
    """Two oracle steps of one seed: the system prompt, tools, observations, legal actions as
    written, example replies, their parses and grammars, and what a few bad replies give."""
    from harness_gym import make_env

    env = make_env(task, preset)
    obs, info = env.reset(seed=3)
    out: dict[str, Any] = {"system_prompt": [info["system_prompt"]], "steps": []}
    for _ in range(2):
        bound = env.bound
        legal = env.legal_actions()
        replies = [bound.example_reply(a) for a in legal[:12]]
        out["steps"].append(
            {
                "obs": obs,
                "legal": info["legal_actions"],
                "tools": bound.toolbox.openai_tools(),
                "replies": replies,
                "grammar": _result(lambda b=bound, g=legal: b.grammar(g).to_dict()),
                "oracle": env.oracle_action(),
            }
        )
        ended = False
        for bad in ("", "nonsense", replies[0] + "\n" + replies[-1], "```\n" + replies[0] + "\n```"):
            _, _, terminated, truncated, bad_info = env.step(bad)
            out["steps"][-1].setdefault("bad", []).append(
                [bad_info.get("error_kind"), bad_info.get("last_error"), terminated, truncated]
            )
            if terminated or truncated:
                ended = True
                break
        if ended:
            break
        obs, _, terminated, truncated, info = env.step(env.oracle_action())
        if terminated or truncated:
            break
    return out


def record() -> dict[str, Any]:
    data = {key: record_case(specs, style, **factors) for key, specs, style, factors in cases()}
    data.update({key: record_env(task, preset) for key, task, preset in env_cases()})
    return data


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def digests(data: dict[str, Any]) -> dict[str, dict[str, str]]:
    """A SHA-256 per case and section (the whole record is megabytes; the digests say where
    a difference is, and ``record()`` on both versions shows what it is)."""
    return {key: {part: digest(value) for part, value in case.items()} for key, case in data.items()}


if __name__ == "__main__":
    pins = digests(record())
    PINS.parent.mkdir(exist_ok=True)
    PINS.write_text(json.dumps(pins, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(pins)} cases to {PINS} ({PINS.stat().st_size} bytes)")
