"""Imports point down the layers: core -> envs/wrappers/llm/multiagent/rollout ->
baselines/train/analysis/integrations -> cli, with no import circle anywhere.

The graph is read from the source with :mod:`ast`, so imports inside functions count too
(they run at call time, and a circle through them is still a circle). Imports under
``if TYPE_CHECKING:`` never run: they count for the layer order, and for circles only in
``core/``, the bottom layer, which has none even through them (the type checker's view of a
circle is still a circle to a reader).
``python tests/test_import_layers.py`` prints the circles and upward imports it finds.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "harness_gym"
PACKAGE = "harness_gym"

#: Layer of each top-level part of the package; a module may import its own layer or lower.
#: ``harness_gym`` itself (the facade that registers the envs) sits above envs.
LAYERS: dict[str, int] = {
    "core": 0,
    "progress": 0,
    "logging_backends": 0,  # run logs (TensorBoard, W&B) for training, sweeps and searches
    "rows": 0,  # the row schema and store (sweep, search and multi-agent rows)
    "rollout": 1,
    "envs": 1,
    "wrappers": 1,
    "llm": 1,
    "multiagent": 1,
    "": 1.5,  # harness_gym/__init__.py
    "baselines": 2,
    "train": 2,
    "analysis": 2,
    "integrations": 2,
    "cli": 3,
}


def module_names() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, typing_only: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every import node, with whether it sits under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, typing_only
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.body:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), True)
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), typing_only)
        else:
            yield from _imports(node, typing_only)


def edges() -> dict[str, dict[str, bool]]:
    """module -> {imported package module: whether the import is for type checking only}."""
    modules = module_names()
    graph: dict[str, dict[str, bool]] = {name: {} for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, typing_only in _imports(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                assert isinstance(node, ast.ImportFrom)
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base]) if base else ".".join(anchor)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                while target and target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    previous = graph[name].get(target, True)
                    graph[name][target] = previous and typing_only
    return graph


def layer(module: str) -> float:
    parts = module.split(".")
    part = parts[1] if len(parts) > 1 else ""
    if part not in LAYERS:
        raise AssertionError(f"{module}: add its part {part!r} to LAYERS in {Path(__file__).name}")
    return LAYERS[part]


def upward_imports(graph: dict[str, dict[str, bool]]) -> list[str]:
    return [
        f"{src} (layer {layer(src)}) imports {dst} (layer {layer(dst)})"
        for src, targets in sorted(graph.items())
        for dst in sorted(targets)
        if layer(dst) > layer(src)
    ]


def circles(graph: dict[str, dict[str, bool]], typing: bool = False) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): runtime imports
    only, or with ``typing`` the imports under ``if TYPE_CHECKING:`` too."""
    runtime = {
        src: sorted(d for d, typing_only in targets.items() if typing or not typing_only)
        for src, targets in graph.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in runtime[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(runtime):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_graph_sees_function_level_imports() -> None:
    graph = edges()
    assert len(graph) > 100
    # harness_gym/__init__ imports the core and the envs at module level
    assert "harness_gym.core.registry" in graph["harness_gym"]
    # a function-level import is an edge: the sweep's cell runner imports the rollout in functions
    assert graph["harness_gym.analysis.sweep.cell"]["harness_gym.rollout"] is False


def test_the_checks_find_a_planted_circle_and_upward_import() -> None:
    graph = {
        "harness_gym.core.a": {"harness_gym.core.b": False},
        "harness_gym.core.b": {"harness_gym.core.a": False, "harness_gym.analysis.x": True},
        "harness_gym.analysis.x": {"harness_gym.core.a": False},
        "harness_gym.cli.y": {"harness_gym.analysis.x": False},
    }
    assert circles(graph) == [["harness_gym.core.a", "harness_gym.core.b"]]
    assert upward_imports(graph) == ["harness_gym.core.b (layer 0) imports harness_gym.analysis.x (layer 2)"]
    graph["harness_gym.core.b"]["harness_gym.core.a"] = True  # only for type checking: no circle
    assert circles(graph) == []
    # ... but seen with them: b -> x (typing only) -> a -> b is one circle too
    seen = [["harness_gym.analysis.x", "harness_gym.core.a", "harness_gym.core.b"]]
    assert circles(graph, typing=True) == seen


def test_no_import_circle() -> None:
    found = circles(edges())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


#: Circles outside core/ that only type checkers see (imports under ``if TYPE_CHECKING:``),
#: by name: none today, so a new one fails. core/ may have none at all.
KNOWN_TYPING_CIRCLES: list[list[str]] = []


def test_no_circle_in_core_even_through_type_checking_imports() -> None:
    """grammar.py and the tool styles, the styles and the toolbox, once imported each other
    (13 modules, through ``if TYPE_CHECKING:``); now the grammar's primitives sit below the
    styles, the styles see the toolbox through ``ToolboxView`` and the toolbox's grammar
    assembly is in the tools package (``tools/toolbox_grammar.py``)."""
    found = circles(edges(), typing=True)
    in_core = [c for c in found if any(m.startswith(f"{PACKAGE}.core") for m in c)]
    assert not in_core, "import circles in core/:\n" + "\n".join(" <-> ".join(c) for c in in_core)
    assert found == KNOWN_TYPING_CIRCLES, "new import circles:\n" + "\n".join(
        " <-> ".join(c) for c in found if c not in KNOWN_TYPING_CIRCLES
    )
    graph = edges()  # the tools the circle ran through are still there, one way round
    assert "harness_gym.core.grammar" in graph["harness_gym.core.tools.bracket_style"]
    assert "harness_gym.core.tools.style" in graph["harness_gym.core.tools.toolbox"]
    assert not any(m.startswith("harness_gym.core.tools") for m in graph["harness_gym.core.grammar"])


def test_imports_point_down_the_layers() -> None:
    found = upward_imports(edges())
    assert not found, "upward imports:\n" + "\n".join(found)


if __name__ == "__main__":
    graph = edges()
    found_circles = circles(graph)
    found_upward = upward_imports(graph)
    for component in found_circles:
        print("circle:", " <-> ".join(component))
    for component in circles(graph, typing=True):
        if component not in found_circles:
            print("circle through TYPE_CHECKING imports:", " <-> ".join(component))
    for line in found_upward:
        print("upward:", line)
    print(f"{len(graph)} modules, {len(found_circles)} import circles, {len(found_upward)} upward imports")
