"""Inputs the agent writes that parsed and then broke what came after (issue 43 section 3).

A lone UTF-16 surrogate (raw, or a JSON / Python ``\\ud800`` escape) parsed as text; afterwards
json, markdown, key_value and html observations could not be encoded, export stopped with an
empty file, and every request to an OpenAI-compatible server failed. It is refused at parse
time, under every tool style and both parsers, and the next observation of
every format still encodes as UTF-8.
(``malformed`` for a raw one, ``wrong_type`` for an argument that an escape made one.)
"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import harness_gym  # noqa: F401  (registers the envs)
from harness_gym.core.tools import TOOL_STYLES

FORMATS = ("json", "markdown", "key_value", "html", "xml", "yaml")


def _replies(style: str, oracle: str) -> list[str]:
    """The oracle's reply with its text argument made a lone surrogate, raw and escaped."""
    raw = oracle.replace("marble", "\ud800")
    replies = [raw]
    if style in ("json", "json_flat"):
        replies.append(oracle.replace("marble", "\\ud800"))
    if style.startswith("python"):
        replies.append(oracle.replace("marble", "\\ud800"))
    return replies


@pytest.mark.parametrize("parser", ["strict", "lenient"])
@pytest.mark.parametrize("style", TOOL_STYLES)
def test_a_lone_surrogate_is_refused_at_parse_time(style: str, parser: str) -> None:
    for fmt in FORMATS:
        env = gym.make(
            "harness_gym/EnterText-v0", harness={"tool_style": style, "parser": parser, "obs_format": fmt}
        )
        env.reset(seed=0)
        oracle = env.unwrapped.oracle_action()
        assert "marble" in oracle, oracle
        for reply in _replies(style, oracle):
            obs, _, _, _, info = env.step(reply)
            # raw: malformed text; escaped: an argument that is not text
            assert info["error_kind"] in ("malformed", "wrong_type"), (style, parser, fmt, reply, info)
            obs.encode("utf-8")  # the next observation still encodes
            json.dumps(info, default=str).encode("utf-8")
        env.close()


def _step(env_id: str, harness: dict, reply: str) -> tuple[str | None, str]:
    env = gym.make(env_id, harness=harness)
    env.reset(seed=0)
    _, _, _, _, info = env.step(reply)
    state = json.dumps(env.unwrapped.task.state(), default=str)
    env.close()
    return info["error_kind"], state


@pytest.mark.parametrize(
    "reply",
    [
        "select 2 Yarrow;;select 3 Toronto",
        "select 2 Yarrow\t,\r\nselect 3 Toronto",
        "select 2 Toronto,;;select 3 Havana",
        "select 2 Yarrow && select 1 Yarrow",
        "$ select 2 Yarrow; select 1 Yarrow",
    ],
)
def test_command_style_lenient_flags_two_actions(reply: str) -> None:
    harness = {"tool_style": "command", "parser": "lenient"}
    kind, state = _step("harness_gym/ChooseList-v0", harness, reply)
    assert kind == "multiple_actions", (reply, kind)
    _, untouched = _step("harness_gym/ChooseList-v0", harness, "nosuchtool")
    assert state == untouched  # nothing ran


@pytest.mark.parametrize(
    "reply", ["select 2 Yarrow", "I pick it.\nselect 2 Yarrow", "select is it\nselect 2 Yarrow"]
)
def test_command_style_lenient_still_takes_one_action(reply: str) -> None:
    kind, _ = _step("harness_gym/ChooseList-v0", {"tool_style": "command", "parser": "lenient"}, reply)
    assert kind is None, (reply, kind)


@pytest.mark.parametrize("text", ["a,}b, ]c", "x,]", ',}"', "plain, text"])
def test_trailing_comma_repair_never_edits_a_string(text: str) -> None:
    from harness_gym.core.tools.json_text import load_reply

    reply = json.dumps({"name": "type", "arguments": {"ref": 3, "text": text}})
    with_commas = reply[:-2] + ",},"[:2] + "}"  # {"name": ..., "arguments": {...,},}
    assert load_reply(with_commas, lenient=True)["arguments"]["text"] == text
    assert load_reply(reply.replace("}}", ",},}"), lenient=True) == json.loads(reply)


@pytest.mark.parametrize("parser", ["strict", "lenient"])
@pytest.mark.parametrize("reply", ["type [2] [a] [b]", "type [2] [a]  [b]", "type [2] [a]\t[b]"])
def test_bracket_style_refuses_an_extra_group(reply: str, parser: str) -> None:
    kind, state = _step("harness_gym/EnterText-v0", {"tool_style": "bracket", "parser": parser}, reply)
    assert kind in ("extra_argument", "multiple_actions"), (reply, kind)
    assert "a] [b" not in state  # nothing was typed


BOMB = "".join(
    f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + BOMB


@pytest.mark.parametrize("kind", ["harness", "space"])
def test_a_yaml_bomb_is_refused_without_expanding_it(kind: str, tmp_path) -> None:  # noqa: ANN001
    import time

    from harness_gym.core.harness import Harness, HarnessSpecError
    from harness_gym.core.space import HarnessSpace

    path = tmp_path / f"{kind}.yaml"
    key = "obs_format" if kind == "harness" else "factors"
    path.write_text(BOMB + f"{key}: *i\n")
    start = time.process_time()  # CPU seconds: an expanded bomb takes minutes, this ~0
    with pytest.raises(HarnessSpecError, match=r"aliases \(\*a\) are not allowed") as err:
        Harness.from_yaml(path) if kind == "harness" else HarnessSpace.from_yaml(path)
    assert time.process_time() - start < 5.0 and len(str(err.value)) < 2_100


def test_a_spec_error_echoes_at_most_a_bounded_value(tmp_path) -> None:  # noqa: ANN001
    from harness_gym.core.harness import Harness, HarnessSpecError

    path = tmp_path / "h.yaml"
    path.write_text("obs_format: " + "x" * 1_000_000 + "\n")
    with pytest.raises(HarnessSpecError) as err:
        Harness.from_yaml(path)
    assert len(str(err.value)) < 2_100 and "characters in all" in str(err.value)


def test_worked_examples_never_show_the_episodes_own_page() -> None:
    """Few pages, much hidden state: many seeds show the same page under another digest."""
    import numpy as np
    from test_checker_rules import PickLargest

    from harness_gym import Harness
    from harness_gym.core.env import HarnessEnv

    class FewPages(PickLargest):
        task_id = "InputsFewPages"

        def reset(self, rng: np.random.Generator) -> None:
            super().reset(rng)
            self.numbers = [[1, 5, 3, 2, 4], [9, 7, 8, 6, 5]][int(rng.integers(2))]
            self.hidden = int(rng.integers(10**9))  # in the digest, never shown

        def state(self) -> dict:
            return {**super().state(), "hidden": self.hidden}

    env = HarnessEnv(FewPages, Harness(few_shot=2))
    shown = 0
    for seed in range(12):
        env.reset(seed=seed)
        own_page = env.bound.render(env.task.fields(), step=0)
        examples = env._episode_examples
        shown += len(examples)
        assert all(obs != own_page for obs, _ in examples), seed
    assert shown > 0  # examples were still shown (from the other page)
