"""The gates import one another one way only (issue 31): no circle among the modules of gates/.

pyproject's acyclic_siblings contract holds this in CI (lint-imports); this test says it where the gates'
tests run. Function-local and TYPE_CHECKING imports count: a circle they hold open is still a circle.
"""

from __future__ import annotations

import grimp


def test_the_gates_keep_no_import_circle() -> None:
    graph = grimp.build_graph("pytest_sglang")
    assert graph.nominate_cycle_breakers("pytest_sglang.gates") == set()
