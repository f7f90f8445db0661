"""No circles inside the plugin, the server and the gates (issue 31), as the ``acyclic_siblings`` contracts hold them.

``lint-imports`` checks the contract in CI; this reads the same graph (function-local and
``TYPE_CHECKING`` imports included) so a circle shows up in a plain test run too.
"""

from __future__ import annotations

import grimp
import pytest


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("pytest_sglang", cache_dir=None)


# gates: between its subpackages (facts, load, fleet, correctness, production) and inside each.
GATES = ["pytest_sglang.gates", *(f"pytest_sglang.gates.{sub}" for sub in
                                 ("facts", "load", "fleet", "correctness", "production"))]


PACKAGES = ["pytest_sglang.plugin", "pytest_sglang.server", "pytest_sglang.server.ray", *GATES]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_circle_among_siblings(graph: grimp.ImportGraph, package: str) -> None:
    assert graph.nominate_cycle_breakers(package) == set()
