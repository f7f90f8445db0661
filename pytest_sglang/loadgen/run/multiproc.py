"""Spread a load over several client processes and merge their records on one clock.

Each child builds its client and its prompts, then all meet at a barrier; right after it, each child
notes ``time.time()`` and ``perf_counter()`` together. Record times (perf_counter offsets) are shifted
by the child's wall-clock start minus the earliest one, so all records share the parent's timeline
(wall clocks of processes on one host agree to microseconds). Each child builds its own prompts
(every ``processes``-th request) and sends back a bounded :class:`Collector`, never all records.
The parent stops every child when it is interrupted (Ctrl-C) or fails: nothing outlives the call.

The shard body (:func:`run_child`), the split (:func:`shard_jobs`), the warmup (:func:`prepare`) and
the merge (:func:`merge_reports`) are shared with :mod:`.ray_nodes`, which runs the shards on Ray nodes.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Barrier

from pytest_sglang.errors import LoadGenError
from pytest_sglang.loadgen.client import clock
from pytest_sglang.loadgen.client.http import make_client
from pytest_sglang.loadgen.client.servermetrics import MetricsSampler
from pytest_sglang.loadgen.measure.collect import Collector
from pytest_sglang.loadgen.prompts.datasets import PromptSource
from pytest_sglang.loadgen.run.runner import Progress, Shard, ShardResult, probe, run_shard, warmup
from pytest_sglang.loadgen.run.runner import flush_cache as do_flush
from pytest_sglang.loadgen.shape.spec import LoadSpec

#: Spawned children must import the package and build a client; allow for a loaded machine.
BARRIER_TIMEOUT_S = 120.0
#: Seconds a child gets to exit after SIGTERM before it is killed.
STOP_GRACE_S = 1.0


@dataclass
class ChildReport:
    """What a shard sends back: its records (bounded) or why it failed."""

    #: The shard's start on the clock all shards share (one host: the wall clock at the barrier).
    wall: float = 0.0
    #: Seconds from the shard's start (its ``wall``) to the end of its last request.
    end: float = 0.0
    collector: Collector | None = None
    server_view: dict[str, float] = field(default_factory=dict)
    not_sent: int = 0
    stopped: str = ""
    error: str = ""
    #: CPU seconds the shard's process used from its start to its last request (client-bound or not).
    cpu_s: float = 0.0


@dataclass(frozen=True)
class ShardJob:
    """One shard of a load, as a child process or a Ray node runs it."""

    url: str
    spec: LoadSpec
    shard: Shard
    api_key: str | None
    sample: bool
    #: Records kept by this shard (its share of ``spec.max_records``).
    cap: int


@dataclass(frozen=True)
class Release:
    """What a shard learns when the start barrier lets it go."""

    #: Its start on the clock all shards share (see :attr:`ChildReport.wall`).
    start: float
    #: Its own ``perf_counter()`` at that moment: its records' times are offsets from it.
    base: float
    #: Seconds left until the load's deadline.
    left_s: float


def run_child(job: ShardJob, release: Callable[[], Release], tick: Callable[[], None]) -> ChildReport:
    """Run one shard: build the client and prompts, wait for ``release`` (blocking), run, report.

    Never raises: any failure becomes :attr:`ChildReport.error` for the parent to report.
    """

    async def main() -> ChildReport:
        client = make_client(job.url, api_key=job.api_key, connections=job.shard.concurrency)
        async with client:
            source = PromptSource(job.spec)  # a dataset file is read before the barrier, not after
            sampler = MetricsSampler(client) if job.sample else None
            if sampler is not None:  # the cache counters before any shard starts its requests
                await sampler.baseline()
            go = await asyncio.get_running_loop().run_in_executor(None, release)
            cpu = time.process_time()
            deadline = asyncio.get_running_loop().time() + go.left_s
            result = await run_shard(client, job.spec, job.shard, clock_base=go.base, deadline=deadline,
                                     cap=job.cap, progress=lambda _done, _total: tick(), sampler=sampler,
                                     source=source)
            return ChildReport(go.start, result.end, result.collector, result.server_view, result.not_sent,
                               result.stopped, cpu_s=time.process_time() - cpu)

    try:
        return clock.run(main())
    except BaseException as exc:  # report anything to the parent rather than dying silently
        return ChildReport(error=f"{type(exc).__name__}: {exc}")


def _child(job: ShardJob, deadline_wall: float, barrier: Barrier, out: Queue[ChildReport],
           done: Synchronized[int]) -> None:
    def release() -> Release:
        barrier.wait(BARRIER_TIMEOUT_S)
        wall, base = time.time(), time.perf_counter()
        return Release(wall, base, deadline_wall - wall)

    def tick() -> None:
        with done.get_lock():
            done.value += 1

    out.put(run_child(job, release, tick))


def prepare(url: str, spec: LoadSpec, api_key: str | None, timeout_s: float) -> list[str]:
    """Probe, warmup and flush from this process before the shards start; returns the warmup errors."""
    PromptSource(spec)  # a bad dataset file is an error here, not in every shard

    async def main() -> list[str]:
        deadline = asyncio.get_running_loop().time() + timeout_s
        async with make_client(url, api_key=api_key, connections=spec.concurrency) as client:
            await probe(client, url)
            warm = await warmup(client, spec, url, deadline)
            if spec.flush_cache:
                await do_flush(client, url)
            return warm

    return clock.run(main())


def run_processes(
    url: str, spec: LoadSpec, api_key: str | None, progress: Progress | None = None
) -> tuple[ShardResult, float]:
    """Run ``spec`` over ``spec.processes`` spawned processes. Warmup and flush run here first."""
    deadline_wall = time.time() + spec.load_timeout()
    warm = prepare(url, spec, api_key, deadline_wall - time.time())
    ctx = multiprocessing.get_context("spawn")  # fork + a parent's event loop/threads is unsafe
    jobs = shard_jobs(url, spec, api_key, spec.processes)
    barrier = ctx.Barrier(len(jobs))
    out: Queue[ChildReport] = ctx.Queue()
    done: Synchronized[int] = ctx.Value("i", 0)
    procs = [ctx.Process(target=_child, args=(job, deadline_wall, barrier, out, done), daemon=True) for job in jobs]
    for p in procs:
        p.start()
    try:
        reports = _collect(out, procs, done, spec.requests, progress, deadline_wall + BARRIER_TIMEOUT_S)
    finally:
        _stop(procs)
    return merge_reports(spec, reports, warm)


def shard_jobs(url: str, spec: LoadSpec, api_key: str | None, parts: int) -> list[ShardJob]:
    """Split ``spec`` into ``parts`` shards: every ``parts``-th request, concurrency and rate divided.

    A sum of Poisson streams is Poisson. Shard 0 samples the server's /metrics (when the spec asks).
    """
    jobs = []
    for k in range(parts):
        conc = None
        if spec.concurrency is not None:
            conc = spec.concurrency // parts + (1 if k < spec.concurrency % parts else 0)
        rate = spec.request_rate / parts if spec.request_rate is not None else None
        shard = Shard(k, parts, conc, rate, spec.seed + 7919 * k)
        jobs.append(ShardJob(url, spec, shard, api_key, k == 0 and spec.sample_server_metrics,
                             math.ceil(spec.max_records / parts)))
    return jobs


def _collect(out: Queue[ChildReport], procs: list[SpawnProcess], done: Synchronized[int], total: int,
             progress: Progress | None, give_up_wall: float) -> list[ChildReport]:
    reports: list[ChildReport] = []
    while len(reports) < len(procs):
        try:
            report = out.get(timeout=0.2)
        except queue.Empty:
            if progress:
                progress(done.value, total)
            if not any(p.is_alive() for p in procs) and out.empty():
                raise LoadGenError(
                    "a load-generator process exited without a result. "
                    "Fix: run with processes=1 to see the error."
                ) from None
            if time.time() > give_up_wall:
                raise LoadGenError(
                    f"the load-generator processes did not report within {BARRIER_TIMEOUT_S:g} s after the "
                    "load's deadline (load_timeout_s). Fix: run with processes=1 to see what hangs."
                ) from None
            continue
        if report.error:
            raise LoadGenError(
                f"a load-generator process failed: {report.error}. Fix: run with processes=1 "
                "to see the error in this process."
            )
        reports.append(report)
    if progress:
        progress(total, total)
    return reports


def _stop(procs: list[SpawnProcess]) -> None:
    """End every child now (they have reported, or the parent is giving up / interrupted)."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    limit = time.monotonic() + STOP_GRACE_S
    for p in procs:
        p.join(timeout=max(0.0, limit - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(timeout=STOP_GRACE_S)


def merge_reports(spec: LoadSpec, reports: list[ChildReport], warm: list[str]) -> tuple[ShardResult, float]:
    """One result from the shards' bounded collectors, each moved onto the earliest shard's clock."""
    t0 = min(r.wall for r in reports)
    merged = Collector(spec.max_records, seed=spec.seed)
    view: dict[str, float] = {}
    end = 0.0
    for r in reports:
        assert r.collector is not None
        shift = r.wall - t0
        merged.merge(r.collector, shift)
        view.update(r.server_view)
        end = max(end, r.end + shift)
    stopped = "; ".join(sorted({r.stopped for r in reports if r.stopped}))
    not_sent = sum(r.not_sent for r in reports)
    result = ShardResult(merged, end, view, warm, not_sent, stopped)
    return result, end
