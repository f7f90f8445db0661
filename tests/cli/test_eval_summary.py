"""``eval --baseline``: a passing comparison is stated, not silent."""

from __future__ import annotations

from pathlib import Path

from pytest_sglang.accuracy.verdict import AccuracyResult
from pytest_sglang.cli.eval import report


def test_a_passing_baseline_is_mentioned() -> None:
    result = AccuracyResult("gsm8k", 81, 100, 0, 0, {"task": "gsm8k"}, 3.0, 0.95)
    text = report(result, [], None, (Path("base.json"), {"correct": 80, "total": 100}, 0.0))
    assert "baseline base.json: 0.800 (80/100) -> 0.810, change +0.010 (95% interval [" in text
    assert text.splitlines()[-1] == "passed (baseline base.json)"
    assert "baseline" not in report(result, [], 0.5)
