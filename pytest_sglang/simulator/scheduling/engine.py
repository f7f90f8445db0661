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

from pytest_sglang.simulator.scheduling.profiles import Speed
from pytest_sglang.simulator.scheduling.radix import RadixCache
from pytest_sglang.simulator.scheduling.request import Request
from pytest_sglang.simulator.scheduling.speculative import Speculation
from pytest_sglang.simulator.scheduling.stats import Stats
from pytest_sglang.simulator.scheduling.storage import BACKEND_NAME, FileTier


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
        #: slots held by aborted requests that never gave them back (--sim-fault slot-leak)
        self.leaked = 0
        self.on_finish: Callable[[Request], None] | None = None
        #: --speculative-algorithm: each decode step verifies drafts and may yield several tokens
        self.spec: Speculation | None = None
        #: --sim-fault stalled-dp-rank:K: requests the round-robin DP balancer gives rank K never run
        self.stalled_rank: int | None = None
        self.dp_size = 1
        #: --sim-fault stall-after:N: generation requests after the N-th are accepted and never run
        self.stall_after: int | None = None
        self.accepted = 0
        #: --hicache-storage-backend file: the L3 tier on disk
        self.storage: FileTier | None = None
        #: --sim-fault kv-leak:N: KV tokens each finished request never gives back (and their total)
        self.kv_leak = 0
        self.kv_leaked = 0
        self.stuck: list[Request] = []
        self._next_rank = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- public API -------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def submit(self, req: Request) -> None:
        if req.log_metrics:  # health checks and the server's own warmup are not counted
            self.accepted += 1
            if self.stall_after is not None and self.accepted > self.stall_after:
                self.stuck.append(req)
                return
        if self.stalled_rank is not None and req.log_metrics:  # health checks bypass the balancer
            rank = req.routed_dp_rank
            if rank is None:
                rank, self._next_rank = self._next_rank % self.dp_size, self._next_rank + 1
            if rank == self.stalled_rank:
                self.stuck.append(req)
                return
        self.waiting.append(req)
        self._wake.set()

    def abort(self, req: Request) -> None:
        """The client went away: drop the request and free its KV reservation."""
        req.aborted = True
        if req in self.stuck:
            self.stuck.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        elif req in self.running:
            self.running.remove(req)
            self._give_back(req)
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
            launched = time.perf_counter()
            if admitted:
                # a PD decode worker's request arrives with its KV: nothing to compute (pd_decode.py)
                new_tokens = sum(len(r.prompt_ids) - r.cached for r in admitted if "kv_received" not in r.extra)
                encoder_s = sum(r.encoder_s for r in admitted)  # the vision encoder runs in the prefill batch
                await asyncio.sleep(self.scale * (self.speed.prefill_s(new_tokens) + encoder_s))
                self.stats.on_prefill(new_tokens, time.perf_counter() - launched)
                self.running.extend(admitted)
                self._step(admitted)
            else:
                batch = len(self.running)
                cost = self.spec.step_cost() if self.spec is not None else 1.0
                await asyncio.sleep(self.scale * self.speed.decode_step_s(batch) * cost)
                self.stats.on_decode(batch, time.perf_counter() - launched)
                self._step(self.running, decode=True)

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
            self._match(req)
        cached = 0 if "kv_received" in req.extra else req.cached  # received KV is held here in full
        need = min(self.capacity, len(req.prompt_ids) - cached + req.max_new)
        back = req.cached_host + req.cached_storage  # host tokens loaded back to the device
        if req.node is not None:
            self.cache.lock(req.node, 1)  # before evicting, so our own prefix stays
        if self.free_tokens < need + back:
            self.cache.evict_device(need + back - self.free_tokens)
        if self.free_tokens < need + back:
            if req.node is not None:
                self.cache.lock(req.node, -1)
            return False
        if req.node is not None:
            self.cache.load_back(req.node)
        req.reserved = need
        self.reserved += need
        return True

    def _match(self, req: Request) -> None:
        ids = req.prompt_ids[:-1]  # the last prompt token is always computed
        m = self.cache.match(ids)
        stored = 0
        if self.storage is not None:  # past the device and host tiers: the L3 blocks, read back to the host
            req.extra["storage_backend"] = BACKEND_NAME
            found = self.storage.prefetch(ids, m.device + m.host)
            if found:
                stored = self.cache.insert_host(ids[:m.device + m.host + found])
                m = self.cache.match(ids)
        req.cached_device, req.cached_host, req.cached_storage, req.node = m.device, m.host - stored, stored, m.node

    def _release(self, req: Request) -> None:
        self.reserved -= req.reserved
        req.reserved = 0
        if req.node is not None:
            self.cache.lock(req.node, -1)
            req.node = None

    def _step(self, batch: list[Request], decode: bool = False) -> None:
        now = time.perf_counter()
        self.last_output_perf = now
        finished: list[Request] = []
        n = len(batch)
        spec = self.spec if decode else None
        if spec is not None:
            spec.begin_batch()
        tokens = 0
        for i, req in enumerate(batch):
            # speculative decoding: the accepted drafts and the bonus token, emitted one by one
            planned = 1 + (spec.draw(req) if spec is not None else 0)
            produced, done = 0, False
            while produced < planned and not done and not (produced and req.sink.closed):
                first = not req.out_ids
                # --sim-fault cross-talk: each request decodes its neighbour's next token
                req.advance(batch[(i + 1) % n] if req.crosstalk and n > 1 else None)
                produced += 1
                if first:
                    req.first_perf = now
                req.last_perf = now
                done = req.finish is not None
                req.emit(req, done)
            tokens += produced
            if spec is not None:
                spec.verified(req, produced)
            if done or req.sink.closed:
                finished.append(req)
        if spec is not None:
            spec.end_batch()
        self.stats.on_step(tokens, now)
        for req in finished:
            self._finish(req)

    def _give_back(self, req: Request) -> None:
        if req.aborted and req.leak:
            self.leaked += 1  # the fault: the slot and its KV reservation are never freed
        else:
            self._release(req)

    def _finish(self, req: Request) -> None:
        self.running.remove(req)
        if req.sink.closed and req.finish is None:
            req.aborted = True
        self._give_back(req)
        if self.kv_leak and req.log_metrics:  # the slots stay allocated, owned by nothing
            lost = min(self.kv_leak, max(0, self.free_tokens))
            self.reserved += lost
            self.kv_leaked += lost
        if self.radix:
            self.cache.insert(req.prompt_ids + req.out_ids)
            if self.storage is not None and req.log_metrics:
                self.storage.backup(req.prompt_ids)
        if req.log_metrics:
            self.stats.on_finish(req)
        if self.on_finish is not None and req.log_metrics:
            self.on_finish(req)
        if not req.done.done():
            req.done.set_result(None)
