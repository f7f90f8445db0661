"""Overhead of the correctness engine against the simulator, measured side by side.

* acceptance suite: wall time of every check (the acceptance suite's engine, without pytest) against
  the time at least one request was in flight (the union of request intervals). The difference is
  the suite's own overhead: building requests, parsing answers, threads.
* accuracy: 200 arithmetic examples at 64 in flight against the same 200 one at a time.

Run: ``python benchmarks/bench_correctness.py [--time-scale 0.05]``. Target: overhead <= 10 % of the
wall time; 200 examples at 64 in flight in seconds.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterator

import httpx

from pytest_sglang.accuracy import Harness, evaluate
from pytest_sglang.correctness import (
    AcceptanceSettings,
    CheckContext,
    Unsupported,
    concurrency,
    error_checks,
    fetch_features,
    kl,
    native_checks,
    reasoning,
    slots,
    structured,
    tools,
)
from pytest_sglang.correctness import openai_checks as api
from pytest_sglang.correctness import openai_sampling as sampling
from pytest_sglang.server.client import CappedTransport
from pytest_sglang.simulator import Simulator

OVERHEAD_TARGET = 0.10


class Intervals:
    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self.lock = threading.Lock()

    def add(self, start: float, end: float) -> None:
        with self.lock:
            self.spans.append((start, end))

    def union(self) -> float:
        total, edge = 0.0, float("-inf")
        for start, end in sorted(self.spans):
            if end > edge:
                total += end - max(start, edge)
                edge = end
        return total


class _Timed(httpx.SyncByteStream):
    def __init__(self, inner: httpx.Response, start: float, spans: Intervals) -> None:
        self.inner, self.start, self.spans = inner, start, spans

    def __iter__(self) -> Iterator[bytes]:
        yield from self.inner.iter_raw()

    def close(self) -> None:
        self.inner.close()
        self.spans.add(self.start, time.perf_counter())


class TimingTransport(httpx.BaseTransport):
    """Records each request from sending to the close of its body."""

    def __init__(self, inner: httpx.BaseTransport, spans: Intervals) -> None:
        self.inner, self.spans = inner, spans

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        start = time.perf_counter()
        resp = self.inner.handle_request(request)
        return httpx.Response(resp.status_code, headers=resp.headers, stream=_Timed(resp, start, self.spans),
                              extensions=resp.extensions, request=request)


def checks(ctx: CheckContext) -> list[object]:
    routes = [(r, s) for r in ("chat", "completions") for s in (False, True)]
    return [lambda: api.check_models(ctx),
            *[lambda r=r, s=s: api.check_shape(ctx, r, s) for r, s in routes],
            *[lambda r=r, s=s: api.check_usage(ctx, r, s) for r, s in routes],
            *[lambda r=r, s=s: api.check_max_tokens(ctx, r, s) for r, s in routes],
            *[lambda r=r, s=s: api.check_stop(ctx, r, s) for r, s in routes],
            *[lambda r=r, s=s: sampling.check_n(ctx, r, s) for r, s in routes],
            *[lambda r=r, s=s: sampling.check_logprobs(ctx, r, s) for r, s in routes],
            lambda: native_checks.check_native(ctx, False), lambda: native_checks.check_native(ctx, True),
            lambda: native_checks.check_native_agrees(ctx), lambda: native_checks.check_native_stop(ctx),
            lambda: error_checks.check_context_length(ctx), lambda: error_checks.check_malformed_json(ctx),
            lambda: error_checks.check_negative_max_tokens(ctx), lambda: slots.check_disconnect(ctx),
            lambda: concurrency.check_cross_talk(ctx), lambda: concurrency.check_batch_invariance(ctx),
            lambda: kl.check_cache_logprobs(ctx),
            *[lambda k=k: structured.check_structured(ctx, k) for k in ("json_schema", "regex", "ebnf")],
            lambda: tools.check_tool_calls(ctx, False), lambda: tools.check_tool_calls(ctx, True),
            lambda: reasoning.check_reasoning(ctx, False), lambda: reasoning.check_reasoning(ctx, True)]


def bench_suite(sim: Simulator) -> None:
    spans = Intervals()
    transport = CappedTransport(TimingTransport(httpx.HTTPTransport(), spans), 16 * 2**20)
    with httpx.Client(base_url=sim.url, transport=transport, timeout=60) as client:
        ctx = CheckContext(client, fetch_features(client), AcceptanceSettings())
        start = time.perf_counter()
        for check in checks(ctx):
            try:
                check()  # type: ignore[operator]
            except Unsupported:
                pass
        wall = time.perf_counter() - start
    busy = spans.union()
    print(f"acceptance checks: {len(spans.spans)} requests, wall {wall:.2f} s, requests in flight {busy:.2f} s, "
          f"overhead {wall - busy:.2f} s = {(wall - busy) / wall:.1%} of wall (target <= {OVERHEAD_TARGET:.0%})")


def bench_accuracy(sim: Simulator) -> None:
    times = {}
    for concurrency_ in (64, 1):
        start = time.perf_counter()
        result = evaluate(sim.url, Harness(task="arithmetic", num_examples=200, concurrency=concurrency_))
        times[concurrency_] = time.perf_counter() - start
        assert result.total == 200
    print(f"accuracy, 200 arithmetic examples: {times[64]:.2f} s at 64 in flight, {times[1]:.2f} s one at a time "
          f"({times[1] / times[64]:.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--time-scale", default="0.05")
    args = parser.parse_args()
    argv = ["--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", args.time_scale,
            "--enable-metrics", "--tool-call-parser", "llama3", "--reasoning-parser", "deepseek-r1"]
    with Simulator(argv) as sim:
        bench_suite(sim)
        bench_accuracy(sim)


if __name__ == "__main__":
    main()
