"""Every built-in tool style writes and reads exactly what it did on main before
``core/tools.py`` became a package (see :mod:`tool_style_pins`): the move is a refactor."""

from __future__ import annotations

import json

import pytest
from tool_style_pins import PINS, STYLES, cases, digest, env_cases, record_case, record_env

PINNED = json.loads(PINS.read_text(encoding="utf-8"))


def test_every_built_in_style_is_pinned() -> None:
    from harness_gym.core.tools import TOOL_STYLES

    assert set(STYLES) <= set(TOOL_STYLES)
    assert {key.split("/")[1] for key in PINNED if not key.startswith("env/")} == set(STYLES)
    assert len(PINNED) == len(cases()) + len(env_cases())


@pytest.mark.parametrize("case", cases(), ids=lambda c: c[0])
def test_style_writes_and_reads_as_pinned(case) -> None:  # type: ignore[no-untyped-def]
    key, specs, style, factors = case
    got = {part: digest(value) for part, value in record_case(specs, style, **factors).items()}
    changed = sorted(part for part in PINNED[key] if got.get(part) != PINNED[key][part])
    assert not changed, f"{key}: {changed} differ from main (python tests/tool_style_pins.py shows what)"


@pytest.mark.parametrize("case", env_cases(), ids=lambda c: c[0])
def test_episode_through_each_preset_is_as_pinned(case) -> None:  # type: ignore[no-untyped-def]
    key, task, preset = case
    got = {part: digest(value) for part, value in record_env(task, preset).items()}
    changed = sorted(part for part in PINNED[key] if got.get(part) != PINNED[key][part])
    assert not changed, f"{key}: {changed} differ from main (python tests/tool_style_pins.py shows what)"
