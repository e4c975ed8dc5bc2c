"""The docs are executed and checked.

Every Python block in docs/*.md runs (blocks of one page share a namespace, in order) and
asserts its outcome; the factor table in docs/concepts.md names every built-in level; the
counts the README states (tasks, factors, presets) and the default space's sizes in
docs/harness-space.md are the code's.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import gymnasium as gym
import pytest

from harness_gym import PRESETS, TASKS, Harness
from harness_gym.core import plugins, tools
from harness_gym.core.formats import BUILTIN_FORMATS, RENDERERS
from harness_gym.core.harness import LEVELS
from harness_gym.envs.web import WEB_TASKS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if "```python" in p.read_text())


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


def test_there_are_runnable_docs() -> None:
    names = {p.name for p in PAGES}
    assert {"quickstart.md", "concepts.md", "adding-a-task.md", "adding-a-factor.md", "plugins.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_worked_example_asserts_its_outcome(page: Path) -> None:
    """A block that only prints would pass whatever it printed (as the old adding-a-task.md
    example did, whose oracle solved 11 of 20 seeds under a ceiling of 1.0)."""
    silent = [
        f"block {i + 1} ({block.strip().splitlines()[0][:60]!r})"
        for i, block in enumerate(python_blocks(page))
        if not re.search(r"^\s*assert\b", block, flags=re.M)
    ]
    assert not silent, f"{page.name}: these examples assert nothing: {silent}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_doc_examples_run(
    page: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real module, so dataclasses and pickling can find the example's classes.
    module = types.ModuleType(f"docs_{page.stem.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    # Examples register tasks, env ids, levels and agents: undo that so other tests see the suite.
    registries = [TASKS, RENDERERS, tools.STYLES, tools._ALL_STYLES, plugins.AGENTS, PRESETS, gym.registry]
    saved = [dict(r) for r in registries]
    try:
        for block in python_blocks(page):
            exec(compile(block, str(page), "exec"), module.__dict__)
    finally:
        for registry, before in zip(registries, saved, strict=True):
            registry.clear()
            registry.update(before)
    assert capsys.readouterr().out, "examples should show their results"


def _factor_rows(page: Path) -> dict[str, str]:
    rows = {}
    for line in page.read_text().splitlines():
        m = re.match(r"\|\s*`(\w+)`\s*\|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_the_factor_table_lists_every_factor_and_built_in_level() -> None:
    rows = _factor_rows(DOCS / "concepts.md")
    assert set(Harness.factor_names()) <= set(rows), set(Harness.factor_names()) - set(rows)
    builtin = {"obs_format": BUILTIN_FORMATS, "tool_style": tools.TOOL_STYLES}
    for factor, levels in LEVELS.items():
        missing = [lv for lv in builtin.get(factor, levels) if f"`{lv}`" not in rows[factor]]
        assert not missing, f"docs/concepts.md: the {factor} row does not name {missing}"


NUMBER_WORDS = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten".split())}


def _stated(text: str, pattern: str) -> int:
    m = re.search(pattern, text)
    assert m, f"README no longer says {pattern!r}; update this test with the README"
    word = m.group(1)
    return NUMBER_WORDS[word] if word in NUMBER_WORDS else int(word)


@pytest.mark.parametrize(
    ("pattern", "actual"),
    [
        (r"(\w+) pure-Python web tasks", lambda: len(WEB_TASKS)),
        (r"immutable spec with (\w+) factors", lambda: len(Harness.factor_names())),
        (r"(\w+) presets that cover every level", lambda: len(PRESETS)),
    ],
    ids=["web tasks", "factors", "presets"],
)
def test_counts_in_the_readme_are_the_codes(pattern: str, actual: object) -> None:
    readme = (ROOT / "README.md").read_text()
    assert _stated(readme, pattern) == actual()  # type: ignore[operator]


def test_integrations_page_states_the_pillow_this_venv_imports() -> None:
    """docs/integrations.md states the pillow of the project's venv and of ``.venv-openenv``
    (layered on it); in either venv (``make test`` and ``make test-openenv`` run this) the
    stated version is the one installed. ``make test-verifiers`` selects this file's
    integrations tests too, but ``.venv-verifiers`` is not layered on the project's venv
    (verifiers pins what openenv cannot take) and resolves its own pillow, which the page does
    not state."""
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec("verifiers") is not None:
        pytest.skip("the verifiers venv resolves its own pillow; the page states the other two venvs'")
    try:
        installed = importlib.metadata.version("pillow")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pillow is not installed here (the browser extra)")
    page = (DOCS / "integrations.md").read_text()
    stated = re.search(r"`pillow==([\w.]+)` in both\s+venvs", page)
    assert stated, "docs/integrations.md no longer states the venvs' pillow; update this test with it"
    assert stated.group(1) == installed


def test_sizes_in_the_harness_space_page_are_the_codes() -> None:
    from harness_gym.core.space import DEFAULT_SPACE

    page = (DOCS / "harness-space.md").read_text()
    size = re.search(r"size for `DEFAULT_SPACE` \(([\d,]+) points\)", page)
    assert size and int(size.group(1).replace(",", "")) == DEFAULT_SPACE.size
    balanced = re.search(r"\| `space.balanced\(\)` \|.*\| (\d+) \(lower bound \d+\) \|", page)
    assert balanced and int(balanced.group(1)) == len(DEFAULT_SPACE.balanced_design())
