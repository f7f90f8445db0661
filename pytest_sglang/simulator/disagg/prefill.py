"""The prefill worker's side of a PD pair: wait for the decode peer, compute, hand the KV over.

0.5.23's prefill scheduler holds a request in its bootstrap queue until the decode worker of the
same ``bootstrap_room`` has connected (``SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT``, 300 s, else
"Prefill bootstrap failed"), computes the prompt and its first token, sends the KV (the inflight
queue) and only then answers: one output token, ``finish_reason {"type": "length", "length": 0}``.
"""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from pytest_sglang.simulator.disagg.config import TRANSFER_BASE_S, PDConfig
from pytest_sglang.simulator.disagg.errors import Failure, prefill_failed
from pytest_sglang.simulator.disagg.metrics import PDStats
from pytest_sglang.simulator.disagg.transfer import RoomStore, bootstrap_app, prefill_info
from pytest_sglang.simulator.failures.pd import PDFaults
from pytest_sglang.simulator.logs import Logger
from pytest_sglang.simulator.scheduling.request import EmitFn, Request


@dataclass
class _Held:
    """A prefill request's output, held until its KV is sent."""

    emit: EmitFn
    bootstrap_s: float
    calls: list[bool] = field(default_factory=list)


def kv_checksum(prompt_ids: list[int], weights_seed: int) -> int:
    """The Adler-32 digest of a request's KV (never 0: 0 means "no digest")."""
    return zlib.adler32(f"{weights_seed}:{prompt_ids}".encode()) | 1


class PrefillSide:
    def __init__(
        self,
        pd: PDConfig,
        faults: PDFaults,
        stats: PDStats,
        log: Logger,
        *,
        scale: float,
        kv_bytes_per_token: int,
        weights_seed: int,
    ) -> None:
        self.pd, self.faults, self.stats, self.log = pd, faults, stats, log
        self.scale, self.kv_bytes, self.weights_seed = scale, kv_bytes_per_token, weights_seed
        ttl = scale * (pd.bootstrap_timeout_s + pd.waiting_timeout_s) + 60.0
        self.store = RoomStore(ttl)
        self.rng = random.Random()
        self._runner: web.AppRunner | None = None
        self._held: dict[int, _Held] = {}  # by id(request): a client may reuse a rid

    async def start(self, host: str, *, tp: int, dp: int, pp: int, http_port: int) -> None:
        """Open the bootstrap server (not with ``pd-lost-peer``: this prefill never answers one)."""
        if self.faults.lost_peer:
            self.log.always(f"--sim-fault pd-lost-peer: the bootstrap server on port {self.pd.bootstrap_port} "
                            "is not started")
            return
        info = prefill_info(self.pd, tp_size=tp, dp_size=dp, pp_size=pp, http_port=http_port)
        self._runner = web.AppRunner(bootstrap_app(self.store, info, 60.0), access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, self.pd.bootstrap_port, reuse_address=True).start()
        self.log.info(f"CommonKVBootstrapServer started successfully on {host}:{self.pd.bootstrap_port}")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def bootstrap(self, req: Request, room: int, *, fake: bool = False) -> Failure | None:
        """The bootstrap queue: wait until the decode peer registered ``room``.

        ``fake``: the request names the fake bootstrap host (a warmup): no peer, no wait.
        """
        if fake:
            self._hold(req, 0.0)
            return None
        entry = self.store.get(room)
        queue = self.stats.queues
        queue["num_prefill_bootstrap_queue_reqs"] += 1
        try:
            await asyncio.wait_for(entry.bootstrapped.wait(), self.scale * self.pd.bootstrap_timeout_s)
        except asyncio.TimeoutError:
            self.store.drop(room)
            elapsed = (time.perf_counter() - entry.created) / self.scale
            reason = f"Request {room} timed out after {elapsed:.1f}s in KVPoll.Bootstrapping"
            message = prefill_failed("bootstrap", req.rid, room, reason)
            self.log.always(message)
            self.stats.bootstrap_failed += 1
            return Failure(message)
        finally:
            queue["num_prefill_bootstrap_queue_reqs"] -= 1
        self._hold(req, max(0.0, entry.registered - req.arrival_perf))
        return None

    def _hold(self, req: Request, bootstrap_s: float) -> None:
        """Compute only the first token, and keep its output until the KV is sent."""
        req.max_new = min(req.max_new, 1)
        held = self._held[id(req)] = _Held(req.emit, bootstrap_s)

        def hold(_: Request, done: bool) -> None:
            held.calls.append(done)

        req.emit = hold

    def forget(self, req: Request) -> None:
        """Drop a held request that will not be transferred (another part of its request failed)."""
        self._held.pop(id(req), None)

    async def transfer(self, req: Request, room: int, *, fake: bool = False) -> Failure | None:
        """The inflight queue: send the KV to the decode peer, then release the held output."""
        held = self._held.pop(id(req), None) or _Held(req.emit, 0.0)
        if fake:  # nothing to send, nothing measured
            self._release(req, held)
            return None
        entry = self.store.get(room)
        if req.aborted or req.finish is None:
            self.store.conclude(room, failure="Aborted by AbortReq.")
            return None
        nbytes = len(req.prompt_ids) * self.kv_bytes
        seconds = (TRANSFER_BASE_S + (nbytes / self.pd.bandwidth if self.pd.bandwidth else 0.0)) * \
            self.faults.slow_transfer
        queue = self.stats.queues
        queue["num_prefill_inflight_queue_reqs"] += 1
        started = time.perf_counter()
        try:
            await asyncio.sleep(self.scale * seconds)
        finally:
            queue["num_prefill_inflight_queue_reqs"] -= 1
        took = time.perf_counter() - started  # measured like the TTFT histograms: wall time
        rate = max(self.faults.transfer_failure, self.pd.env_failure_prob)
        if rate and self.rng.random() < rate:
            reason = f"Failed to send kv chunk of {room} to {entry.decode}"
            self.store.conclude(room, failure=reason)
            message = prefill_failed("transfer", req.rid, room, reason)
            self.log.always(message)
            self.stats.transfer_failed += 1
            return Failure(message)
        self.store.conclude(room, kv=self._kv(req, nbytes))
        self.stats.observe_transfer(took, nbytes)
        self.stats.observe_bootstrap(held.bootstrap_s, 0.0)
        self._release(req, held)
        return None

    @staticmethod
    def _release(req: Request, held: _Held) -> None:
        req.finish = {"type": "length", "length": 0}
        for done in held.calls:
            held.emit(req, done)

    def _kv(self, req: Request, nbytes: int) -> dict[str, Any]:
        return {
            "prompt_ids": list(req.prompt_ids),
            "output_id": req.out_ids[0] if req.out_ids else None,
            "cached_device": req.cached_device,
            "cached_host": req.cached_host,
            "checksum": kv_checksum(req.prompt_ids, self.weights_seed) if self.pd.kv_checksum else 0,
            "kv_bytes": nbytes,
        }
