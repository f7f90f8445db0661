"""Inner test file: many tests share one server under xdist."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("n", range(6))
def test_shared(sglang_server, n):
    assert sglang_server.health() == 200
    assert sglang_server.mode == "attach"
