"""The house's import structure (issue 31), read from the same graph ``lint-imports`` reads in CI.

Function-local and ``TYPE_CHECKING`` imports count, so a circle held open by a lazy import shows up in a
plain test run too. The order inside the folders split by concern is pyproject.toml's layers contracts;
here: no circle in any package, and each subpackage of those folders says what lives there and what it
may import.
"""

from __future__ import annotations

import importlib

import grimp
import pytest

_GRAPH = grimp.build_graph("pytest_sglang", cache_dir=None)
PACKAGES = sorted(m for m in _GRAPH.modules if _GRAPH.find_children(m))
#: The folders split into subpackages by concern.
SPLIT = ("pytest_sglang.gates", "pytest_sglang.loadgen", "pytest_sglang.simulator")
SUBPACKAGES = sorted(p for p in PACKAGES if p.startswith(tuple(f"{s}." for s in SPLIT)))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_circle_among_siblings(package: str) -> None:
    assert _GRAPH.nominate_cycle_breakers(package) == set()


def test_every_split_folder_has_subpackages() -> None:
    assert {p.rsplit(".", 1)[0] for p in SUBPACKAGES if p.count(".") == 2} == set(SPLIT)


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_each_subpackage_says_what_it_may_import(package: str) -> None:
    doc = importlib.import_module(package).__doc__ or ""
    assert "import" in doc, f"{package.replace('.', '/')}/__init__.py: say what lives here and what it may import"
