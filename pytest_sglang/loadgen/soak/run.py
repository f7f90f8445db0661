"""A soak: a load held for a duration while the server is sampled (plain Python, usable without pytest).

``run_soak(url, SoakSpec(...), rss=..., stop_when=...) -> SoakRun``. Requests are sent for
``duration_s`` at a concurrency (requests in flight) or a request rate (Poisson arrivals), built and
sent as the load generator sends them (:mod:`.runner`'s driver, :mod:`.client`'s streaming request).
Every ``sample_interval_s`` one :class:`~.soak_series.SoakSample` is taken (:mod:`.soak_sampler`:
resident memory, free KV tokens, running and queued requests), with the requests the client saw
complete and those in flight.

``stop_when(run)`` is asked after every sample; a reason ends the soak early (a leak or a stall
already proven). One deadline bounds everything: ``duration_s`` for the load, plus
:data:`GRACE_S` for the last sample and the cancelled requests to unwind. Requests still in flight
when the soak ends are cancelled and counted as ``cut`` (not failures).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import math
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx

from pytest_sglang.errors import ConfigError
from pytest_sglang.loadgen.client import clock
from pytest_sglang.loadgen.client.http import make_client, send_request
from pytest_sglang.loadgen.client.vocab import resolve_vocab
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.prompts.datasets import PromptSource
from pytest_sglang.loadgen.run.runner import Driver, arrival_offsets, probe
from pytest_sglang.loadgen.shape.spec import MAX_LOAD_S, MAX_REQUESTS, LoadSpec
from pytest_sglang.loadgen.soak.sampler import Sampler, process_tree_rss_mb
from pytest_sglang.loadgen.soak.series import SoakSample, Stall
from pytest_sglang.redaction import register

__all__ = ["GRACE_S", "MAX_SAMPLES", "SoakRun", "SoakSpec", "process_tree_rss_mb", "run_soak"]

#: Seconds past ``duration_s`` for the last sample and the unwinding of cancelled requests.
GRACE_S = 15.0
#: Samples kept at most: a longer soak samples less often (memory and judging cost stay bounded).
MAX_SAMPLES = 2000
#: Kept examples of failed requests (the counts by kind are exact).
_EXAMPLES = 3
_CUT = "soak ended"


@dataclass(frozen=True)
class SoakSpec:
    """One soak: a load shape held for ``duration_s``, sampled every ``sample_interval_s``."""

    duration_s: float
    concurrency: int | None = None
    request_rate: float | None = None
    input_len: int = 256
    output_len: int = 64
    api: str = "native"
    sample_interval_s: float = 5.0
    request_timeout_s: float | None = None

    def __post_init__(self) -> None:
        """Reject shapes that would not be a soak (fields named, with the fix)."""
        if not (isinstance(self.duration_s, (int, float)) and 0 < self.duration_s < math.inf):
            raise ConfigError("SoakSpec(duration_s=...)", self.duration_s, "must be a finite number of seconds > 0",
                              "give the soak's length, e.g. duration_s=600")
        if self.duration_s > MAX_LOAD_S:  # the soak's one deadline adds it: bounded like a load's
            raise ConfigError("SoakSpec(duration_s=...)", self.duration_s, f"is more than the limit of "
                              f"{MAX_LOAD_S:,.0f} s (a week)", "give the soak's length, e.g. duration_s=600")
        if (self.concurrency is None) == (self.request_rate is None):
            raise ConfigError("SoakSpec(concurrency=..., request_rate=...)", (self.concurrency, self.request_rate),
                              "a soak needs exactly one of them", "give concurrency=N (requests in flight) or "
                              "request_rate=R (arrivals per second)")
        if not (isinstance(self.sample_interval_s, (int, float)) and 0 < self.sample_interval_s < math.inf):
            raise ConfigError("SoakSpec(sample_interval_s=...)", self.sample_interval_s,
                              "must be a finite number of seconds > 0", "e.g. sample_interval_s=5")
        self.load_spec()  # the load generator's own checks (lengths, concurrency, rate, api)

    def load_spec(self) -> LoadSpec:
        """The load generator's spec for the soak's requests (their count is the duration's business)."""
        return LoadSpec(requests=MAX_REQUESTS, concurrency=self.concurrency, request_rate=self.request_rate,
                        input_len=self.input_len, output_len=self.output_len, api=self.api, warmup=0,
                        request_timeout_s=self.request_timeout_s, sample_server_metrics=False)

    def interval(self) -> float:
        """``sample_interval_s``, or longer when more than :data:`MAX_SAMPLES` samples would be taken."""
        return max(self.sample_interval_s, self.duration_s / MAX_SAMPLES)

    def shape(self) -> str:
        """``soak 600 s, concurrency 8, native, input 256 / output 64 tokens``."""
        pace = (f"concurrency {self.concurrency}" if self.concurrency is not None
                else f"request_rate {self.request_rate:g}/s")
        return (f"soak {self.duration_s:g} s, {pace}, {self.api}, input {self.input_len} / output "
                f"{self.output_len} tokens, sampled every {self.interval():g} s")


@dataclass
class SoakRun:
    """What a soak measured: the samples, the requests, the longest stall, and why it ended."""

    spec: SoakSpec
    url: str
    samples: list[SoakSample] = field(default_factory=list)
    completed: int = 0
    #: Failed requests by kind (``timeout``: over ``request_timeout_s``), and a few examples.
    errors: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    #: Requests in flight when the soak ended, cancelled (not failures).
    cut: int = 0
    #: Where RSS came from ("the server's process tree (pid 4242)", "/metrics ..."), or why it is unknown.
    rss_source: str = ""
    #: Why /metrics gave nothing (empty when it was read).
    metrics_missing: str = ""
    duration_s: float = 0.0
    #: Why the soak ended before ``duration_s`` (empty: it ran its course).
    stopped_early: str = ""
    stall: Stall | None = None

    @property
    def failed(self) -> int:
        return sum(self.errors.values())


class _Tracker:
    """Counts completions and failures as records come in, and the longest stall."""

    def __init__(self, run: SoakRun, t0: float) -> None:
        self.run, self.t0 = run, t0
        self.in_flight = 0
        self.progress_at = 0.0  # last completion, or when requests went from none to some in flight
        self.longest: Stall | None = None

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def sent(self) -> None:
        if self.in_flight == 0:
            self.progress_at = self.now()
        self.in_flight += 1

    def record(self, rec: RequestRecord) -> None:
        if rec.error_kind == "timeout" and rec.error == _CUT:  # the soak's end: a stall going on is measured now
            self._gap(ongoing=True)
            self.in_flight -= 1
            self.run.cut += 1
            return
        self.in_flight -= 1
        if rec.error_kind == "timeout":  # not progress: the server never answered it
            self._failed(rec)
            return
        self._gap(ongoing=False)
        self.progress_at = self.now()
        self.run.completed += 1
        if rec.error_kind is not None:
            self._failed(rec)

    def _failed(self, rec: RequestRecord) -> None:
        kind = rec.error_kind or "error"
        self.run.errors[kind] = self.run.errors.get(kind, 0) + 1
        if len(self.run.examples) < _EXAMPLES:
            self.run.examples.append(f"{kind}: {rec.error}")

    def _gap(self, *, ongoing: bool) -> Stall | None:
        """The current stall (measured now) if it is the longest so far."""
        length = self.now() - self.progress_at
        if self.in_flight <= 0 or length <= 0:
            return None
        if self.longest is None or length >= self.longest.length_s:
            self.longest = Stall(round(self.progress_at, 3), round(length, 3), self.run.completed, ongoing)
        return self.longest

    def current(self) -> Stall | None:
        """The longest stall, counting the one going on now."""
        self._gap(ongoing=True)
        return self.longest


def run_soak(url: str, spec: SoakSpec, *, api_key: str | None = None, rss: Callable[[], float | None] | None = None,
             rss_source: str = "", stop_when: Callable[[SoakRun], str | None] | None = None) -> SoakRun:
    """Run the soak ``spec`` against the SGLang server at ``url`` (see the module docstring).

    ``rss``: reads the server's resident memory in MB (None: from ``/metrics`` if exported);
    ``rss_source`` says where it reads it, for the messages. Raises
    :class:`~pytest_sglang.errors.LoadGenError` when nothing answers at ``url``.
    """
    register(api_key)
    run = SoakRun(spec, url.rstrip("/"), rss_source=rss_source if rss is not None else "")
    load = resolve_vocab(run.url, spec.load_spec(), api_key)[0]  # random ids the model has: 0.5.23 dies on others
    coro = _soak(run, load, api_key, rss, stop_when)
    if not clock.loop_running():
        return clock.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called from async code: a loop of its own
        return pool.submit(clock.run, coro).result()


async def _soak(run: SoakRun, load: LoadSpec, api_key: str | None, rss: Callable[[], float | None] | None,
                stop_when: Callable[[SoakRun], str | None] | None) -> SoakRun:
    spec = run.spec
    loop = asyncio.get_running_loop()
    end = loop.time() + spec.duration_s + GRACE_S  # the one deadline of everything below
    async with make_client(run.url, api_key=api_key, connections=spec.concurrency) as client:
        await probe(client, run.url, 10.0)
        sampler = Sampler(client, rss, run.rss_source)
        tracker = _Tracker(run, time.perf_counter())
        driver = Driver(tracker.record, loop.time() + spec.duration_s)
        drive = loop.create_task(_drive(driver, client, load, tracker))
        try:
            await _sample_until_done(run, sampler, tracker, drive, stop_when, end)
        finally:
            run.stall = tracker.current()  # before the requests in flight are cut
            if not drive.done():
                drive.cancel()
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
                await asyncio.wait_for(drive, max(0.1, end - loop.time()))
        run.cut += tracker.in_flight  # cancelled by an early stop: no record came for them
        tracker.in_flight = 0
        run.samples.append(await _sample(sampler, tracker, end - loop.time()))
        run.duration_s = tracker.now()
        run.rss_source, run.metrics_missing = sampler.rss_source, sampler.missing
    return run


def _drive(driver: Driver, client: httpx.AsyncClient, load: LoadSpec,
           tracker: _Tracker) -> Coroutine[Any, Any, int]:
    source = PromptSource(load)

    def make(index: int) -> Coroutine[Any, Any, RequestRecord]:
        tracker.sent()
        return send_request(client, load, source.get(index), index, clock_base=tracker.t0)

    arrivals = arrival_offsets(load.request_rate, load.burstiness, load.seed) if load.request_rate else None
    return driver.run(itertools.count(), make, cap=load.concurrency, arrivals=arrivals, expiry=_CUT)


def _sample(sampler: Sampler, tracker: _Tracker, timeout_s: float) -> Coroutine[Any, Any, SoakSample]:
    return sampler.sample(tracker.now(), tracker.run.completed, tracker.in_flight, timeout_s)


async def _sample_until_done(run: SoakRun, sampler: Sampler, tracker: _Tracker, drive: asyncio.Task[int],
                             stop_when: Callable[[SoakRun], str | None] | None, end: float) -> None:
    loop = asyncio.get_running_loop()
    interval = run.spec.interval()
    next_at = loop.time()
    while not drive.done():
        run.samples.append(await _sample(sampler, tracker, end - loop.time()))
        run.stall = tracker.current()
        run.metrics_missing = sampler.missing
        reason = stop_when(run) if stop_when is not None else None
        if reason:
            run.stopped_early = reason
            return
        next_at += interval
        await asyncio.wait([drive], timeout=max(0.0, next_at - loop.time()))
    crash = drive.exception()
    if crash is not None:  # a bug in the driver, not a request failure
        raise crash

