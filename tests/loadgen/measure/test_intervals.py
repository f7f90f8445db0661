"""Intervals of load figures and of their change (pure statistics, deterministic given the seed)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_sglang.loadgen.measure import intervals
from pytest_sglang.loadgen.measure.intervals import (
    Samples,
    Side,
    bootstrap_log_var,
    every_pair_regressed,
    figure_interval,
    min_samples,
    ratio_interval,
    regressed,
    regression_interval,
    reliable,
    repeat_sides,
    side,
    simultaneous,
    thin,
    unreliable_note,
    z_value,
)


def samples(n: int, seed: int, *, scale: float = 1.0, spread: float = 0.2) -> Samples:
    rng = random.Random(seed)
    ttft = [scale * 100 * (1 + spread * rng.random()) for _ in range(n)]
    e2e = [t + scale * 500 * (1 + spread * rng.random()) for t in ttft]
    itl = [scale * 8 * (1 + spread * rng.random()) for _ in range(4 * n)]
    return Samples(tuple(ttft), tuple(e2e), (64.0,) * n, tuple(itl))


def test_percentiles_need_enough_samples() -> None:
    assert (min_samples(99), min_samples(95), min_samples(90), min_samples(50)) == (100, 20, 10, 2)
    assert not reliable("p99_ttft_ms", 12) and reliable("p99_ttft_ms", 100)
    assert reliable("output_throughput", 1) and reliable("median_ttft_ms", 12)
    note = unreliable_note("p99_ttft_ms", 12)
    assert note is not None and "12 requests" in note and "at least 100" in note and "maximum" in note
    assert unreliable_note("p99_ttft_ms", 256) is None


def test_a_noise_beyond_the_limit_says_what_would_judge_it() -> None:
    # ±10% noise against a 5% limit: (10/5)^2 = 4 times the requests or the repeats.
    note = unreliable_note("output_throughput", 64, noise_pct=10.0, limit_pct=5.0, repeats=3)
    assert note == ("cannot judge a 5 % change of output_throughput from this load: its noise is ±10.0 %, so only a "
                    "change beyond 10.0 % fails; about 256 requests= or 12 repeats= would")
    assert unreliable_note("output_throughput", 64, noise_pct=4.0, limit_pct=5.0) is None
    # A percentile from too few requests is said first: no size of the limit makes it a measurement.
    few = unreliable_note("p99_ttft_ms", 12, noise_pct=10.0, limit_pct=5.0)
    assert few is not None and "at least 100" in few


def test_bootstrap_is_deterministic_and_shrinks_with_more_requests() -> None:
    few, many = samples(50, 1), samples(800, 1)
    assert bootstrap_log_var("p99_ttft_ms", few) == bootstrap_log_var("p99_ttft_ms", few)
    assert bootstrap_log_var("p99_ttft_ms", few) != bootstrap_log_var("p99_ttft_ms", few, seed=7)
    v_few, v_many = bootstrap_log_var("median_ttft_ms", few), bootstrap_log_var("median_ttft_ms", many)
    assert v_few is not None and v_many is not None and v_many < v_few
    assert bootstrap_log_var("max_itl_ms", few) is None  # no statistic: no bootstrap
    assert bootstrap_log_var("p99_ttft_ms", Samples()) is None


def test_a_side_takes_the_larger_noise() -> None:
    assert Side((100.0,)).var is None and Side((100.0,)).between_var is None
    spread = Side((90.0, 110.0), boot_var=1e-6)
    assert spread.var == spread.between_var and spread.var is not None and spread.var > 1e-6
    assert Side((100.0, 100.0), boot_var=0.01).var == 0.01
    assert math.isclose(Side((100.0, 400.0)).center, 200.0)  # geometric mean


def test_an_unchanged_run_is_not_regressed_and_a_large_drop_is() -> None:
    old = side("output_throughput", [1000.0], samples(256, 1))
    same = side("output_throughput", [1000.0], samples(256, 2))
    change = regression_interval(ratio_interval(old, same), higher_is_better=True)
    assert change.low < 0 < change.high and not regressed(change, 5.0)
    slow = side("output_throughput", [800.0], samples(256, 3))
    drop = regression_interval(ratio_interval(old, slow), higher_is_better=True)
    assert math.isclose(drop.point, 20.0) and drop.low > 5.0 and regressed(drop, 5.0)


def test_noise_wider_than_the_change_is_not_a_regression() -> None:
    # A 10% slower median with repeats that differ by 30% among themselves: within the noise.
    old = Side((100.0, 130.0, 80.0))
    new = Side((110.0, 143.0, 88.0))
    change = regression_interval(ratio_interval(old, new), higher_is_better=False)
    assert 9 < change.point < 11 and change.low < 5.0 and not regressed(change, 5.0)


def test_unmeasured_noise_judges_the_point() -> None:
    ratio = ratio_interval(Side((100.0,)), Side((90.0,)))
    assert not ratio.measured and ratio.low == ratio.high == ratio.point
    assert regressed(regression_interval(ratio, higher_is_better=True), 5.0)
    # One side measured: the other counts with the same noise.
    one = ratio_interval(Side((100.0,), boot_var=0.0001), Side((100.0,)))
    assert one.measured and one.low < 1 < one.high


def test_figure_interval_contains_the_point() -> None:
    s = side("p99_ttft_ms", [120.0], samples(300, 4))
    iv = figure_interval(s)
    assert iv.measured and iv.low < iv.point < iv.high
    assert not figure_interval(Side((5.0,))).measured


def test_thin_keeps_bounded_even_quantiles() -> None:
    values = [float(i) for i in range(10_000)]
    kept = thin(values, 1000)
    assert len(kept) == 1000 and kept[0] == 0.0 and kept[-1] == 9999.0
    assert abs(intervals.percentile(kept, 99) - intervals.percentile(values, 99)) < 15
    assert thin([3.0, 1.0]) == [1.0, 3.0]


def test_samples_round_trip_through_a_report() -> None:
    s = samples(5, 1)
    back = Samples.from_dict(s.to_dict())
    assert back.requests == 5 and (s + back).requests == 10
    assert Samples.from_dict(None) == Samples()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(min_value=1.0, max_value=1e4), min_size=1, max_size=5),
       st.lists(st.floats(min_value=1.0, max_value=1e4), min_size=1, max_size=5),
       st.floats(min_value=0.0, max_value=0.05), st.booleans())
def test_interval_holds_the_point_and_the_verdict_needs_the_whole_interval(
    old: list[float], new: list[float], boot: float, higher: bool
) -> None:
    ratio = ratio_interval(Side(tuple(old), boot), Side(tuple(new), boot))
    assert ratio.low <= ratio.point * (1 + 1e-9) and ratio.point <= ratio.high * (1 + 1e-9)
    change = regression_interval(ratio, higher)
    assert change.low <= change.point + 1e-9 <= change.high + 2e-9
    if regressed(change, 5.0):
        assert change.point > 5.0 and change.high > 5.0


def test_a_change_beyond_the_limit_and_the_noise_regresses_even_when_the_interval_reaches_below_the_limit() -> None:
    # 10% slower, interval of the regression about [+3%, +17%]: beyond 5% and beyond the noise.
    old = Side((100.0, 103.0, 97.0))
    new = Side((90.0, 92.7, 87.3))
    change = regression_interval(ratio_interval(old, new), higher_is_better=True)
    assert 0.0 < change.low < 5.0 < change.point and regressed(change, 5.0)
    # 4% slower, well measured: beyond the noise but within the allowed regression.
    small = regression_interval(ratio_interval(Side((100.0, 100.1, 99.9)), Side((96.0, 96.1, 95.9))), True)
    assert small.low > 0.0 and small.point < 5.0 and not regressed(small, 5.0)


@pytest.mark.parametrize(("confidence", "df", "expected"), [
    (0.95, 1, 12.706), (0.95, 2, 4.303), (0.95, 4, 2.776), (0.95, 10, 2.228), (0.95, 30, 2.042),
    (0.99, 4, 4.604), (0.99, 9, 3.250), (0.999, 5, 6.869), (0.95, None, 1.960)])
def test_the_multiplier_is_students_t_at_any_confidence(confidence: float, df: int | None, expected: float) -> None:
    assert z_value(confidence, df) == pytest.approx(expected, abs=1e-3)


def test_simultaneous_intervals_share_the_confidence() -> None:
    assert simultaneous(1) == pytest.approx(0.95)
    assert simultaneous(5) == pytest.approx(0.99)
    assert simultaneous(0) == pytest.approx(0.95)


def _repeats(metric: str, scales: list[float], seed: int) -> tuple[list[float], list[Samples]]:
    runs = [samples(200, seed + k, scale=scale) for k, scale in enumerate(scales)]
    stat = intervals.STATISTICS[metric][1]
    return [stat(r) for r in runs], runs


def test_one_wild_repeat_does_not_hide_a_regression_every_pair_shows() -> None:
    before, old = _repeats("p99_ttft_ms", [1.0, 1.0, 1.0], 1)
    after, new = _repeats("p99_ttft_ms", [1.2, 1.2, 2.4], 10)  # one repeat of three doubled again
    mean = regression_interval(ratio_interval(side("p99_ttft_ms", before, old), side("p99_ttft_ms", after, new),
                                              simultaneous(7)), higher_is_better=False)
    assert not regressed(mean, 5.0)  # the spread of the repeats swallows it
    weakest = every_pair_regressed(repeat_sides("p99_ttft_ms", before, old),
                                   repeat_sides("p99_ttft_ms", after, new), 5.0, False, simultaneous(7))
    assert weakest is not None and 15.0 < weakest.point < 25.0 and weakest.low > 0.0


@pytest.mark.parametrize("scales", [
    [1.0, 1.0, 2.4],   # the wild repeat alone is not every repeat
    [1.2, 1.2, 1.0],   # one repeat unchanged
])
def test_every_pair_needs_every_repeat_beyond_the_limit(scales: list[float]) -> None:
    before, old = _repeats("p99_ttft_ms", [1.0, 1.0, 1.0], 1)
    after, new = _repeats("p99_ttft_ms", scales, 10)
    assert every_pair_regressed(repeat_sides("p99_ttft_ms", before, old),
                                repeat_sides("p99_ttft_ms", after, new), 5.0, False) is None


def test_every_pair_needs_three_repeats_a_side_and_goes_by_direction() -> None:
    before, old = _repeats("output_throughput", [1.0, 1.0, 1.0], 1)
    slower, new = _repeats("output_throughput", [1.3, 1.3, 1.3], 10)  # every time longer: throughput drops
    old_sides = repeat_sides("output_throughput", before, old)
    new_sides = repeat_sides("output_throughput", slower, new)
    assert every_pair_regressed(old_sides, new_sides, 5.0, True) is not None
    assert every_pair_regressed(new_sides, old_sides, 5.0, True) is None  # faster is no regression
    assert every_pair_regressed(old_sides[:2], new_sides, 5.0, True) is None
    assert repeat_sides("output_throughput", before, old[:2]) == []  # figures without their samples
