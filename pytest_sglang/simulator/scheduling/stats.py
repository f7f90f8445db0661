"""Counters and histograms the engine keeps for ``/metrics`` and ``/server_info``."""

from __future__ import annotations

import bisect
import time
from collections import defaultdict

from pytest_sglang.simulator.scheduling.request import Request

# SGLang 0.5.23 default buckets (recorded in fixtures/captures-0.5.23/basic/metrics_after.txt).
TTFT_BUCKETS = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
    10.0,
    20.0,
    40.0,
    60.0,
    80.0,
    100.0,
    200.0,
    400.0,
)
E2E_BUCKETS = (*TTFT_BUCKETS, 600.0, 1200.0, 1800.0, 2400.0)
ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.06,
    0.08,
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
)
QUEUE_BUCKETS = (
    0.0,
    0.001,
    0.005,
    0.01,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    3.0,
    4.0,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    100.0,
    200.0,
    300.0,
    600.0,
    1200.0,
    3000.0,
)
TOKEN_BUCKETS = (
    100.0,
    300.0,
    500.0,
    700.0,
    1000.0,
    1500.0,
    2000.0,
    3000.0,
    4000.0,
    5000.0,
    10000.0,
    20000.0,
    40000.0,
    100000.0,
    200000.0,
    400000.0,
    1000000.0,
)


class Histogram:
    __slots__ = ("buckets", "count", "counts", "sum")

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float, n: int = 1) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += n
        self.sum += value * n
        self.count += n

    def cumulative(self) -> list[tuple[str, int]]:
        out, total = [], 0
        for le, c in zip([*map(repr, self.buckets), "+Inf"], self.counts, strict=True):
            total += c
            out.append((le, total))
        return out


class Stats:
    def __init__(self) -> None:
        self.requests: dict[str, int] = defaultdict(int)  # by is_streaming
        self.prompt_tokens: dict[str, int] = defaultdict(int)
        self.generation_tokens: dict[str, int] = defaultdict(int)
        self.cached = {"device": 0, "host": 0}
        self.effective = {"input": 0, "device_hit": 0, "host_hit": 0, "storage_hit": 0}
        self.decode_tokens = 0
        self.aborted = 0
        self.ttft = {s: Histogram(TTFT_BUCKETS) for s in ("true", "false")}
        self.e2e = {s: Histogram(E2E_BUCKETS) for s in ("true", "false")}
        self.tpot = {s: Histogram(ITL_BUCKETS) for s in ("true", "false")}
        self.itl = Histogram(ITL_BUCKETS)
        self.queue = Histogram(QUEUE_BUCKETS)
        self.prompt_hist = Histogram(TOKEN_BUCKETS)
        self.uncached_hist = Histogram(TOKEN_BUCKETS)
        self.gen_hist = Histogram(TOKEN_BUCKETS)
        self.last_gen_throughput = 0.0
        self.cache_hit_rate = 0.0
        self._window_tokens = 0
        self._window_steps = 0
        self._window_start = time.perf_counter()
        self._last_step = 0.0
        # /v1/loads counters (0.5.23 scheduler: total_prefill_*, decode_moment_totals)
        self.prefill_busy_us = 0
        self.prefill_uncached_tokens = 0
        #: decode steps, sum of batch sizes, of step µs, of batch², of batch x µs, of generated tokens
        self.decode_moments = [0.0] * 6

    def on_prefill(self, tokens: int, busy_s: float) -> None:
        self.prefill_busy_us += int(busy_s * 1e6)
        self.prefill_uncached_tokens += tokens

    def on_decode(self, batch: int, step_s: float) -> None:
        step_us = float(int(step_s * 1e6))
        if batch <= 0 or step_us <= 0:
            return
        for i, value in enumerate((1.0, batch, step_us, batch * batch, batch * step_us, batch)):
            self.decode_moments[i] += value

    def on_step(self, batch: int, now: float) -> None:
        self.decode_tokens += batch
        self._window_tokens += batch
        self._window_steps += 1
        self._last_step = now
        if self._window_steps >= 40:  # SGLang's --decode-log-interval
            self.last_gen_throughput = self._window_tokens / max(1e-9, now - self._window_start)
            self._window_tokens = self._window_steps = 0
            self._window_start = now

    def gen_throughput(self) -> float:
        # The Prometheus gauge decays to 0 after 30 s without decode (reference §6).
        return 0.0 if time.perf_counter() - self._last_step > 30 else self.last_gen_throughput

    def on_finish(self, req: Request) -> None:
        s = "true" if req.stream else "false"
        n_out, n_in = len(req.out_ids), len(req.prompt_ids)
        self.requests[s] += 1
        self.prompt_tokens[s] += n_in
        self.generation_tokens[s] += n_out
        self.cached["device"] += req.cached_device
        self.cached["host"] += req.cached_host
        if req.cached_storage:
            self.cached["storage"] = self.cached.get("storage", 0) + req.cached_storage
        self.effective["input"] += n_in - req.cached
        self.effective["device_hit"] += req.cached_device
        self.effective["host_hit"] += req.cached_host
        self.effective["storage_hit"] += req.cached_storage
        self.cache_hit_rate = req.cached / n_in if n_in else 0.0
        if req.aborted:
            self.aborted += 1
        if not req.first_perf:
            return
        self.ttft[s].observe(req.first_perf - req.arrival_perf)
        self.e2e[s].observe(req.last_perf - req.arrival_perf)
        if n_out > 1:
            per = (req.last_perf - req.first_perf) / (n_out - 1)
            self.tpot[s].observe(per)
            self.itl.observe(per, n_out - 1)
        self.queue.observe(max(0.0, req.admitted_perf - req.arrival_perf))
        self.prompt_hist.observe(n_in)
        self.uncached_hist.observe(n_in - req.cached)
        self.gen_hist.observe(n_out)
