"""The prebuilt JSON encoders give exactly json.dumps's text, for every option set in use."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal

import pytest

from harness_gym.core.json_dumps import dumps_function

VALUES = [
    "plain",
    'quote " backslash \\ newline \n tab \t',
    "é ü 日本 \U0001f600 \x00 \x1f \u2028 \ud800",
    0,
    -7,
    1.5,
    float("nan"),
    float("inf"),
    True,
    None,
    [],
    {},
    {"b": 1, "a": [1, {"z": None, "y": "é"}], "c": {"k": (1, 2)}},
    [{"ref": 1, "tag": "input", "value": "", "children": [{"ref": 2, "text": "x"}]}],
    {1: "int key", 2.5: "float key", False: "bool key", None: "none key"},
]
OPTIONS = [
    {},
    {"ensure_ascii": False},
    {"sort_keys": True, "separators": (",", ":"), "default": str},
]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_text_equals_json_dumps(options: dict, value: object) -> None:
    ours = _outcome(lambda: dumps_function(**options)(value))
    assert ours == _outcome(lambda: json.dumps(value, **options))


def _outcome(write: Callable[[], str]) -> str:
    try:
        return write()
    except TypeError as err:  # e.g. keys of mixed types under sort_keys
        return f"TypeError {err}"


def test_default_is_used_and_its_absence_raises() -> None:
    value = {"d": Decimal("1.25"), "s": {3}}
    assert dumps_function(default=str)(value) == json.dumps(value, default=str)
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_function()(value)


def test_sorting_mixed_keys_raises_like_json_dumps() -> None:
    with pytest.raises(TypeError):
        json.dumps({1: 0, "a": 0}, sort_keys=True)
    with pytest.raises(TypeError):
        dumps_function(sort_keys=True)({1: 0, "a": 0})


def test_an_encoder_pickles_and_writes_the_same_text_after() -> None:
    # envs hold these encoders, and vector envs pickle envs into their workers
    import pickle

    import cloudpickle

    dumps = dumps_function(sort_keys=True, separators=(",", ":"), default=str)
    value = {"b": [1, 2.5, None], "a": "é", "c": object}
    for copy in (pickle.loads(pickle.dumps(dumps)), cloudpickle.loads(cloudpickle.dumps(dumps))):
        assert (
            copy(value)
            == dumps(value)
            == json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
        )
