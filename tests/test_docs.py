"""Every Python block in docs/*.md runs (blocks of one page share a namespace, in order)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import gymnasium as gym
import pytest

from harness_gym import TASKS
from harness_gym.core.formats import RENDERERS

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if "```python" in p.read_text())


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


def test_there_are_runnable_docs() -> None:
    names = {p.name for p in PAGES}
    assert {"quickstart.md", "concepts.md", "adding-a-task.md", "adding-a-factor.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_doc_examples_run(
    page: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real module, so dataclasses and pickling can find the example's classes.
    module = types.ModuleType(f"docs_{page.stem.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    # Examples register tasks, env ids and formats: undo that so other tests see the suite.
    registries = [TASKS, RENDERERS, gym.registry]
    saved = [dict(r) for r in registries]
    try:
        for block in python_blocks(page):
            exec(compile(block, str(page), "exec"), module.__dict__)
    finally:
        for registry, before in zip(registries, saved):
            registry.clear()
            registry.update(before)
    assert capsys.readouterr().out, "examples should show their results"
