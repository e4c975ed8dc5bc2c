"""A history written item by item (HISTORY_SPLICES) is the very text of the whole render."""

from __future__ import annotations

import pytest

from harness_gym import make_env
from harness_gym.core.formats import HISTORY_FIELD, HISTORY_SPLICES, RENDERERS

ENTRIES = [
    {
        "observation": {"instruction": 'Say "hi" <b> & é', "page": [{"ref": 1, "tag": "input", "value": ""}]},
        "action": "x",
    },
    {"observation": {}, "action": "\x00 control \n newline"},
    {"observation": {"page": []}, "action": ""},
    {},
]
HEADS = [
    [],
    [("instruction", "Click <OK>"), ("page", [{"ref": 2, "children": [{"ref": 3, "text": "a"}]}])],
    [("step", 3), ("last_error", ""), ("error", "bad\nreply")],
    [("empty", {}), ("none", None), ("list", [])],
]


@pytest.mark.parametrize("fmt", sorted(HISTORY_SPLICES))
@pytest.mark.parametrize("head", HEADS, ids=range(len(HEADS)))
@pytest.mark.parametrize("count", [0, 1, 2, len(ENTRIES)])
def test_spliced_history_equals_the_full_render(fmt: str, head: list, count: int) -> None:
    item, join = HISTORY_SPLICES[fmt]
    render = RENDERERS[fmt]
    entries = ENTRIES[:count]
    assert join(render(head), [item(e) for e in entries]) == render([*head, (HISTORY_FIELD, entries)])


@pytest.mark.parametrize("preset", ["JsonTranscript", "BundleXml", "BundleMarkdown", "BundleKeyValue"])
def test_env_observations_with_history_match_a_full_render(preset: str) -> None:
    """Each observation equals the bound harness's render of the whole history, written anew."""
    env = make_env("EmailInbox", preset)
    base = env.unwrapped
    obs, info = env.reset(seed=5)
    for i in range(12):
        obs, _, terminated, truncated, info = env.step(info["legal_actions"][i % len(info["legal_actions"])])
        if terminated or truncated:
            break
        full = base.bound.render(
            base.task.fields(), step=base._steps, error=None, history=list(base._history)
        )
        assert obs == full
    assert len(base._history) >= 2  # the history really grew
