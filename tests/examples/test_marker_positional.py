"""Inner test file: marker keywords are keyword-only."""

from __future__ import annotations

import pytest


@pytest.mark.sglang_throughput(100)
def test_throughput():
    pass
