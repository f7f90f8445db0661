"""Inner test file: a capacity gate that passes and one that cannot pass."""

from __future__ import annotations

import pytest


@pytest.mark.sglang_capacity(min_total_tokens=1)
def test_capacity_met(sglang_gate):
    outcome = sglang_gate["capacity"]
    assert outcome.passed


@pytest.mark.sglang_capacity(min_total_tokens=10**12)
def test_capacity_unmet():
    pass
