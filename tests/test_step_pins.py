"""Observations, infos, rewards and digests pinned against the code before the step-cost work.

``tests/fixtures/step_pins.json`` was written by the unoptimized code (this file's ``record``
run with ``HARNESS_GYM_REPIN=1``). Every web task under every preset plays a seeded mix of
legal, oracle and bad replies across several episodes (resets with and without a seed); each
reset and step is kept as short hashes of the observation and of the info, plus reward and
end flags. A faster render, info or digest path must give the very same bytes.

Regenerate only when a change is *meant* to alter observations or infos:
``HARNESS_GYM_REPIN=1 pytest tests/test_step_pins.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness_gym import PRESETS, TASKS, make_env

FIXTURE = Path(__file__).parent / "fixtures" / "step_pins.json"
STEPS = 14
#: Replies that are never legal: malformed text, an unknown tool, control characters.
BAD_REPLIES = ("not an action", '{"name": "nope", "arguments": {}}', "\x00\x1b[2J", "click(ref=999)")


def _hash(value: Any) -> str:
    if not isinstance(value, str):
        value = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _info_record(env: Any, info: dict[str, Any]) -> str:
    # The spec is checked against the harness itself (a new factor with a default changes it).
    assert json.dumps(info["harness"]) == json.dumps(env.unwrapped.harness.to_dict())
    return _hash({k: v for k, v in info.items() if k != "harness"})


def record(task_id: str, preset: str, seed: int) -> list[list[Any]]:
    """One rollout: [obs hash, info hash] at resets, [obs, reward, terminated, truncated, info] at steps."""
    env = make_env(task_id, preset)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    out: list[list[Any]] = [[_hash(obs), _info_record(env, info)]]
    for i in range(STEPS):
        draw = rng.random()
        if draw < 0.15:
            reply = BAD_REPLIES[int(rng.integers(len(BAD_REPLIES)))]
        elif draw < 0.45:
            reply = env.oracle_action()
        else:
            legal = info["legal_actions"]
            reply = legal[int(rng.integers(len(legal)))] if legal else "empty"
        obs, reward, terminated, truncated, info = env.step(reply)
        out.append([_hash(obs), float(reward), terminated, truncated, _info_record(env, info)])
        if terminated or truncated:
            obs, info = env.reset(seed=seed + 1000 + i if i % 2 else None)
            out.append([_hash(obs), _info_record(env, info)])
    env.close()
    return out


CASES = [(task, preset, seed) for task in sorted(TASKS) for preset in PRESETS for seed in (3,)]
CASES += [(task, "Json", seed) for task in sorted(TASKS) for seed in (11, 12)]
CASES += [(task, "BundleXml", 11) for task in sorted(TASKS)]


def _key(task: str, preset: str, seed: int) -> str:
    return f"{task}/{preset}/{seed}"


def test_rollouts_match_the_pinned_ones() -> None:
    if os.environ.get("HARNESS_GYM_REPIN"):
        pins = {_key(*case): record(*case) for case in CASES}
        FIXTURE.write_text(json.dumps(pins, separators=(",", ":")) + "\n")
        pytest.skip("pins rewritten")
    pins = json.loads(FIXTURE.read_text())
    missing = [_key(*c) for c in CASES if _key(*c) not in pins]
    assert not missing, f"no pins for {missing[:5]}: rerun with HARNESS_GYM_REPIN=1"
    wrong = []
    for case in CASES:
        got = json.loads(json.dumps(record(*case)))
        if got != pins[_key(*case)]:
            first = next(i for i, (a, b) in enumerate(zip(got, pins[_key(*case)] + [None])) if a != b)
            wrong.append(f"{_key(*case)} from record {first}")
    assert not wrong, f"{len(wrong)} rollouts differ from the pinned ones: {wrong[:8]}"


def test_pins_are_not_all_alike() -> None:
    """The pins themselves could fail: episodes end, succeed, fail and show errors."""
    pins = json.loads(FIXTURE.read_text())
    steps = [r for rollout in pins.values() for r in rollout if len(r) == 5]
    assert any(r[1] > 0 for r in steps) and any(r[2] for r in steps) and any(r[3] for r in steps)
    assert len({r[0] for r in steps}) > len(pins)  # observations vary within rollouts


def test_infos_share_nothing_with_each_other() -> None:
    """The spec and tools in each info are fresh copies: changing one changes no later info."""
    env = make_env("EnterText", "MiniWoBStyle")
    _, first = env.reset(seed=1)
    first["harness"]["rename_tools"]["click"] = "changed"
    first["tools"][0]["function"]["name"] = "changed"
    first["tools"][0]["function"]["parameters"]["properties"].clear()
    first["legal_actions"].clear()
    _, second = env.reset(seed=1)
    _, _, _, _, third = env.step(second["legal_actions"][0])
    for info in (second, third):
        assert info["harness"]["rename_tools"]["click"] == "CLICK_ELEMENT"
        assert info["legal_actions"]
    assert second["tools"][0]["function"]["name"] != "changed"
    assert second["tools"][0]["function"]["parameters"]["properties"]


def test_fresh_copies_of_data_a_literal_cannot_write() -> None:
    from harness_gym.core.env import fresh_copies

    for value in ({"x": float("nan"), "y": [1, (2, 3)]}, {"set": {1, 2}}, [{"a": {"b": []}}, -0.0, "é\x00"]):
        copy = fresh_copies(value)
        one, two = copy(), copy()
        assert one is not value and one is not two
        assert repr(one) == repr(value) == repr(two)


def test_fresh_copies_of_a_dict_share_only_immutable_values() -> None:
    from harness_gym.core.env import fresh_copies

    value = {"a": "x", "t": (1, ("y", None)), "d": {"k": [1]}, "l": [{}], "n": 2.5, "tl": ([],)}
    copy = fresh_copies(value)
    one, two = copy(), copy()
    assert one == value == two and list(one) == list(value)  # equal, keys in the same order
    one["d"]["k"].append(2)
    one["l"][0]["new"] = 1
    one["tl"][0].append(3)
    one["a"] = "changed"
    assert copy() == value == two != one
    assert all(copy()[k] is not value[k] for k in ("d", "l", "tl"))
    for plain in ({"a": 1, "b": ("c",)}, {}):
        copies = fresh_copies(plain)
        first = copies()
        first["z"] = 0
        assert copies() == plain and copies() is not plain


def _web_tasks() -> list[type]:
    from harness_gym import get_task
    from harness_gym.envs.web.base import WebTask

    return [cls for cls in map(get_task, sorted(TASKS)) if issubclass(cls, WebTask)]


def test_web_digest_is_the_digest_of_the_state() -> None:
    """WebTask.digest writes the page itself: the same digest as the generic one, at every
    step of random episodes of every web task (hidden elements, checked boxes, options)."""
    from harness_gym.core.task import Task, state_digest

    tasks = _web_tasks()
    assert len(tasks) >= 10
    for cls in tasks:
        task = cls()
        for seed in range(25):
            rng = np.random.default_rng(seed)
            task.reset(rng)
            for _ in range(8):
                assert task.digest() == Task.digest(task) == state_digest(task.state()), (cls, seed)
                legal = task.legal_actions()
                if not legal:
                    break
                task.step(legal[int(rng.integers(len(legal)))])


def test_web_digest_of_values_of_other_types() -> None:
    """Element values of types other than declared (a numpy int ref, an int value, checked=1,
    non-ASCII text, attributes that are not text) and an extra state named ``page`` are
    digested as the generic digest digests them."""
    from harness_gym.core.task import Task
    from harness_gym.envs.web.tasks.enter_text import EnterText

    class OddEnterText(EnterText):
        def extra_state(self) -> dict[str, Any]:
            return {**super().extra_state(), "z": [1.5, None, {"b": 1, "a": "é"}]}

    task = OddEnterText()
    task.reset(np.random.default_rng(0))
    plain = task.digest()
    assert plain == Task.digest(task)
    for change in (
        lambda e: setattr(e, "ref", np.int64(e.ref)),
        lambda e: setattr(e, "value", 7),
        lambda e: setattr(e, "checked", 1),
        lambda e: setattr(e, "text", 'naïve "quoted" \n\x00 ☃ \U0001f600'),
        lambda e: e.attrs.update({"z": 1, "a": None, "m": ["x"]}),
        lambda e: setattr(e, "options", ("a", "b")),
        lambda e: setattr(e, "visible", 0),
    ):
        change(task.field)
        assert task.digest() == Task.digest(task)
    assert task.digest() != plain

    class PageInExtra(EnterText):
        def extra_state(self) -> dict[str, Any]:
            return {"page": "replaced"}

    task = PageInExtra()
    task.reset(np.random.default_rng(0))
    assert task.state()["page"] == "replaced"
    assert task.digest() == Task.digest(task)


def test_state_text_with_written_parts_is_the_whole_text() -> None:
    from harness_gym.core.task import state_text

    state = {"b": [1, {"y": 2, "x": None}], "a": "é", "page": None, "c": True, "pagf": 0.5}
    for written in ({"page": '[{"k":1}]'}, {"a": state_text("é"), "c": "true"}, {}):
        whole = {**state, **{k: __import__("json").loads(v) for k, v in written.items()}}
        assert state_text(state, written=written) == state_text(whole)
