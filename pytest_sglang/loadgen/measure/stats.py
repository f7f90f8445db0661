"""Pure metrics, defined as SGLang's ``bench_serving`` (``calculate_metrics``) defines them.

No I/O here. Percentiles interpolate linearly like ``numpy.percentile``; std is the population std
like ``numpy.std``; an empty list gives 0.0 like bench_serving's ``np.mean(xs or 0)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pytest_sglang.loadgen.measure.record import RequestRecord

PERCENTILES = (90, 95, 99)
#: bench_serving's JSON names for the latency families and the record field behind each.
FAMILIES = ("ttft", "tpot", "itl", "e2e_latency")


def percentile(values: Sequence[float], q: float) -> float:
    """``numpy.percentile(values, q)`` with the default linear method."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def std(values: Sequence[float]) -> float:
    """Population standard deviation (``numpy.std`` with ddof=0)."""
    if not values:
        return 0.0
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / len(values))


def tpot(record: RequestRecord) -> float | None:
    """Time per output token after the first: (latency - ttft) / (output_len - 1), for output_len > 1."""
    if record.output_len > 1:
        return (record.e2e - record.ttft) / (record.output_len - 1)
    return None


def summarize_ms(values: Sequence[float], family: str) -> dict[str, float]:
    """mean/median/std/p90/p95/p99 of ``values`` (seconds) in milliseconds, under bench_serving names."""
    out = {
        f"mean_{family}_ms": mean(values) * 1000,
        f"median_{family}_ms": percentile(values, 50) * 1000,
        f"std_{family}_ms": std(values) * 1000,
    }
    for q in PERCENTILES:
        out[f"p{q}_{family}_ms"] = percentile(values, q) * 1000
    return out


def peaks(records: Sequence[RequestRecord]) -> tuple[float, int]:
    """bench_serving's ``max_output_tokens_per_s``, and ``max_concurrent_requests`` as requests in flight.

    Token times are rebuilt from start + ttft + cumulative ITL, bucketed into whole seconds from the
    earliest start. The concurrency peak is the most requests sent and not yet answered at one
    moment: bench_serving counts every request that touches a second bucket, which showed 32 "peak
    concurrent requests" for a load held at 16.
    """
    ok = [r for r in records if r.success]
    if not ok:
        return 0.0, 0
    t0 = min(r.start for r in ok)
    end = max(r.start + r.e2e for r in ok)
    buckets = math.ceil(end - t0) + 1
    tokens = [0] * buckets
    for r in ok:
        t = r.start + r.ttft
        tokens[int(t - t0)] += 1
        for gap in r.itl:
            t += gap
            tokens[min(int(t - t0), buckets - 1)] += 1
    return float(max(tokens)), in_flight_peak([(r.start, r.start + r.e2e) for r in ok])


def in_flight_peak(spans: Sequence[tuple[float, float]]) -> int:
    """The most spans (start, end) open at one moment; one that ends as another starts is not both."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    peak = current = 0
    for _, step in events:  # at equal times -1 sorts first: an answered request frees its slot
        current += step
        peak = max(peak, current)
    return peak


def calculate_metrics(records: Sequence[RequestRecord], duration: float) -> dict[str, Any]:
    """The bench_serving result keys for ``records`` over a run of ``duration`` seconds."""
    ok = [r for r in records if r.success]
    dur = duration if duration > 0 else float("nan")
    total_in = sum(r.prompt_len for r in ok)
    total_out = sum(r.output_len for r in ok)
    ttfts = [r.ttft for r in ok]
    e2es = [r.e2e for r in ok]
    tpots = [t for t in (tpot(r) for r in ok) if t is not None]
    itls = [gap for r in ok for gap in r.itl]
    peak_tok, peak_req = peaks(records)
    metrics: dict[str, Any] = {
        "duration": duration,
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": _rate(len(ok), dur),
        "input_throughput": _rate(total_in, dur),
        "output_throughput": _rate(total_out, dur),
        "total_throughput": _rate(total_in + total_out, dur),
    }
    for family, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2e_latency", e2es)):
        metrics.update(summarize_ms(values, family))
    metrics["max_itl_ms"] = max(itls) * 1000 if itls else 0.0
    metrics["concurrency"] = _rate(math.fsum(e2es), dur)
    metrics["max_output_tokens_per_s"] = peak_tok
    metrics["max_concurrent_requests"] = peak_req
    return metrics


def error_counts(records: Sequence[RequestRecord]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in records:
        if r.error_kind is not None:
            counts[r.error_kind] = counts.get(r.error_kind, 0) + 1
    return dict(sorted(counts.items()))


def _rate(amount: float, duration: float) -> float:
    value = amount / duration
    return 0.0 if math.isnan(value) else value
