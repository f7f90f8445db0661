"""Continuous-batching engine: queue, KV token pool, radix cache, speed model.

One asyncio task runs the scheduler loop. Each iteration either runs a prefill batch (requests
admitted from the FCFS queue while ``max_running_requests`` and the KV pool allow) or one decode
step that gives every running request one token and emits its chunk right away (no per-request
timers). A request reserves prompt + ``max_new_tokens`` KV tokens when admitted (no retraction);
finished sequences stay in the radix cache until evicted. Every duration is simulated seconds x
``--sim-time-scale``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from pytest_sglang.simulator import tokenizer
from pytest_sglang.simulator.profiles import Speed
from pytest_sglang.simulator.radix import RadixCache
from pytest_sglang.simulator.sink import Sink
from pytest_sglang.simulator.stats import Stats

EmitFn = Callable[["Request", bool], None]


class Request:
    """One generation request as the scheduler sees it."""

    __slots__ = (
        "rid",
        "prompt_ids",
        "max_new",
        "ignore_eos",
        "stop",
        "seed",
        "natural_len",
        "out_ids",
        "text",
        "emit",
        "sink",
        "stream",
        "done",
        "finish",
        "cached_device",
        "cached_host",
        "node",
        "reserved",
        "arrival",
        "arrival_perf",
        "admitted_perf",
        "first_perf",
        "last_perf",
        "log_metrics",
        "endpoint",
        "extra",
        "aborted",
    )

    def __init__(
        self,
        rid: str,
        prompt_ids: list[int],
        max_new: int,
        *,
        ignore_eos: bool,
        stop: list[str],
        random_seed: int,
        emit: EmitFn,
        sink: Sink,
        stream: bool,
        endpoint: str,
        log_metrics: bool = True,
    ) -> None:
        self.rid = rid
        self.prompt_ids = prompt_ids
        self.max_new = max_new
        self.ignore_eos = ignore_eos
        self.stop = stop
        self.seed = tokenizer.output_seed(prompt_ids, random_seed)
        self.natural_len = tokenizer.natural_length(self.seed)
        self.out_ids: list[int] = []
        self.text = ""
        self.emit = emit
        self.sink = sink
        self.stream = stream
        self.endpoint = endpoint
        self.log_metrics = log_metrics
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: {"type": "length", "length": n} | {"type": "stop", "matched": ...} | abort
        self.finish: dict[str, Any] | None = None
        self.cached_device = 0
        self.cached_host = 0
        self.node: Any = None
        self.reserved = 0
        self.arrival = time.time()
        self.arrival_perf = time.perf_counter()
        self.admitted_perf = 0.0
        self.first_perf = 0.0
        self.last_perf = 0.0
        self.extra: dict[str, Any] = {}
        self.aborted = False

    @property
    def cached(self) -> int:
        return self.cached_device + self.cached_host

    def advance(self) -> None:
        """Generate the next token and decide whether the request is finished."""
        k = len(self.out_ids)
        if self.max_new <= 0:  # max_new_tokens 0: prefill only, finish without a token
            self.finish = {"type": "length", "length": 0}
            return
        if not self.ignore_eos and k + 1 >= self.natural_len and k + 1 < self.max_new:
            self.out_ids.append(tokenizer.EOS_TOKEN_ID)
            self.finish = {"type": "stop", "matched": tokenizer.EOS_TOKEN_ID}
            return
        tid, piece = tokenizer.output_token(self.seed, k)
        self.out_ids.append(tid)
        self.text += piece
        for s in self.stop:
            at = self.text.find(s, max(0, len(self.text) - len(piece) - len(s)))
            if at >= 0:
                self.text = self.text[:at]
                self.finish = {"type": "stop", "matched": s}
                return
        if len(self.out_ids) >= self.max_new:
            self.finish = {"type": "length", "length": self.max_new}


class Engine:
    def __init__(
        self,
        *,
        capacity: int,
        max_running: int,
        speed: Speed,
        time_scale: float,
        chunked_prefill: int,
        host_capacity: int = 0,
        radix: bool = True,
    ) -> None:
        self.capacity = capacity
        self.max_running = max_running
        self.speed = speed
        self.scale = time_scale
        self.chunked_prefill = max(1, chunked_prefill)
        self.cache = RadixCache(host_capacity)
        self.radix = radix
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.reserved = 0
        self.stats = Stats()
        self.last_output_perf = 0.0
        self.stalled = False
        self.on_finish: Callable[[Request], None] | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- public API -------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def submit(self, req: Request) -> None:
        self.waiting.append(req)
        self._wake.set()

    def abort(self, req: Request) -> None:
        """The client went away: drop the request and free its KV reservation."""
        req.aborted = True
        if req in self.waiting:
            self.waiting.remove(req)
        elif req in self.running:
            self._release(req)
            self.running.remove(req)
        if not req.done.done():
            req.done.set_result(None)

    @property
    def used_tokens(self) -> int:
        """KV tokens in use: reservations of running requests + cache nodes they lock."""
        return self.reserved + self.cache.locked_tokens

    @property
    def free_tokens(self) -> int:
        return self.capacity - self.reserved - self.cache.device_tokens

    def flush(self) -> bool:
        if self.waiting or self.running:
            return False
        self.cache.clear()
        return True

    # -- scheduling -------------------------------------------------------------------------------
    async def _loop(self) -> None:
        while True:
            if self.stalled or (not self.waiting and not self.running):
                self._wake.clear()
                await self._wake.wait()
                continue
            admitted = self._admit()
            if admitted:
                new_tokens = sum(len(r.prompt_ids) - r.cached for r in admitted)
                await asyncio.sleep(self.scale * self.speed.prefill_s(new_tokens))
                self.running.extend(admitted)
                self._step(admitted)
            else:
                await asyncio.sleep(self.scale * self.speed.decode_step_s(len(self.running)))
                self._step(self.running)

    def _admit(self) -> list[Request]:
        admitted: list[Request] = []
        budget = self.chunked_prefill
        while self.waiting and len(self.running) + len(admitted) < self.max_running:
            req = self.waiting[0]
            if req.aborted:
                self.waiting.popleft()
                continue
            if admitted and len(req.prompt_ids) > budget:
                break
            if not self._reserve(req):
                break
            self.waiting.popleft()
            budget -= len(req.prompt_ids) - req.cached
            req.admitted_perf = time.perf_counter()
            admitted.append(req)
        return admitted

    def _reserve(self, req: Request) -> bool:
        if self.radix and len(req.prompt_ids) > 1:
            m = self.cache.match(req.prompt_ids[:-1])  # the last prompt token is always computed
            req.cached_device, req.cached_host, req.node = m.device, m.host, m.node
        need = min(self.capacity, len(req.prompt_ids) - req.cached + req.max_new)
        if req.node is not None:
            self.cache.lock(req.node, 1)  # before evicting, so our own prefix stays
        if self.free_tokens < need + req.cached_host:
            self.cache.evict_device(need + req.cached_host - self.free_tokens)
        if self.free_tokens < need + req.cached_host:
            if req.node is not None:
                self.cache.lock(req.node, -1)
            return False
        if req.node is not None:
            self.cache.load_back(req.node)
        req.reserved = need
        self.reserved += need
        return True

    def _release(self, req: Request) -> None:
        self.reserved -= req.reserved
        req.reserved = 0
        if req.node is not None:
            self.cache.lock(req.node, -1)
            req.node = None

    def _step(self, batch: list[Request]) -> None:
        now = time.perf_counter()
        self.last_output_perf = now
        finished: list[Request] = []
        for req in batch:
            first = not req.out_ids
            req.advance()
            if first:
                req.first_perf = now
            req.last_perf = now
            done = req.finish is not None
            req.emit(req, done)
            if done or req.sink.closed:
                finished.append(req)
        self.stats.on_step(len(batch), now)
        for req in finished:
            self._finish(req)

    def _finish(self, req: Request) -> None:
        self.running.remove(req)
        self._release(req)
        if self.radix:
            self.cache.insert(req.prompt_ids + req.out_ids)
        if req.sink.closed and req.finish is None:
            req.aborted = True
        if req.log_metrics:
            self.stats.on_finish(req)
        if self.on_finish is not None and req.log_metrics:
            self.on_finish(req)
        if not req.done.done():
            req.done.set_result(None)
