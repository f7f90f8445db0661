"""The simulator's folders show its design (issue 31): subpackages by concern, each saying what it may import.

``lint-imports`` holds the order in CI (pyproject.toml: the simulator's layers and its acyclic contract);
this reads the same graph, so a circle or a module back in the flat root shows up in a plain test run too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

import pytest_sglang.simulator

PACKAGE = "pytest_sglang.simulator"
ROOT = Path(pytest_sglang.simulator.__file__).parent
FOLDERS = ("disagg", "failures", "front", "front/openai", "images", "launch", "model", "scheduling")
#: What stays in the root: the launcher (__init__), the entry point and the composition root (server), the
#: state the routes share, the resolved configuration, and two leaves every folder may use.
ROOT_MODULES = {"__init__", "__main__", "config", "logs", "server", "state", "tokenizer"}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("pytest_sglang", cache_dir=None)


def test_the_root_holds_the_composition_root_and_its_leaves_only() -> None:
    assert {p.stem for p in ROOT.glob("*.py")} == ROOT_MODULES
    assert {str(p.parent.relative_to(ROOT)) for p in ROOT.rglob("__init__.py") if p.parent != ROOT} == set(FOLDERS)


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_folder_says_what_lives_there_and_what_it_may_import(folder: str) -> None:
    doc = ast.get_docstring(ast.parse((ROOT / folder / "__init__.py").read_text(encoding="utf-8")))
    assert doc and "May import" in doc, f"simulator/{folder}/__init__.py: no docstring saying what it may import"


@pytest.mark.parametrize("package", [PACKAGE, f"{PACKAGE}.front"])
def test_no_circle_among_the_folders(graph: grimp.ImportGraph, package: str) -> None:
    assert graph.nominate_cycle_breakers(package) == set()


def test_the_engine_imports_no_folder_above_it(graph: grimp.ImportGraph) -> None:
    engine = {m for m in graph.modules if m.startswith(f"{PACKAGE}.scheduling")}
    reached = set().union(*(graph.find_modules_directly_imported_by(m) for m in engine))
    above = {m for m in reached if m.startswith(PACKAGE) and m not in engine}
    assert above <= {f"{PACKAGE}.tokenizer", f"{PACKAGE}.logs"}
