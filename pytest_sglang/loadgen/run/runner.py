"""The asyncio engine: arrivals (Poisson/gamma as bench_serving), concurrency cap, warmup, flush.

Requests start lazily: a request's prompt is built when it starts, at most ``concurrency`` request
tasks exist at a time (with a rate and no cap, those that have arrived and not finished), and each
finished record goes to a bounded :class:`~pytest_sglang.loadgen.measure.collect.Collector`. Memory does not
grow with ``requests``. One deadline (``LoadSpec.load_timeout``) covers probe, warmup, flush and the
timed run: when it passes, requests in flight are cancelled and count as timeouts, the rest are not
sent. Cancelling the run (Ctrl-C: ``asyncio.Runner`` cancels the main task) cancels every request in
flight before the cancellation goes on.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from pytest_sglang.errors import LoadGenError
from pytest_sglang.loadgen.client.http import describe_exc, make_client, send_request
from pytest_sglang.loadgen.client.servermetrics import MetricsSampler, read_bounded
from pytest_sglang.loadgen.measure.collect import Collector
from pytest_sglang.loadgen.measure.record import RequestRecord, one_line
from pytest_sglang.loadgen.prompts.datasets import PromptSource
from pytest_sglang.loadgen.shape.cancel import cancelled_indices
from pytest_sglang.loadgen.shape.spec import WARMUP_MAX_TOKENS, LoadSpec
from pytest_sglang.redaction import scrub

Progress = Callable[[int, int], None]
#: A request (or a whole multi-turn session, which hands its records over itself and returns None).
RequestFactory = Callable[[int], Coroutine[Any, Any, RequestRecord | None]]
#: Seconds given to cancelled requests to unwind (close their connections) on Ctrl-C.
CANCEL_GRACE_S = 1.0


@dataclass(frozen=True)
class Shard:
    """The part of a load one process runs: requests ``first``, ``first + step``, ... (global indices)."""

    first: int
    step: int
    concurrency: int | None
    request_rate: float | None
    seed: int

    def indices(self, total: int) -> range:
        return range(self.first, total, self.step)


@dataclass
class ShardResult:
    collector: Collector
    #: Seconds from the common start to the end of the last request.
    end: float
    server_view: dict[str, float] = field(default_factory=dict)
    warmup_errors: list[str] = field(default_factory=list)
    not_sent: int = 0
    stopped: str = ""
    #: A trace replay's or multi-turn run's own facts (rows, time scale, in-flight cap and how often it
    #: held a request back; sessions and turns).
    workload: dict[str, Any] = field(default_factory=dict)


#: The timed part of a load (:func:`run_shard`, or a trace replay / multi-turn sessions): same arguments.
TimedRun = Callable[..., Coroutine[Any, Any, ShardResult]]


def arrival_offsets(rate: float, burstiness: float, seed: int) -> Iterator[float]:
    """Return arrival times from the start, in seconds.

    0, then gaps drawn from gamma(shape=burstiness, scale=1/(rate*burstiness)) as bench_serving draws
    them.
    """
    rng = random.Random(seed)
    theta = 1.0 / (rate * burstiness)
    t = 0.0
    while True:
        yield t
        t += rng.gammavariate(burstiness, theta)


class Driver:
    """Starts requests lazily under a cap, an arrival schedule and a deadline (``loop.time()``)."""

    def __init__(self, on_record: Callable[[RequestRecord], None], deadline: float,
                 progress: Progress | None = None, total: int = 0) -> None:
        self.on_record = on_record
        self.deadline = deadline
        self.progress = progress
        self.total = total
        #: Task -> index of the request it has in flight (None: a session thinking between turns).
        self.tasks: dict[asyncio.Task[RequestRecord | None], int | None] = {}
        self.finished = 0
        self.expired = False
        #: Requests that waited for room under the cap (a trace replay reports it: they were sent late).
        self.cap_waits = 0
        self._crash: BaseException | None = None

    async def run(self, indices: Iterable[int], make: RequestFactory, *, cap: int | None,
                  arrivals: Iterator[float] | None = None, expiry: str = "") -> int:
        """Run requests ``indices``; returns how many started (fewer when the deadline passed)."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        started = 0
        try:
            for index in indices:
                if arrivals is not None and not await self._sleep_until(t0 + next(arrivals)):
                    break
                if cap is not None and len(self.tasks) >= cap:
                    self.cap_waits += 1
                if not await self._room(cap):
                    break
                task = loop.create_task(make(index))
                self.tasks[task] = index
                task.add_done_callback(self._done)
                started += 1
            while self.tasks and await self._room(1):
                pass
        except BaseException:
            await self._cancel_all()  # Ctrl-C or an outer cancel: nothing may outlive the run
            raise
        if self.tasks:
            await self._expire(expiry)
        if self._crash is not None:
            raise self._crash
        return started

    def _left(self) -> float:
        return self.deadline - asyncio.get_running_loop().time()

    async def _sleep_until(self, when: float) -> bool:
        delay = when - asyncio.get_running_loop().time()
        if delay > 0:
            await asyncio.sleep(min(delay, max(self._left(), 0.0)))
        return self._alive()

    async def _room(self, cap: int | None) -> bool:
        """Wait until fewer than ``cap`` requests are in flight; False when the deadline passed."""
        while cap is not None and len(self.tasks) >= cap and self._alive():
            await asyncio.wait(list(self.tasks), timeout=max(self._left(), 0.0),
                               return_when=asyncio.FIRST_COMPLETED)
        return self._alive()

    def _alive(self) -> bool:
        if self._crash is not None or self._left() <= 0:
            self.expired = self._crash is None
            return False
        return True

    def _done(self, task: asyncio.Task[RequestRecord | None]) -> None:
        self.tasks.pop(task, None)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:  # a bug, not a request failure (those are records): end the run with it
            self._crash = exc
            return
        record = task.result()
        if record is not None:
            self.record(record)

    def record(self, record: RequestRecord) -> None:
        """One finished request: to the collector, and counted for the progress bar."""
        self.on_record(record)
        self.finished += 1
        if self.progress is not None:
            self.progress(self.finished, self.total)

    async def _cancel_all(self) -> list[int]:
        pending = dict(self.tasks)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(list(pending), timeout=CANCEL_GRACE_S)
        return [index for task, index in pending.items() if task.cancelled() and index is not None]

    async def _expire(self, reason: str) -> None:
        for index in sorted(await self._cancel_all()):
            rec = RequestRecord(index=index)
            rec.fail("timeout", reason)
            self.on_record(rec)


async def probe(client: httpx.AsyncClient, url: str, timeout_s: float = 10.0) -> None:
    """Fail fast when nothing answers at ``url`` (any HTTP answer is fine here)."""
    try:
        async with client.stream("GET", "/health", timeout=timeout_s) as resp:
            await read_bounded(resp, 0)
    except httpx.HTTPError as exc:
        raise LoadGenError(
            scrub(
                f"cannot reach the SGLang server at {url}: {describe_exc(exc)}. Fix: check the URL "
                "(host, port, http/https) and that the server is running."
            )
        ) from None


async def warmup(client: httpx.AsyncClient, spec: LoadSpec, url: str, deadline: float) -> list[str]:
    """Warmup requests (not timed). A 4xx answer means the load cannot run at all: LoadGenError."""
    if spec.warmup == 0:
        return []
    source = PromptSource(spec, seed_offset=10_000)
    records: list[RequestRecord] = []

    def make(i: int) -> Coroutine[Any, Any, RequestRecord]:
        p = source.get(i)
        return send_request(client, spec, p, -1 - i, clock_base=0.0, output_len=min(p.output_len, WARMUP_MAX_TOKENS))

    driver = Driver(records.append, deadline)
    await driver.run(range(spec.warmup), make, cap=min(spec.warmup, spec.concurrency or spec.warmup),
                     expiry=expiry(spec, "warmup"))
    for r in sorted(records, key=lambda r: -r.index):
        if r.error_kind and r.error_kind.startswith("http_4"):
            fix = (
                "pass the server's API key (api_key= / --api-key)"
                if r.error_kind == "http_401"
                else "check the API (--api native|chat|completions) and the fields the server rejects"
            )
            msg = f"warmup request to {url} failed: {r.error_kind}: {r.error}. Fix: {fix}."
            raise LoadGenError(scrub(msg))
    return [f"{r.error_kind}: {r.error}" for r in records if r.error_kind]


def expiry(spec: LoadSpec, phase: str) -> str:
    return f"cancelled in flight: the load's deadline load_timeout_s={spec.load_timeout():g} s passed ({phase})"


async def flush_cache(client: httpx.AsyncClient, url: str, timeout_s: float = 90.0) -> None:
    async with client.stream("POST", "/flush_cache", params={"timeout": 60}, timeout=timeout_s) as resp:
        body = await read_bounded(resp, 2000)
    if resp.status_code != 200:
        raise LoadGenError(
            scrub(
                f"POST {url}/flush_cache?timeout=60 answered {resp.status_code}: "
                f"{one_line(body)[:200]}. Fix: run without flush_cache, or let the "
                "server go idle first."
            )
        )


async def run_shard(
    client: httpx.AsyncClient,
    spec: LoadSpec,
    shard: Shard,
    *,
    clock_base: float,
    deadline: float,
    cap: int | None = None,
    progress: Progress | None = None,
    sample: bool = False,
    sampler: MetricsSampler | None = None,
    source: PromptSource | None = None,
) -> ShardResult:
    """Run one shard's requests; record times relative to ``clock_base`` (a perf_counter value).

    ``deadline`` is a ``loop.time()`` value; ``cap`` bounds the records kept (default
    ``spec.max_records``). ``sampler``: a /metrics sampler whose baseline was read before the clock
    started (else one is made here when ``sample``). ``source``: the prompts, built before the clock
    started (else built here, from ``spec``).
    """
    collector = Collector(cap or spec.max_records, seed=shard.seed)
    indices = shard.indices(spec.requests)
    source = source if source is not None else PromptSource(spec)
    sampler = await start_sampler(client, sample, sampler)

    cancel = cancelled_indices(spec.requests, spec.cancel_rate, spec.seed)

    def make(i: int) -> Coroutine[Any, Any, RequestRecord]:
        return send_request(client, spec, source.get(i), i, clock_base=clock_base,
                            cancel_after=spec.cancel_after() if i in cancel else None)

    arrivals = arrival_offsets(shard.request_rate, spec.burstiness, shard.seed) if shard.request_rate else None
    driver = Driver(collector.add, deadline, progress, len(indices))
    try:
        started = await driver.run(indices, make, cap=shard.concurrency, arrivals=arrivals,
                                   expiry=expiry(spec, "timed run"))
    finally:
        view = await sampler.stop() if sampler else {}
    not_sent = len(indices) - started
    stopped = ""
    if driver.expired or not_sent:
        stopped = (f"the load's deadline load_timeout_s={spec.load_timeout():g} s passed: "
                   f"{len(indices) - not_sent} requests sent, {not_sent} not sent")
    end = time.perf_counter() - clock_base
    return ShardResult(collector=collector, end=end, server_view=view, not_sent=not_sent, stopped=stopped)


async def start_sampler(client: httpx.AsyncClient, sample: bool,
                        sampler: MetricsSampler | None) -> MetricsSampler | None:
    """``sampler`` (baseline read) or a new one when ``sample``, started; None when not sampling."""
    if sampler is None and sample:
        sampler = MetricsSampler(client)
        await sampler.baseline()
    if sampler is not None:
        sampler.start()
    return sampler


async def run_single(
    url: str, spec: LoadSpec, api_key: str | None, progress: Progress | None = None, timed: TimedRun | None = None,
) -> tuple[ShardResult, float]:
    """The whole load in this process: probe, warmup, flush, timed run. Returns (result, duration).

    ``timed``: the timed run (default :func:`run_shard`; a trace replay or multi-turn sessions).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + spec.load_timeout()
    PromptSource(spec)  # a bad dataset file is an error before anything is sent
    client = make_client(url, api_key=api_key, connections=spec.in_flight() if spec.is_trace() else spec.concurrency)
    async with client:
        await probe(client, url, _bounded(10.0, deadline))
        warm = await warmup(client, spec, url, deadline)
        if spec.flush_cache:
            await flush_cache(client, url, _bounded(90.0, deadline))
        shard = Shard(0, 1, spec.concurrency, spec.request_rate, spec.seed)
        sampler = MetricsSampler(client) if spec.sample_server_metrics else None
        if sampler is not None:  # the cache counters before the clock starts (not part of the timed run)
            await sampler.baseline()
        base = time.perf_counter()
        result = await (timed or run_shard)(
            client, spec, shard, clock_base=base, deadline=deadline, progress=progress, sampler=sampler,
        )
        duration = time.perf_counter() - base
    result.warmup_errors = warm
    return result, duration


def _bounded(timeout_s: float, deadline: float) -> float:
    """``timeout_s``, or less when the load's deadline comes first (never below a tenth of a second)."""
    return max(0.1, min(timeout_s, deadline - asyncio.get_running_loop().time()))
