"""The ``element_order`` factor: the order of the keys inside a page's elements.

Contract 2 over the factor: reordering elements' keys changes neither the task instance nor
the exact ceiling, under every observation format, on every web task; the grammar of valid
replies is the same text; history entries show the order the observation showed.
"""

from __future__ import annotations

import json

import pytest

from harness_gym import PRESETS, TASKS, Harness, HarnessSpecError, make_env
from harness_gym.analysis.ceiling import seed_ceiling
from harness_gym.core.checker import check_harness
from harness_gym.core.formats import FORMATS
from harness_gym.core.harness import ELEMENT_ORDERS, LEVELS, BoundHarness, order_elements

REVERSED = Harness(element_order="reversed")


def _elements(value: object) -> list[dict]:
    """Every mapping inside ``value`` (depth first)."""
    out: list[dict] = []
    if isinstance(value, dict):
        out.append(value)
        for v in value.values():
            out.extend(_elements(v))
    elif isinstance(value, list):
        for v in value:
            out.extend(_elements(v))
    return out


def test_levels_are_checked_and_the_default_keeps_every_id() -> None:
    assert tuple(LEVELS["element_order"]) == ELEMENT_ORDERS == ("canonical", "reversed")
    assert Harness(element_order="canonical").id == Harness().id
    assert REVERSED.id != Harness().id
    assert Harness.from_dict(REVERSED.to_dict()) == REVERSED
    assert Harness.from_yaml(REVERSED.to_yaml()).to_dict(full=False) == {"element_order": "reversed"}
    with pytest.raises(
        HarnessSpecError, match=r"factor 'element_order'; valid levels: \['canonical', 'reversed'\]"
    ):
        Harness(element_order="sorted")
    with pytest.raises(HarnessSpecError, match="element_order"):
        Harness.from_dict({"element_order": ["text", "ref"]})


def test_reversed_elements_show_the_same_data_with_each_elements_keys_reversed() -> None:
    for seed in range(20):
        plain = json.loads(make_env("ClickButton", Harness()).reset(seed=seed)[0])
        shown = json.loads(make_env("ClickButton", REVERSED).reset(seed=seed)[0])
        assert shown == plain  # the same keys and values
        assert list(shown) == list(plain) == ["instruction", "title", "page"]  # fields keep their order
        pairs = list(zip(_elements(plain["page"]), _elements(shown["page"]), strict=True))
        assert len(pairs) >= 4
        for a, b in pairs:
            assert list(b) == list(reversed(a))
        buttons = [b for _, b in pairs if b.get("tag") == "button"]
        assert buttons and all(list(b) == ["text", "tag", "ref"] for b in buttons)


def test_each_order_changes_alone_and_both_compose() -> None:
    seed = 3
    fields = json.loads(make_env("ClickButton", Harness(field_order="reversed")).reset(seed=seed)[0])
    both = json.loads(
        make_env("ClickButton", Harness(field_order="reversed", element_order="reversed")).reset(seed=seed)[0]
    )
    assert list(fields) == list(both) == ["page", "title", "instruction"]
    assert list(fields["page"][0]) == ["ref", "tag", "id", "children"]
    assert list(both["page"][0]) == ["children", "id", "tag", "ref"]


def test_order_elements_keeps_lists_scalars_and_returns_canonical_values_untouched() -> None:
    value = {"a": 1, "b": [{"x": 1, "y": (2, {"p": 0, "q": 1})}], "c": "s"}
    assert order_elements(value, "canonical") is value
    out = order_elements(value, "reversed")
    assert list(out) == ["c", "b", "a"] and list(out["b"][0]) == ["y", "x"]
    assert isinstance(out["b"][0]["y"], tuple) and list(out["b"][0]["y"][1]) == ["q", "p"]
    assert out == value and list(value) == ["a", "b", "c"]  # the task's own value is not changed


@pytest.mark.parametrize("task", list(TASKS))
def test_the_oracle_and_the_instance_do_not_move_under_any_format(task: str) -> None:
    for obs_format in FORMATS:
        plain = make_env(task, Harness(obs_format=obs_format))
        turned = make_env(task, Harness(obs_format=obs_format, element_order="reversed"))
        for seed in range(3):
            _, a = plain.reset(seed=seed)
            _, b = turned.reset(seed=seed)
            assert a["state_digest"] == b["state_digest"]
            assert a["legal_actions"] == b["legal_actions"]  # the action texts are the same
            done, success = False, False
            while not done:
                _, _, term, trunc, info = turned.step(turned.oracle_action())
                done, success = term or trunc, info["success"]
            assert success


@pytest.mark.parametrize("task", ["ClickButton", "ClickCheckboxes", "NavigateTree", "EnterText"])
def test_exact_ceilings_are_the_same_under_both_orders(task: str) -> None:
    for seed in range(3):
        a = seed_ceiling(task, Harness(), seed)
        b = seed_ceiling(task, REVERSED, seed)
        assert a == b and a[1] == "exact"


def test_the_grammar_of_valid_replies_is_the_same() -> None:
    plain, turned = make_env("ClickButton", Harness()), make_env("ClickButton", REVERSED)
    plain.reset(seed=1)
    turned.reset(seed=1)
    legal = plain.legal_actions()
    assert plain.bound.grammar(legal) == turned.bound.grammar(legal)


@pytest.mark.parametrize("obs_format", ["json", "yaml", "markdown", "xml"])
def test_history_shows_earlier_observations_in_the_order_they_were_shown(obs_format: str) -> None:
    harness = Harness(obs_format=obs_format, element_order="reversed", history_window=1)
    env = make_env("ClickCheckboxes", harness)
    first, _ = env.reset(seed=0)
    texts = env.bound.legal_texts(env.legal_actions())
    wrong = next(t for t in texts if t != env.oracle_action())
    second, *_ = env.step(wrong)
    # The earlier observation's page, as the history shows it, keeps the reversed element order.
    page = env.bound.ordered_fields(env._fields)["page"]
    head = list(_elements(page)[0])
    assert head[-1] == "ref" and head[0] != "ref"
    # The spliced text equals a full render of the same history.
    full = env.bound.render(env._fields, step=1, history=env._history)
    assert second == full


def test_the_checker_passes_the_factor_and_notes_a_format_that_ignores_it() -> None:
    assert check_harness("JsonElementsReversed", "ClickButton", seeds=range(3)).ok
    report = check_harness(
        Harness(obs_format="axtree", element_order="reversed"), "ClickButton", seeds=range(2)
    )
    assert report.ok and any("element_order=reversed renders the same text" in n for n in report.notes)
    assert "JsonElementsReversed" in PRESETS


def test_the_checker_fails_a_harness_that_does_not_apply_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # A bound harness (a family's subclass, say) that shows the task's fields as they come.
    monkeypatch.setattr(
        BoundHarness, "ordered_fields", lambda self, fields: {n: fields[n] for n in self.field_order}
    )
    report = check_harness(REVERSED, "ClickButton", seeds=range(2), raise_on_failure=False)
    assert not report.ok
    failure = next(f for f in report.failures if f.check == "element_order")
    assert "not reversed" in failure.message and failure.levels == {"element_order": "reversed"}
