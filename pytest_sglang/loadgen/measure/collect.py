"""Bounded bookkeeping of a load's records: every record up to a cap, a uniform sample beyond.

While a load has at most ``max_records`` requests (and their token times fit :data:`VALUE_BUDGET`),
every record is kept and the metrics are bench_serving's, computed from all of them. Beyond, the
records become a reservoir sample (Vitter's algorithm R: each request equally likely to be kept)
and :class:`Running` keeps what needs no sample exactly over every request: counts, token totals,
means and standard deviations, maxima, throughput peaks. Latency percentiles then come from the
sample, and the result says so. Memory is bounded by the cap, not by the number of requests.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.measure.stats import PERCENTILES, calculate_metrics, percentile, tpot

#: Token times (ITL values) the kept records may hold before sampling starts (~130 MB of floats).
VALUE_BUDGET = 4_000_000


@dataclass
class Moments:
    """Count, mean and sum of squared deviations, merged as Chan et al. do (stable, exact enough)."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add_many(self, values: list[float]) -> None:
        if values:
            m = math.fsum(values) / len(values)
            self.merge(Moments(len(values), m, math.fsum((v - m) ** 2 for v in values)))

    def merge(self, other: Moments) -> None:
        if other.n == 0:
            return
        n = self.n + other.n
        delta = other.mean - self.mean
        self.m2 += other.m2 + delta * delta * self.n * other.n / n
        self.mean += delta * other.n / n
        self.n = n

    def std(self) -> float:
        return math.sqrt(self.m2 / self.n) if self.n else 0.0


@dataclass
class Running:
    """What bench_serving computes from all records, kept exactly without keeping the records.

    Throughput peaks are bucketed per whole second from the start of the run (bench_serving buckets
    from the first successful request's start, a few milliseconds later).
    """

    completed: int = 0
    failed: int = 0
    total_in: int = 0
    total_out: int = 0
    ttft: Moments = field(default_factory=Moments)
    tpot: Moments = field(default_factory=Moments)
    itl: Moments = field(default_factory=Moments)
    e2e: Moments = field(default_factory=Moments)
    max_itl: float = 0.0
    tokens: list[int] = field(default_factory=list)
    #: Requests started minus answered per millisecond (sparse): the in-flight peak without the records.
    flight: dict[int, int] = field(default_factory=dict)

    def add(self, r: RequestRecord) -> None:
        if not r.success:
            self.failed += 1
            return
        self.completed += 1
        self.total_in += r.prompt_len
        self.total_out += r.output_len
        self.ttft.add_many([r.ttft])
        self.e2e.add_many([r.e2e])
        per_token = tpot(r)
        if per_token is not None:
            self.tpot.add_many([per_token])
        self.itl.add_many(r.itl)
        self.max_itl = max(self.max_itl, max(r.itl, default=0.0))
        t = r.start + r.ttft
        _bump(self.tokens, t)
        for gap in r.itl:
            t += gap
            _bump(self.tokens, t)
        _step(self.flight, r.start, 1)
        _step(self.flight, r.start + r.e2e, -1)

    def merge(self, other: Running, shift_s: float) -> None:
        self.completed += other.completed
        self.failed += other.failed
        self.total_in += other.total_in
        self.total_out += other.total_out
        for mine, theirs in ((self.ttft, other.ttft), (self.tpot, other.tpot), (self.itl, other.itl),
                             (self.e2e, other.e2e)):
            mine.merge(theirs)
        self.max_itl = max(self.max_itl, other.max_itl)
        offset = max(0, round(shift_s))
        for second, count in enumerate(other.tokens):
            _bump(self.tokens, second + offset, count)
        for ms, step in other.flight.items():
            _step(self.flight, ms / 1000 + shift_s, step)

    def metrics(self, duration: float, sample: list[RequestRecord]) -> dict[str, Any]:
        """bench_serving's keys: exact figures from the running totals, percentiles from ``sample``."""
        ok = [r for r in sample if r.success]
        values = {
            "ttft": [r.ttft for r in ok],
            "tpot": [t for t in (tpot(r) for r in ok) if t is not None],
            "itl": [gap for r in ok for gap in r.itl],
            "e2e_latency": [r.e2e for r in ok],
        }
        dur = duration if duration > 0 else math.nan
        out: dict[str, Any] = {
            "duration": duration,
            "completed": self.completed,
            "failed": self.failed,
            "total_input_tokens": self.total_in,
            "total_output_tokens": self.total_out,
            "request_throughput": _rate(self.completed, dur),
            "input_throughput": _rate(self.total_in, dur),
            "output_throughput": _rate(self.total_out, dur),
            "total_throughput": _rate(self.total_in + self.total_out, dur),
        }
        moments = {"ttft": self.ttft, "tpot": self.tpot, "itl": self.itl, "e2e_latency": self.e2e}
        for family, m in moments.items():
            out[f"mean_{family}_ms"] = m.mean * 1000
            out[f"median_{family}_ms"] = percentile(values[family], 50) * 1000
            out[f"std_{family}_ms"] = m.std() * 1000
            for q in PERCENTILES:
                out[f"p{q}_{family}_ms"] = percentile(values[family], q) * 1000
        out["max_itl_ms"] = self.max_itl * 1000
        out["concurrency"] = _rate(self.e2e.mean * self.e2e.n, dur)
        out["max_output_tokens_per_s"] = float(max(self.tokens, default=0))
        out["max_concurrent_requests"] = _flight_peak(self.flight)
        return out


def _bump(buckets: list[int], t: float, count: int = 1) -> None:
    second = max(0, int(t))
    if second >= len(buckets):
        buckets.extend([0] * (second + 1 - len(buckets)))
    buckets[second] += count


def _step(flight: dict[int, int], t: float, step: int) -> None:
    ms = round(t * 1000)
    flight[ms] = flight.get(ms, 0) + step


def _flight_peak(flight: dict[int, int]) -> int:
    """The most requests in flight at one millisecond (a start and an end in one millisecond net out)."""
    peak = current = 0
    for ms in sorted(flight):
        current += flight[ms]
        peak = max(peak, current)
    return peak


def _rate(amount: float, duration: float) -> float:
    value = amount / duration
    return 0.0 if math.isnan(value) else value


@dataclass
class Collector:
    """Receives finished records; keeps errors by kind, the first failure of each kind, and records.

    Picklable plain data: a client process sends its collector to the parent, which merges them.
    """

    cap: int
    seed: int = 0
    records: list[RequestRecord] = field(default_factory=list)
    seen: int = 0
    values: int = 0
    running: Running | None = None
    errors: dict[str, int] = field(default_factory=dict)
    #: kind -> (request index, "request N: kind: error") of the lowest-numbered failure of that kind.
    first: dict[str, tuple[int, str]] = field(default_factory=dict)
    #: Run-relative start of the earliest request whose connection was refused.
    refused_from: float | None = None
    #: Prefix cache, exact over every completed request: [prompt tokens, cached tokens] of those whose
    #: answer reported ``cached_tokens``, and how many completed without reporting it.
    cache: list[int] = field(default_factory=lambda: [0, 0])
    cache_requests: int = 0
    cache_unreported: int = 0
    #: Prompt tokens, exact over every completed request: [sent, counted by the server] of those whose
    #: answer reported ``prompt_tokens``, how many did, and how many did not (:mod:`.tokencount`).
    prompt_counts: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    #: Images, exact over every completed request: [requests with images, images sent, of those requests the
    #: ones whose answer reported prompt_tokens, their server prompt tokens minus the text tokens sent, the
    #: ones whose answer reported image_tokens, the sum of those].
    image_counts: list[int] = field(default_factory=lambda: [0] * 6)
    #: Trace replay: the largest |send - scheduled| in seconds, exact over every request.
    late_max: float = 0.0
    #: Requests whose client went away on purpose (``LoadSpec.cancel_rate``): kept out of every figure.
    cancelled: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    @property
    def sampled(self) -> bool:
        return self.running is not None

    def add(self, rec: RequestRecord) -> None:
        if rec.cancelled:
            self.cancelled += 1
            return
        self.seen += 1
        self._note_failure(rec)
        self._note_workload(rec)
        if self.running is None:
            self.records.append(rec)
            self.values += len(rec.itl)
            if len(self.records) > self.cap or self.values > VALUE_BUDGET:
                self._start_sampling()
            return
        self._sample(rec)

    def _note_workload(self, rec: RequestRecord) -> None:
        if rec.scheduled is not None:
            self.late_max = max(self.late_max, abs(rec.start - rec.scheduled))
        if not rec.success:
            return
        if rec.images:
            self._note_images(rec)
        if rec.server_prompt_len is None:
            self.prompt_counts[3] += 1
        else:
            self.prompt_counts[0] += rec.sent_prompt_len
            self.prompt_counts[1] += rec.server_prompt_len
            self.prompt_counts[2] += 1
        if rec.cached_tokens is None:
            self.cache_unreported += 1
            return
        self.cache_requests += 1
        self.cache[0] += rec.prompt_len
        self.cache[1] += rec.cached_tokens

    def _note_images(self, rec: RequestRecord) -> None:
        counts = self.image_counts
        counts[0] += 1
        counts[1] += rec.images
        if rec.server_prompt_len is not None:
            counts[2] += 1
            counts[3] += rec.server_prompt_len - rec.sent_prompt_len
        if rec.image_tokens is not None:
            counts[4] += 1
            counts[5] += rec.image_tokens

    def _note_failure(self, rec: RequestRecord) -> None:
        kind = rec.error_kind
        if kind is None:
            return
        self.errors[kind] = self.errors.get(kind, 0) + 1
        if kind not in self.first or rec.index < self.first[kind][0]:
            self.first[kind] = (rec.index, f"request {rec.index}: {kind}: {rec.error}")
        if kind == "refused" and (self.refused_from is None or rec.start < self.refused_from):
            self.refused_from = rec.start

    def _start_sampling(self) -> None:
        # The record that crossed the cap enters through the reservoir like any later one.
        last = self.records.pop()
        self.running = Running()
        for r in self.records:
            self.running.add(r)
        self._sample(last)

    def _sample(self, rec: RequestRecord) -> None:
        assert self.running is not None
        self.running.add(rec)
        j = self._rng.randrange(self.seen)
        if j < len(self.records):
            self.records[j] = rec

    def merge(self, other: Collector, shift_s: float) -> None:
        """Fold in a client process's collector; its times move by ``shift_s`` onto this clock."""
        for kind, n in other.errors.items():
            self.errors[kind] = self.errors.get(kind, 0) + n
        self.cache = [self.cache[0] + other.cache[0], self.cache[1] + other.cache[1]]
        self.cache_requests += other.cache_requests
        self.cache_unreported += other.cache_unreported
        self.prompt_counts = [a + b for a, b in zip(self.prompt_counts, other.prompt_counts, strict=True)]
        self.image_counts = [a + b for a, b in zip(self.image_counts, other.image_counts, strict=True)]
        self.late_max = max(self.late_max, other.late_max)
        self.cancelled += other.cancelled
        for kind, (index, text) in other.first.items():
            if kind not in self.first or index < self.first[kind][0]:
                self.first[kind] = (index, text)
        if other.refused_from is not None:
            moved = other.refused_from + shift_s
            self.refused_from = moved if self.refused_from is None else min(self.refused_from, moved)
        for r in other.records:
            r.start += shift_s
        if other.running is None:
            for r in other.records:
                self.seen += 1
                self._keep(r)
            return
        if self.running is None:
            self._start_sampling_all()
        assert self.running is not None
        self.running.merge(other.running, shift_s)
        self.records = _stratified(self._rng, self.cap, (self.records, self.seen), (other.records, other.seen))
        self.seen += other.seen

    def _keep(self, rec: RequestRecord) -> None:
        if self.running is None:
            self.records.append(rec)
            self.values += len(rec.itl)
            if len(self.records) > self.cap or self.values > VALUE_BUDGET:
                self._start_sampling()
        else:
            self._sample(rec)

    def _start_sampling_all(self) -> None:
        self.running = Running()
        for r in self.records:
            self.running.add(r)

    def metrics(self, duration: float) -> dict[str, Any]:
        if self.running is None:
            return calculate_metrics(self.records, duration)
        return self.running.metrics(duration, self.records)

    def failure_examples(self) -> dict[str, str]:
        """The first failure of each kind, ordered by request index."""
        return {kind: text for kind, (_, text) in sorted(self.first.items(), key=lambda item: item[1][0])}


def _stratified(
    rng: random.Random, k: int, *parts: tuple[list[RequestRecord], int]
) -> list[RequestRecord]:
    """Sample at most ``k`` records from samples of populations of the given sizes.

    Each part is represented in proportion to its population (so each request stays about equally
    likely).
    """
    total = sum(seen for _, seen in parts) or 1
    out: list[RequestRecord] = []
    for records, seen in parts:
        want = min(len(records), round(k * seen / total))
        out.extend(rng.sample(records, want))
    return out[:k]
