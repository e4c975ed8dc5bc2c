"""Harness panels: one task instance under K harnesses, stepped as one batch."""

from __future__ import annotations

import numpy as np
import pytest

from harness_gym import PRESETS, Harness
from harness_gym.core.panel import make_panel
from harness_gym.core.space import DEFAULT_SPACE


def test_one_task_instance_under_every_harness() -> None:
    panel = make_panel("BookFlight", list(PRESETS.values()))
    obs, info = panel.reset(seed=12)
    # The first observation depends only on the format, the field order and the fields shown
    # (the history is empty at reset): presets that differ elsewhere (tools, parser, what a
    # language model is sent) render the same text, and every other pair differs.
    shown = {
        (h.obs_format, h.field_order, h.element_order, h.extra_fields, bool(h.history_window))
        for h in PRESETS.values()
    }
    assert len(obs) == len(PRESETS) and len(set(obs)) == len(shown) < len(PRESETS)
    assert len(set(info["state_digest"])) == 1
    assert list(info["harness_id"]) == [h.id for h in PRESETS.values()]
    while not panel.done:
        obs, rewards, terminated, truncated, info = panel.step([e.oracle_action() for e in panel.envs])
    assert rewards.tolist() == [1.0] * len(PRESETS) and terminated.all()


def test_members_that_finish_early_stay_finished() -> None:
    harnesses = [Harness(invalid_action="end"), Harness(invalid_action="feedback")]
    panel = make_panel("EnterText", harnesses)
    panel.reset(seed=0)
    obs, rewards, terminated, truncated, info = panel.step(["garbage", "garbage"])
    assert terminated.tolist() == [True, False] and info["active"].tolist() == [False, True]
    frozen = obs[0]
    steps = 0
    while not panel.done:
        obs, rewards, terminated, truncated, info = panel.step(["", panel.envs[1].oracle_action()])
        steps += 1
        assert obs[0] == frozen and rewards[0] == 0.0
        assert not info["_step"][0], "a finished member is not stepped"
    assert rewards[1] == 1.0 and steps >= 2


def test_panel_over_a_balanced_subset_gives_paired_groups() -> None:
    subset = DEFAULT_SPACE.balanced(2)
    panel = make_panel("ClickCheckboxes", subset)
    rng = np.random.default_rng(0)
    for seed in range(3):
        _, info = panel.reset(seed=seed)
        assert len(set(info["state_digest"])) == 1
        while not panel.done:
            legal = info["legal_actions"]
            actions = [
                a[int(rng.integers(len(a)))] if active and a else ""
                for a, active in zip(legal, info["active"], strict=True)
            ]
            _, _, _, _, info = panel.step(actions)


def test_panel_bad_input() -> None:
    panel = make_panel("ClickButton", ["Json", "BundleXml"])
    with pytest.raises(TypeError, match="one task seed"):
        panel.reset(seed=[1, 2])  # type: ignore[arg-type]
    panel.reset(seed=0)
    with pytest.raises(ValueError, match="needs 2 actions"):
        panel.step(["x"])
    with pytest.raises(ValueError, match="at least one harness"):
        make_panel("ClickButton", [])
