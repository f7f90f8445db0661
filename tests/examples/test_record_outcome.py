"""Inner test file: gate outcomes built in the test body, recorded with sglang_gate.record."""

from __future__ import annotations

from pytest_sglang import GateOutcome
from pytest_sglang.gates.base import compare


def test_record_met(sglang_gate):
    outcome = GateOutcome("custom_ab", [compare("custom_ab", "speedup", 2.5, ">=", 1.2, unit="x",
                                                source="A/B in the test body")])
    assert sglang_gate.record(outcome) is outcome
    assert sglang_gate["custom_ab"].passed


def test_record_unmet(sglang_gate):
    sglang_gate.record(GateOutcome("custom_ab", [compare("custom_ab", "speedup", 0.9, ">=", 1.2, unit="x",
                                                         remedy="enable the cache on side B")]))


def test_record_wrong_type(sglang_gate):
    sglang_gate.record({"gate": "custom_ab"})
