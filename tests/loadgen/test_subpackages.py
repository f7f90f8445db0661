"""The load generator's subpackages import downward only, and no circle runs among their modules (issue 31).

``lint-imports`` holds the acyclic contract in CI; this reads the same graph (function-local and
``TYPE_CHECKING`` imports included) and also the order each subpackage's docstring states.
"""

from __future__ import annotations

import importlib

import grimp
import pytest

#: Higher imports lower; the same level imports neither way (ray and soak; workloads and measure).
LEVELS = {"ray": 0, "soak": 0, "run": 1, "client": 2, "prompts": 3, "shape": 4, "workloads": 5, "measure": 5}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("pytest_sglang", cache_dir=None)


def test_subpackages_import_downward_only(graph: grimp.ImportGraph) -> None:
    upward = [f"{a} -> {b}" for a in LEVELS for b in LEVELS if a != b and LEVELS[b] <= LEVELS[a]
              and graph.direct_import_exists(importer=f"pytest_sglang.loadgen.{a}",
                                             imported=f"pytest_sglang.loadgen.{b}", as_packages=True)]
    assert upward == []


@pytest.mark.parametrize("package", ["pytest_sglang.loadgen", *(f"pytest_sglang.loadgen.{p}" for p in LEVELS)])
def test_no_circle_among_siblings(graph: grimp.ImportGraph, package: str) -> None:
    assert graph.nominate_cycle_breakers(package) == set()


@pytest.mark.parametrize("package", list(LEVELS))
def test_each_subpackage_says_what_it_may_import(package: str) -> None:
    doc = importlib.import_module(f"pytest_sglang.loadgen.{package}").__doc__ or ""
    assert "import" in doc, f"pytest_sglang/loadgen/{package}/__init__.py: say what lives here and what it may import"
