"""The simulator's modules import each other without cycles (type-only imports count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_sglang.simulator

PACKAGE = "pytest_sglang.simulator"
ROOT = Path(pytest_sglang.simulator.__file__).parent


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports (``import``, ``from .. import``, also under TYPE_CHECKING)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)  # "from pkg import module"
    return found & modules


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join((PACKAGE, *parts[:-1], *([] if parts[-1] == "__init__" else parts[-1:])))


def _graph() -> dict[str, set[str]]:
    paths = {_name(p): p for p in ROOT.rglob("*.py") if p != ROOT / "__init__.py"}
    return {name: _imports(path, set(paths)) - {name} for name, path in paths.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt == path[0]:
                cycles.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:  # report each cycle once, from its smallest module
                visit(nxt, [*path, nxt])

    for start in sorted(graph):
        visit(start, [start])
    return cycles


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b", "a"]]


def test_simulator_modules_have_no_import_cycles() -> None:
    graph = _graph()
    engine = f"{PACKAGE}.scheduling.engine"
    assert engine in graph and f"{PACKAGE}.scheduling.stats" in graph[engine]
    assert _cycles(graph) == []
