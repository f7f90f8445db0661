"""What a soak samples, and how a growth is judged (plain Python: no I/O, no pytest).

A soak (:mod:`pytest_sglang.loadgen.soak.run`) keeps one :class:`SoakSample` per sampling interval: the
server's resident memory, its free KV tokens, its running and queued requests and the requests the
client saw complete. A growth (MB of RSS a minute, free KV tokens lost a minute) is the least-squares
slope of the samples after the warm-up, with its confidence interval (:func:`fit_slope`).

Why an interval, and why that one: RSS moves in steps (allocator arenas, the radix cache filling up),
so neighbouring samples are not independent and a plain least-squares interval would be too narrow.
The interval is widened by the lag-1 autocorrelation of the residuals (the AR(1) variance inflation
``(1 + r) / (1 - r)``, with the degrees of freedom cut to the effective sample size). A growth is
*beyond* a limit only when the whole interval lies above it (:func:`beyond`), so a healthy server's
noise never fails it, and a soak may stop as soon as that is proven.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from pytest_sglang.loadgen.measure.intervals import CONFIDENCE, Interval, z_value

__all__ = ["MAX_POINTS", "MIN_FIT_SAMPLES", "SoakSample", "Stall", "beyond", "downsample", "fit_slope",
           "fit_window"]

#: Samples a slope needs before it is judged at all.
MIN_FIT_SAMPLES = 6
#: Points of a series kept in a report (evenly spaced, first and last kept).
MAX_POINTS = 200
#: The largest lag-1 autocorrelation credited: beyond it the series is a trend, not noise around one.
_MAX_R = 0.95


@dataclass(frozen=True)
class SoakSample:
    """One sample, ``t`` seconds from the start of the soak's load. None: not measured."""

    t: float
    #: Resident memory of the server's processes, MB (10^6 bytes).
    rss_mb: float | None = None
    #: Free KV tokens: ``sglang:kv_available_tokens + sglang:kv_evictable_tokens`` (summed over ranks).
    kv_free: float | None = None
    #: The KV pool: ``sglang:max_total_num_tokens`` (summed over the same ranks).
    kv_total: float | None = None
    running: float | None = None
    queued: float | None = None
    #: Requests the client saw finish (any answer but a timeout) since the start, and those in flight.
    completed: int = 0
    in_flight: int = 0

    def to_dict(self) -> dict[str, float | int | None]:
        """JSON-ready, rounded (a report keeps a few hundred of these)."""
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Stall:
    """The longest time the server completed nothing while requests were in flight."""

    start_s: float
    length_s: float
    #: Requests completed before it began.
    completed_before: int
    #: True when it was still going on when the soak ended.
    ongoing: bool

    def describe(self) -> str:
        """``completions stopped at 3.2 s (after 20 completed) and none came for 6.8 s, until the end``."""
        end = "until the soak ended" if self.ongoing else "then resumed"
        return (f"completions stopped at {self.start_s:.1f} s into the soak (after {self.completed_before} "
                f"completed) and none came for {self.length_s:.1f} s while requests were in flight, {end}")


def fit_slope(points: Sequence[tuple[float, float]], confidence: float = CONFIDENCE) -> Interval | None:
    """The least-squares slope of ``(t seconds, y)`` points, per MINUTE, with its interval (None: too few).

    The interval is widened for autocorrelated residuals (see the module docstring).
    """
    n = len(points)
    if n < MIN_FIT_SAMPLES:
        return None
    ts, ys = [p[0] for p in points], [p[1] for p in points]
    mt, my = sum(ts) / n, sum(ys) / n
    sxx = sum((t - mt) ** 2 for t in ts)
    if sxx <= 0:
        return None
    slope = sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / sxx
    residuals = [y - my - slope * (t - mt) for t, y in zip(ts, ys, strict=True)]
    ssr = sum(r * r for r in residuals)
    r1 = _lag1(residuals, ssr)
    inflation = (1 + r1) / (1 - r1)
    n_eff = max(3.0, n / inflation)
    se = math.sqrt(ssr / (n - 2) / sxx * inflation)
    half = z_value(confidence, max(1, int(n_eff) - 2)) * se
    return Interval(slope * 60, (slope - half) * 60, (slope + half) * 60)


def _lag1(residuals: Sequence[float], ssr: float) -> float:
    if ssr <= 0:
        return 0.0
    r = sum(a * b for a, b in itertools.pairwise(residuals)) / ssr
    return min(max(r, 0.0), _MAX_R)  # negative autocorrelation would narrow the interval: not credited


def beyond(growth: Interval | None, limit: float) -> bool:
    """A growth is beyond ``limit`` only when its whole interval is (the point alone is not enough)."""
    return growth is not None and growth.point > limit and growth.low > limit


def fit_window(samples: Sequence[SoakSample], warmup_s: float,
               value: Callable[[SoakSample], float | None]) -> list[tuple[float, float]]:
    """The ``(t, value)`` points after the warm-up that were measured."""
    out = []
    for sample in samples:
        y = value(sample)
        if sample.t >= warmup_s and y is not None:
            out.append((sample.t, y))
    return out


def downsample(samples: Sequence[SoakSample], max_points: int = MAX_POINTS) -> list[SoakSample]:
    """At most ``max_points`` samples, evenly spaced, the first and the last kept."""
    n = len(samples)
    if n <= max_points:
        return list(samples)
    step = (n - 1) / (max_points - 1)
    return [samples[round(i * step)] for i in range(max_points)]
