"""No circles inside the plugin and the server (issue 31), as the ``acyclic_siblings`` contract holds them.

``lint-imports`` checks the contract in CI; this reads the same graph (function-local and
``TYPE_CHECKING`` imports included) so a circle shows up in a plain test run too.
"""

from __future__ import annotations

import grimp
import pytest


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("pytest_sglang", cache_dir=None)


@pytest.mark.parametrize("package", ["pytest_sglang.plugin", "pytest_sglang.server", "pytest_sglang.server.ray"])
def test_no_circle_among_siblings(graph: grimp.ImportGraph, package: str) -> None:
    assert graph.nominate_cycle_breakers(package) == set()
