"""The slope judgement of a soak: least squares, an interval widened for steps, "beyond" only when proven."""

from __future__ import annotations

import random

from pytest_sglang.loadgen.measure.intervals import Interval
from pytest_sglang.loadgen.soak.series import (
    MAX_POINTS,
    SoakSample,
    Stall,
    beyond,
    downsample,
    fit_slope,
    fit_window,
)


def _line(rate_per_min: float, n: int = 120, every_s: float = 5.0, noise: float = 0.0,
          seed: int = 1) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    return [(i * every_s, 100 + rate_per_min * i * every_s / 60 + rng.gauss(0, noise)) for i in range(n)]


def test_the_slope_is_per_minute_and_its_interval_holds_the_truth() -> None:
    slope = fit_slope(_line(10.0, noise=0.5))
    assert slope is not None and slope.low < 10.0 < slope.high and abs(slope.point - 10.0) < 0.5
    exact = fit_slope(_line(10.0))
    assert exact is not None and round(exact.point, 6) == 10.0 and round(exact.high - exact.low, 6) == 0.0


def test_too_few_points_or_one_instant_give_no_slope() -> None:
    assert fit_slope(_line(10.0, n=5)) is None
    assert fit_slope([(1.0, float(v)) for v in range(10)]) is None


def _steps(seed: int) -> list[tuple[float, float]]:
    """A healthy allocator: flat on average, moving in steps that persist for a while (AR(1)-like)."""
    rng = random.Random(seed)
    level, out = 100.0, []
    for i in range(120):
        if rng.random() < 0.1:
            level = 100.0 + rng.gauss(0, 3.0)
        out.append((i * 5.0, level + rng.gauss(0, 0.1)))
    return out


def test_steps_widen_the_interval_so_a_healthy_series_is_never_beyond_a_small_limit() -> None:
    widened = 0
    for seed in range(200):
        slope = fit_slope(_steps(seed))
        assert slope is not None
        assert not beyond(slope, 2.0), (seed, slope)
        widened += slope.high - slope.low > 0.5
    assert widened > 100  # the steps are noise, and the interval says so


def test_a_leak_at_twice_the_limit_is_proven_over_minutes_with_noise() -> None:
    noisy = [(t, y + s[1] - 100.0) for (t, y), s in zip(_line(10.0), _steps(3), strict=True)]
    slope = fit_slope(noisy)
    assert slope is not None and beyond(slope, 5.0), slope


def test_beyond_needs_the_whole_interval_above_the_limit() -> None:
    assert beyond(Interval(8.0, 6.0, 10.0), 5.0)
    assert not beyond(Interval(8.0, 4.0, 12.0), 5.0)  # the point alone is not enough
    assert not beyond(None, 5.0)


def test_the_window_leaves_out_the_warm_up_and_unmeasured_samples() -> None:
    samples = [SoakSample(t=float(t), rss_mb=None if t == 5 else float(t)) for t in range(10)]
    assert fit_window(samples, 3.0, lambda s: s.rss_mb) == [(3.0, 3.0), (4.0, 4.0), (6.0, 6.0), (7.0, 7.0),
                                                          (8.0, 8.0), (9.0, 9.0)]


def test_downsampling_keeps_the_ends_and_a_fixed_number_of_points() -> None:
    samples = [SoakSample(t=float(t)) for t in range(2001)]
    kept = downsample(samples)
    assert len(kept) == MAX_POINTS and kept[0].t == 0.0 and kept[-1].t == 2000.0
    assert downsample(samples[:10]) == samples[:10]
    assert SoakSample(t=1.23456, rss_mb=2.0004).to_dict()["t"] == 1.235


def test_a_stall_says_when_completions_stopped_and_for_how_long() -> None:
    assert Stall(3.21, 6.8, 40, True).describe() == (
        "completions stopped at 3.2 s into the soak (after 40 completed) and none came for 6.8 s while requests "
        "were in flight, until the soak ended")
