"""Trace replay: each request of a Mooncake/BurstGPT trace is sent at its recorded time, scaled.

Open loop, as SGLang's bench_serving replays Mooncake: a request is sent when its time comes, whether
or not earlier ones have answered. The one brake is the in-flight cap (``concurrency``, default
:data:`~.workloads.DEFAULT_TRACE_CAP`): a request that finds the cap full waits for room, is sent
late, and the result counts it. Each record keeps when it was due (``scheduled``) so the replay's
timing error (actual send - scheduled send) is measured per request. Rows are read from the file as
the replay reaches them (:func:`.traces.rows`), never all at once.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Iterator
from typing import Any

import httpx

from pytest_sglang.loadgen.client.http import send_request
from pytest_sglang.loadgen.client.servermetrics import MetricsSampler
from pytest_sglang.loadgen.measure.collect import Collector
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.prompts.datasets import Prompt, check_trace
from pytest_sglang.loadgen.run.runner import Driver, Progress, Shard, ShardResult, expiry, start_sampler
from pytest_sglang.loadgen.shape.spec import LoadSpec, dataset_parts
from pytest_sglang.loadgen.workloads import traces


def trace_prompt(spec: LoadSpec, row: traces.TraceRow) -> Prompt:
    """The request for a trace row: its hash-id blocks as token ids (text for the chat API)."""
    ids = traces.prompt_ids(row, spec.vocab(), spec.seed)
    return Prompt(traces.ids_text(ids) if spec.api == "chat" else ids, row.input_len, row.output_len)


class _Cursor:
    """The trace's rows in order: ``arrivals()`` reads the next row, ``take()`` hands it to its request."""

    def __init__(self, spec: LoadSpec) -> None:
        kind, path = dataset_parts(spec.dataset)
        self.skipped = [0]
        self._rows = traces.rows(kind, path, spec.requests, self.skipped)
        self._scale = spec.trace_time_scale
        self.current: traces.TraceRow | None = None
        self.count = 0
        self.span_s = 0.0

    def arrivals(self) -> Iterator[float]:
        for row in self._rows:
            self.current, self.count = row, self.count + 1
            self.span_s = row.offset_s * self._scale
            yield self.span_s

    def take(self) -> traces.TraceRow:
        assert self.current is not None
        row, self.current = self.current, None
        return row


async def run_trace(
    client: httpx.AsyncClient,
    spec: LoadSpec,
    shard: Shard,
    *,
    clock_base: float,
    deadline: float,
    progress: Progress | None = None,
    sample: bool = False,
    sampler: MetricsSampler | None = None,
) -> ShardResult:
    """Replay ``spec.dataset``'s trace; times are relative to ``clock_base`` (a perf_counter value)."""
    kind = dataset_parts(spec.dataset)[0]
    total = check_trace(spec).rows  # checked before the run: not read again
    collector = Collector(spec.max_records, seed=shard.seed)
    cursor = _Cursor(spec)
    cap = spec.in_flight()
    sampler = await start_sampler(client, sample, sampler)

    async def one(i: int, row: traces.TraceRow) -> RequestRecord:
        record = await send_request(client, spec, trace_prompt(spec, row), i, clock_base=clock_base)
        record.scheduled = lead + row.offset_s * spec.trace_time_scale
        return record

    def make(i: int) -> Coroutine[Any, Any, RequestRecord]:
        # Taken now, while the driver holds this row: it reads the next one before this task runs.
        return one(i, cursor.take())

    driver = Driver(collector.add, deadline, progress, total)
    # The driver's schedule starts now; records are timed from clock_base (taken before the scan above).
    lead = time.perf_counter() - clock_base
    try:
        started = await driver.run(range(total), make, cap=cap, arrivals=cursor.arrivals(),
                                   expiry=expiry(spec, "trace replay"))
    finally:
        view = await sampler.stop() if sampler else {}
    not_sent = total - started
    stopped = ""
    if driver.expired or not_sent:
        stopped = (f"the load's deadline load_timeout_s={spec.load_timeout():g} s passed: "
                   f"{started} trace requests sent, {not_sent} not sent")
    workload = {"trace": kind, "rows": total, "time_scale": spec.trace_time_scale,
              "span_s": round(cursor.span_s, 3), "in_flight_cap": cap, "cap_waits": driver.cap_waits,
              "skipped_rows": cursor.skipped[0]}
    return ShardResult(collector=collector, end=time.perf_counter() - clock_base, server_view=view,
                       not_sent=not_sent, stopped=stopped, workload=workload)
