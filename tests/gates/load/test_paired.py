"""judge_paired: the A/B verdict on paired launch differences (pure numbers)."""

from __future__ import annotations

import random

import pytest

from pytest_sglang.gates.load.paired import judge_paired, regressions_pct
from pytest_sglang.loadgen.measure.launch_noise import CANNOT_JUDGE, PASSED, REGRESSED


def test_regressions_are_signed_by_direction() -> None:
    assert regressions_pct([100.0], [90.0], higher_is_better=True) == pytest.approx([10.0])
    assert regressions_pct([100.0], [110.0], higher_is_better=False) == pytest.approx([10.0])


def test_a_shared_drift_cancels_in_the_pairs() -> None:
    # Each pair drifts by up to +-20 % together (the machine), B is 10 % slower within every pair:
    # unpaired this is noise; paired it is a clear 10 % regression.
    rng = random.Random(3)
    drift = [rng.uniform(0.8, 1.2) for _ in range(4)]
    a = [1000 * d for d in drift]
    b = [900 * d * rng.uniform(0.995, 1.005) for d in drift]
    v = judge_paired(a, b, limit_pct=5, metric="output_throughput")
    assert v.verdict == REGRESSED and v.low_pct > 5
    assert "beyond the 5% limit and beyond the noise" in v.describe()


def test_a_regression_within_the_limit_passes_when_the_noise_is_small() -> None:
    v = judge_paired([100, 101, 99, 100], [99, 100.5, 98, 99.5], limit_pct=5, higher_is_better=True)
    assert v.verdict == PASSED


def test_noise_too_large_for_the_pairs_is_cannot_judge_with_the_launches_needed() -> None:
    v = judge_paired([100, 100, 100], [92, 104, 99], limit_pct=5, metric="median_ttft_ms", higher_is_better=False)
    assert v.verdict == CANNOT_JUDGE
    assert v.needed_per_side > 3
    assert f"about {v.needed_per_side} launches per side would (power 0.95, one-sided 1%)" in v.describe()


def test_beyond_the_limit_but_not_beyond_the_noise_is_not_red() -> None:
    v = judge_paired([100, 100, 100], [80, 101, 99], limit_pct=5)  # mean +6.7 %, interval spans 0
    assert v.change_pct > 5 and v.low_pct < 0
    assert v.verdict == CANNOT_JUDGE


@pytest.mark.parametrize(("a", "b", "kwargs", "words"), [
    ([100.0], [100.0], {}, "at least 2 pairs"),
    ([100.0, 100.0], [100.0], {}, "one figure of A and one of B per pair"),
    ([100.0, 0.0], [100.0, 100.0], {}, "A's figure 0.0 is not a positive finite number"),
    ([100.0, 100.0], [100.0, float("nan")], {}, "B's figure nan"),
    ([100.0, 100.0], [100.0, 100.0], {"limit_pct": 0}, "limit_pct=0 must be a positive percentage"),
    ([100.0, 100.0], [100.0, 100.0], {"alpha": 0.5}, "alpha=0.5 must be between 0 and 0.5"),
    ([100.0, 100.0], [100.0, 100.0], {"power": 1.0}, "power=1.0 must be between 0.5 and 1"),
])
def test_bad_input_is_a_value_error_naming_it(a: list[float], b: list[float], kwargs: dict[str, float],
                                              words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        judge_paired(a, b, limit_pct=kwargs.get("limit_pct", 5.0), alpha=kwargs.get("alpha", 0.01),
                     power=kwargs.get("power", 0.95))
