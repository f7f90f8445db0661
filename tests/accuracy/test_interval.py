"""The Wilson score interval and Newcombe's interval of a difference, against published values."""

from __future__ import annotations

import pytest

from pytest_sglang.accuracy.interval import difference, wilson


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (0, 10, 0.0, 0.2775),  # no successes: the lower bound is exactly 0
    (10, 10, 0.7225, 1.0),
    (50, 100, 0.4038, 0.5962),
    (81, 263, 0.2553, 0.3662),  # Newcombe (1998), table I style example
    (160, 200, 0.7392, 0.8494),
])
def test_wilson_matches_reference_values(k: int, n: int, low: float, high: float) -> None:
    got = wilson(k, n)
    assert got == pytest.approx((low, high), abs=5e-4)


def test_wilson_narrows_with_more_examples_and_widens_with_confidence() -> None:
    assert wilson(80, 100)[1] - wilson(80, 100)[0] > wilson(800, 1000)[1] - wilson(800, 1000)[0]
    assert wilson(80, 100, 0.99)[0] < wilson(80, 100, 0.95)[0]
    assert wilson(0, 0) == (0.0, 1.0)


def test_wilson_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError, match="0 <= successes <= n"):
        wilson(5, 4)
    with pytest.raises(ValueError, match="confidence"):
        wilson(1, 2, confidence=1.0)


def test_newcombe_difference() -> None:
    # Newcombe (1998) example: 56/70 vs 48/80 -> difference 0.2, interval [0.0524, 0.3339] (method 10).
    d, low, high = difference((56, 70), (48, 80))
    assert (d, low, high) == pytest.approx((0.2, 0.0524, 0.3339), abs=5e-4)
    same = difference((100, 200), (100, 200))
    assert same[0] == 0 and same[1] < 0 < same[2]
