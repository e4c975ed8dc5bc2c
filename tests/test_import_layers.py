"""Imports point down the layers: core -> envs/wrappers/llm/multiagent/rollout ->
baselines/train/analysis/integrations -> cli, with no import circle anywhere; and a
package's ``__init__.py`` hands names on (at most :data:`MAX_INIT_LOGIC` lines of logic), and no
module grows past :data:`MAX_MODULE_LINES` lines (split it by concept instead).

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
#: allowed by name so that a new one fails; remove one when it is gone. core/ may have none.
KNOWN_TYPING_CIRCLES: list[list[str]] = [
    # The verifier's sandbox is typed as the Sandbox that runs it (envs/terminal split, 2026-12).
    ["harness_gym.envs.terminal.sandbox", "harness_gym.envs.terminal.sandbox_verifier"],
]


def test_no_circle_in_core_even_through_type_checking_imports() -> None:
    """grammar.py and the tool styles, the styles and the toolbox, once imported each other
    (13 modules, through ``if TYPE_CHECKING:``); now the grammar's primitives sit below the
    styles, the styles see the toolbox through ``ToolboxView`` and the toolbox's grammar
    assembly is in the tools package (``tools/toolbox_grammar.py``)."""
    found = circles(edges(), typing=True)
    in_core = [c for c in found if any(m.startswith(f"{PACKAGE}.core") for m in c)]
    assert not in_core, "import circles in core/:\n" + "\n".join(" <-> ".join(c) for c in in_core)
    new = [c for c in found if c not in KNOWN_TYPING_CIRCLES]
    assert not new, "new import circles (through TYPE_CHECKING imports):\n" + "\n".join(
        " <-> ".join(c) for c in new
    )
    graph = edges()  # the tools the circle ran through are still there, one way round
    assert "harness_gym.core.grammar" in graph["harness_gym.core.tools.bracket_style"]
    assert "harness_gym.core.tools.style" in graph["harness_gym.core.tools.toolbox"]
    assert not any(m.startswith("harness_gym.core.tools") for m in graph["harness_gym.core.grammar"])


#: A package's ``__init__.py`` hands names on; its logic lives in named modules. Lines of
#: logic: non-blank, non-comment lines outside the module docstring, import statements and
#: ``__all__``.
MAX_INIT_LOGIC = 40
#: ``__init__.py`` files allowed more, by name, each with why: none today.
INIT_LOGIC_ALLOWED: dict[str, str] = {}


def logic_lines(text: str) -> int:
    """Lines of logic in a module's source (see :data:`MAX_INIT_LOGIC`)."""
    tree = ast.parse(text)
    skip: set[int] = set()
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        skip.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        is_all = any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
        if is_all or isinstance(node, (ast.Import, ast.ImportFrom)):
            assert isinstance(node, ast.stmt)
            skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines = text.splitlines()
    return sum(1 for i, line in enumerate(lines, 1) if i not in skip and line.strip()[:1] not in ("", "#"))


def test_logic_lines_count_what_an_init_does_not_hand_on() -> None:
    text = "\n".join(
        [
            '"""A package.',
            "",
            'More docstring."""',
            "",
            "from __future__ import annotations",
            "",
            "import os",
            "from x import (",
            "    a,",
            "    b,",
            ")",
            "",
            '__all__ = ["a",',
            '    "b"]',
            "# a comment",
            "X = 1  # one line of logic",
            "",
            "def f() -> int:",
            '    """Counted: a docstring inside is logic\'s."""',
            "    import json  # an import inside is still an import",
            "    return 2",
        ]
    )
    assert logic_lines(text) == 4  # X =, def, its docstring, return
    assert logic_lines("\n".join(f"V{i} = {i}" for i in range(41))) == 41


def test_package_inits_hand_names_on() -> None:
    found = {}
    for path in sorted(ROOT.rglob("__init__.py")):
        name = path.relative_to(ROOT.parent).as_posix()
        n = logic_lines(path.read_text(encoding="utf-8"))
        if n > MAX_INIT_LOGIC and name not in INIT_LOGIC_ALLOWED:
            found[name] = n
    stale = [name for name in INIT_LOGIC_ALLOWED if not (ROOT.parent / name).exists()]
    assert not found, (
        f"a package's __init__.py hands names on (at most {MAX_INIT_LOGIC} lines of logic); "
        f"move the logic into named modules: {found}"
    )
    assert not stale, f"allowed in INIT_LOGIC_ALLOWED but gone: {stale}"


#: The longest a module may be (lines of source): past it, a module holds several concepts.
MAX_MODULE_LINES = 1000


def test_no_module_is_over_a_thousand_lines() -> None:
    long = {}
    for path in sorted(ROOT.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > MAX_MODULE_LINES:
            long[path.relative_to(ROOT.parent).as_posix()] = lines
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split each by concept): {long}"


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
