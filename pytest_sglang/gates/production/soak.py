# Over 300 lines: the soak marker's keyword block and its judging of each leak and stall, kept in one place.
"""``@pytest.mark.sglang_soak(...)``: hold a load for a while and fail on slow leaks and stalls.

A 60-second gate sees none of these: a server that stops answering after about a hundred requests
(sglang#22779), host memory leaking in the hierarchical cache (sglang PR#21624), free KV tokens
drifting down (sglang#11970). The soak (:mod:`pytest_sglang.loadgen.soak.run`) runs a load for
``duration_s`` at a ``concurrency`` or a ``request_rate`` and samples the server every
``sample_interval_s``. This gate judges what it sampled:

- ``max_rss_growth_mb_per_min``: the slope of the server's resident memory (MB = 10^6 bytes) after
  the warm-up. Read from the launched server's process tree (psutil); an attached server's RSS only if
  its ``/metrics`` exports ``process_resident_memory_bytes`` (SGLang 0.5.23's does not).
- ``max_kv_free_drift``: the fraction of the KV pool (``sglang:max_total_num_tokens``) the free tokens
  (``sglang:kv_available_tokens`` + ``sglang:kv_evictable_tokens``) lose a minute. Needs ``/metrics``.
- ``max_stall_s``: the longest time no request completed while some were in flight.

A growth fails only when the whole 95% interval of its slope (:mod:`pytest_sglang.loadgen.soak.series`)
lies beyond the limit: the check's ``measured`` is that interval's lower bound, as the throughput
floors judge their favourable bound. With ``stop_early`` (the default) the soak ends as soon as a
failure is proven: a stall longer than ``max_stall_s``, or a growth beyond its limit over at least
:func:`min_window_s` of samples after the warm-up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from pytest_sglang.gates import keywords
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.keywords import (
    Above,
    AnyOf,
    AtLeast,
    AtMost,
    Below,
    Excludes,
    Fraction,
    NotBelow,
    OneOf,
    Threshold,
)
from pytest_sglang.gates.load.throughput import InFlight, Length, Timeout
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen.measure.intervals import CONFIDENCE, Interval
from pytest_sglang.loadgen.shape.spec import APIS
from pytest_sglang.loadgen.soak.run import SoakRun, SoakSpec, process_tree_rss_mb, run_soak
from pytest_sglang.loadgen.soak.series import MIN_FIT_SAMPLES, SoakSample, beyond, downsample, fit_slope, fit_window

if TYPE_CHECKING:
    from pytest_sglang.server.members import Handle

__all__ = ["DATA_KEY", "GATE", "NOTHING_MEASURABLE", "Limits", "default_interval", "default_warmup", "judge",
           "min_window_s", "run_marker", "stop_reason"]

GATE = "soak"
#: The outcome's context key of the series for the reports (a leading "_": not printed in the message).
DATA_KEY = "_soak"
#: Why a soak stops at its first sample when no limit it was given can be read from this server.
NOTHING_MEASURABLE = "nothing it judges can be measured (see the failed checks)"
#: A soak without concurrency or request_rate keeps this many requests in flight.
DEFAULT_CONCURRENCY = 8
#: A week: longer is a typo, not a soak.
MAX_DURATION_S = 7 * 24 * 3600.0
_GROWTHS = ("max_rss_growth_mb_per_min", "max_kv_free_drift")
_RSS_FIX = ("find what the server keeps per request or per minute: hierarchical-cache host indices "
            "(--enable-hierarchical-cache), a metrics or trace sink, the radix cache's host pool; then lower the "
            "leak or raise max_rss_growth_mb_per_min")
_KV_FIX = ("KV tokens that never come back are leaked by the allocator (sglang#11970: check the SGLang version), "
           "or held by sessions or a stalled request: compare sglang:kv_used_tokens with the running requests")
_STALL_FIX = ("the server accepted requests and stopped completing them: read its log around that moment; a "
              "scheduler stuck or a dead rank answers /health while nothing is served (add a liveness probe "
              "that generates, see sglang_probes)")


@dataclass(frozen=True)
class Limits:
    """The limits of one soak (None: not judged)."""

    max_rss_growth_mb_per_min: float | None = None
    max_kv_free_drift: float | None = None
    max_stall_s: float | None = None
    max_error_rate: float = 0.0


def default_warmup(duration_s: float) -> float:
    """The start-up growth left out of the slopes: a tenth of the soak, at most a minute."""
    return min(60.0, duration_s / 10)


def default_interval(duration_s: float) -> float:
    """About 120 samples a soak, between every 0.25 s and every 5 s."""
    return min(5.0, max(0.25, duration_s / 120))


def min_window_s(duration_s: float, warmup_s: float) -> float:
    """Samples after the warm-up a growth is proven over before the soak may stop early.

    A minute, or half of what follows the warm-up in a shorter soak: a step of the allocator is not a trend.
    """
    return min(60.0, (duration_s - warmup_s) / 2)


# ---- the series and their slopes ------------------------------------------------------------------
def _rss(sample: SoakSample) -> float | None:
    return sample.rss_mb


def _kv_fraction(sample: SoakSample) -> float | None:
    if sample.kv_free is None or not sample.kv_total:
        return None
    return sample.kv_free / sample.kv_total


def _drift(run: SoakRun, warmup_s: float) -> Interval | None:
    """Free KV lost a minute, as a fraction of the pool (positive: losing)."""
    rise = fit_slope(fit_window(run.samples, warmup_s, _kv_fraction))
    return None if rise is None else Interval(-rise.point, -rise.high, -rise.low)


def _growth(run: SoakRun, warmup_s: float) -> Interval | None:
    return fit_slope(fit_window(run.samples, warmup_s, _rss))


def _span(run: SoakRun, warmup_s: float, value: Callable[[SoakSample], float | None]) -> float:
    points = fit_window(run.samples, warmup_s, value)
    return points[-1][0] - points[0][0] if len(points) > 1 else 0.0


def stop_reason(run: SoakRun, limits: Limits, warmup_s: float) -> str | None:
    """Why the soak can stop now: a failure already proven, or nothing left that could be measured."""
    stall = run.stall
    if limits.max_stall_s is not None and stall is not None and stall.length_s > limits.max_stall_s:
        return f"a stall longer than max_stall_s={limits.max_stall_s:g} s"
    window = min_window_s(run.spec.duration_s, warmup_s)
    rss_limit, kv_limit = limits.max_rss_growth_mb_per_min, limits.max_kv_free_drift
    if rss_limit is not None and _span(run, warmup_s, _rss) >= window and beyond(_growth(run, warmup_s), rss_limit):
        return f"RSS growth proven beyond max_rss_growth_mb_per_min={rss_limit:g}"
    if kv_limit is not None and _span(run, warmup_s, _kv_fraction) >= window and \
            beyond(_drift(run, warmup_s), kv_limit):
        return f"free KV drift proven beyond max_kv_free_drift={kv_limit:g}"
    if run.samples and _unmeasurable(run, limits):
        return NOTHING_MEASURABLE
    return None


def _unmeasurable(run: SoakRun, limits: Limits) -> bool:
    """Every limit given is a figure this server does not expose (after the first sample)."""
    rss_off = limits.max_rss_growth_mb_per_min is None or all(s.rss_mb is None for s in run.samples)
    kv_off = limits.max_kv_free_drift is None or all(_kv_fraction(s) is None for s in run.samples)
    return rss_off and kv_off and limits.max_stall_s is None


# ---- judging --------------------------------------------------------------------------------------
def _fit_text(run: SoakRun, warmup_s: float, value: Callable[[SoakSample], float | None], slope: Interval,
              unit: str) -> str:
    points = fit_window(run.samples, warmup_s, value)
    return (f"slope {slope.point:,.4g} {unit}, {CONFIDENCE:.0%} interval [{slope.low:,.4g}, {slope.high:,.4g}] "
            f"over {len(points)} samples from {points[0][0]:.1f} s to {points[-1][0]:.1f} s (warm-up {warmup_s:g} s "
            f"left out); fails only when the whole interval exceeds the limit")


def _too_few(run: SoakRun, what: str) -> str:
    """Why a growth was not judged although its figure was read."""
    why = f"not judged: fewer than {MIN_FIT_SAMPLES} {what} samples after the warm-up"
    return f"{why} (the soak stopped early: {run.stopped_early})" if run.stopped_early else why


def _rss_check(run: SoakRun, limit: float, warmup_s: float) -> Check:
    slope = _growth(run, warmup_s)
    values = [s.rss_mb for s in run.samples if s.rss_mb is not None]
    source = run.rss_source or ("unavailable: this server's RSS cannot be read (SGLang 0.5.23's /metrics has no "
                                "process_resident_memory_bytes); launch it (--sglang-launch) to sample its processes")
    if slope is None:
        why = _too_few(run, "RSS") if values else "RSS was never read"
        return compare(GATE, "rss_growth_mb_per_min", None, "<=", limit, unit="MB/min", source=source, detail=why,
                       keyword="max_rss_growth_mb_per_min",
                       remedy="lengthen duration_s or shorten warmup_s" if values and not run.stopped_early else "")
    detail = (_fit_text(run, warmup_s, _rss, slope, "MB/min") +
              f"; RSS {values[0]:,.1f} MB at the start, {values[-1]:,.1f} MB at the end")
    return compare(GATE, "rss_growth_mb_per_min (lower bound)", round(slope.low, 3), "<=", limit, unit="MB/min",
                   source=source, detail=detail, keyword="max_rss_growth_mb_per_min", remedy=_RSS_FIX)


def _kv_check(run: SoakRun, limit: float, warmup_s: float) -> Check:
    drift = _drift(run, warmup_s)
    source = ("sglang:kv_available_tokens + sglang:kv_evictable_tokens over sglang:max_total_num_tokens in /metrics"
              if not run.metrics_missing else f"unavailable: {run.metrics_missing}")
    if drift is None:
        measured_any = any(_kv_fraction(s) is not None for s in run.samples)
        why = _too_few(run, "free KV") if measured_any else "free KV never read"
        return compare(GATE, "kv_free_drift_per_min", None, "<=", limit, source=source, detail=why,
                       keyword="max_kv_free_drift",
                       remedy="" if measured_any else "launch SGLang with --enable-metrics")
    return compare(GATE, "kv_free_drift_per_min (lower bound)", round(drift.low, 6), "<=", limit,
                   unit="/min", source=source,
                   detail=_fit_text(run, warmup_s, _kv_fraction, Interval(-drift.point, -drift.high, -drift.low),
                                    "/min (fraction of the pool)"),
                   keyword="max_kv_free_drift", remedy=_KV_FIX)


def _stall_check(run: SoakRun, limit: float) -> Check:
    stall = run.stall
    measured = stall.length_s if stall is not None else 0.0
    source = stall.describe() if stall is not None else "requests completed throughout the soak"
    return compare(GATE, "longest_stall_s", round(measured, 2), "<=", limit, unit="s",
                   source=f"client-side completions: {source}", keyword="max_stall_s", remedy=_STALL_FIX)


def _error_check(run: SoakRun, limit: float) -> Check | None:
    finished = run.completed + run.errors.get("timeout", 0)
    kinds = ", ".join(f"{k}={v}" for k, v in run.errors.items()) or "none"
    detail = (f"{run.failed} of {finished} requests failed ({kinds}); {run.cut} in flight when the soak ended "
              f"were cancelled (not counted)")
    if run.completed == 0 and run.failed == 0:
        if run.stopped_early:  # no rate to judge: the soak ended before any request could finish
            return None
        return compare(GATE, "error_rate", None, "<=", limit, keyword="max_error_rate",
                       detail=f"no request completed or failed in {run.duration_s:.1f} s; {detail}",
                       remedy="the server completed nothing during the soak: read its log")
    if run.completed == 0:
        return compare(GATE, "error_rate", 1.0, "<=", limit, keyword="max_error_rate",
                       detail=f"no request completed; {detail}",
                       remedy="the server completed nothing during the soak: read its log")
    return compare(GATE, "error_rate", round(run.failed / finished, 6), "<=", limit, keyword="max_error_rate",
                   detail=detail + (f"; e.g. {'; '.join(run.examples)}" if run.examples else ""),
                   remedy="read the failed requests' reasons above")


def judge(run: SoakRun, limits: Limits, warmup_s: float) -> GateOutcome:
    """The outcome of a finished soak: each limit given, the error rate, and the series for the reports.

    Each growth's slope and interval (its check's ``detail``) is also a line of the message.
    """
    out = GateOutcome(GATE)
    if limits.max_rss_growth_mb_per_min is not None:
        out.add(_rss_check(run, limits.max_rss_growth_mb_per_min, warmup_s))
    if limits.max_kv_free_drift is not None:
        out.add(_kv_check(run, limits.max_kv_free_drift, warmup_s))
    if limits.max_stall_s is not None:
        out.add(_stall_check(run, limits.max_stall_s))
    errors = _error_check(run, limits.max_error_rate)
    if errors is not None:
        out.add(errors)
    else:
        out.notes.append(f"max_error_rate: not judged: no request finished before the soak stopped early after "
                         f"{run.duration_s:.1f} s ({run.stopped_early})")
    out.notes += [f"{c.keyword}: {c.detail}" for c in out.checks if c.keyword in _GROWTHS and c.detail]
    ended = f"stopped early after {run.duration_s:.1f} s: {run.stopped_early}" if run.stopped_early \
        else f"ran {run.duration_s:.1f} s"
    out.context["load"] = f"{run.spec.shape()} against {run.url}; {ended}"
    out.context["requests"] = f"{run.completed} completed, {run.failed} failed, {run.cut} cut at the end"
    if run.metrics_missing:
        out.context["server metrics"] = run.metrics_missing
    out.context[DATA_KEY] = {"warmup_s": warmup_s, "rss_source": run.rss_source, "duration_s": run.duration_s,
                             "samples": len(run.samples),
                             "series": [s.to_dict() for s in downsample(run.samples)]}
    return out


# ---- the marker ------------------------------------------------------------------------------------
def _rss_reader(server: Handle) -> tuple[Callable[[], float | None] | None, str]:
    """The launched processes' RSS (a fleet: the gateway's and every launched worker's), or None."""
    # The handle's own process (a fleet: its gateway's), then each member's other than the handle itself.
    handles = [server, *(m.server for m in server.members() if m.server is not None and m.server is not server)]
    pids = [h.process.pid for h in handles if h.process is not None and h.process.pid is not None]
    if not pids:
        return None, ""

    def read() -> float | None:
        values = [process_tree_rss_mb(pid) for pid in pids]
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    what = "pid " + ", ".join(map(str, pids))
    return read, f"psutil: resident memory of the launched server's process tree ({what})"


@keywords.rules(AnyOf(("max_rss_growth_mb_per_min", "max_kv_free_drift", "max_stall_s")),
                Excludes("concurrency", "request_rate", "a soak is paced by one of them"),
                NotBelow("duration_s", "warmup_s"),
                Below("max_stall_s", "duration_s", "no stall longer than max_stall_s fits in the soak, so it would "
                                                   "always pass"))
def run_marker(
    ctx: GateContext,
    *,
    duration_s: Annotated[float, Above(0), AtMost(MAX_DURATION_S)] = 600.0,
    max_rss_growth_mb_per_min: Threshold = None,
    max_kv_free_drift: Annotated[float | None, Above(0), AtMost(1)] = None,
    max_stall_s: Threshold = None,
    max_error_rate: Annotated[float, Fraction()] = 0.0,
    concurrency: InFlight = None,
    request_rate: Threshold = None,
    input_len: Length = 256,
    output_len: Length = 64,
    api: Annotated[str, OneOf(APIS)] = "native",
    warmup_s: Annotated[float | None, AtLeast(0)] = None,
    sample_interval_s: Annotated[float | None, Above(0)] = None,
    stop_early: bool = True,
    request_timeout_s: Timeout = None,
) -> GateOutcome:
    """``@pytest.mark.sglang_soak``: a load for ``duration_s``; fail on RSS or free-KV growth, or a stall.

    Paced by ``concurrency`` (default 8 in flight) or ``request_rate``. ``max_kv_free_drift`` is a fraction
    of the KV pool a minute (0.001: 6 % an hour). ``warmup_s`` (default a tenth of the soak, at most 60 s)
    is left out of the slopes. See the module docstring. This signature declares the keywords.
    """
    limits = Limits(max_rss_growth_mb_per_min, max_kv_free_drift, max_stall_s, max_error_rate)
    warm = default_warmup(duration_s) if warmup_s is None else warmup_s
    pace = concurrency if concurrency is not None or request_rate is not None else DEFAULT_CONCURRENCY
    spec = SoakSpec(duration_s, concurrency=pace, request_rate=request_rate, input_len=input_len,
                    output_len=output_len, api=api, sample_interval_s=sample_interval_s or default_interval(duration_s),
                    request_timeout_s=request_timeout_s or ctx.request_timeout_s)
    rss, rss_source = _rss_reader(ctx.server)

    def stop_when(run: SoakRun) -> str | None:
        reason = stop_reason(run, limits, warm)
        # nothing measurable always ends the soak; a proven failure only with stop_early
        return reason if reason and (stop_early or reason == NOTHING_MEASURABLE) else None

    if ctx.write is not None:
        ctx.write(f"sglang_soak: {spec.shape()} (stops early once a failure is proven)" if stop_early
                  else f"sglang_soak: {spec.shape()}")
    with ctx.load_lock():
        run = run_soak(ctx.server.url, spec, api_key=ctx.server.api_key, rss=rss, rss_source=rss_source,
                       stop_when=stop_when)
    return judge(run, limits, warm)

