"""The decode worker's side of a PD pair: reach the prefill's bootstrap server, receive the KV, continue.

As 0.5.23's decode scheduler (``disaggregation/decode.py``, ``common/conn.py``), measured on a real
CPU pair: the prealloc queue fetches the prefill's parallel info from ``bootstrap_host:
bootstrap_port`` (every second, 15 attempts, then "Decode handshake failed ... Aborted by
AbortReq.", ``num_bootstrap_failed_reqs_total``); the transfer queue waits for the KV
(``SGLANG_DISAGGREGATION_WAITING_TIMEOUT``, heartbeats every ``..._HEARTBEAT_INTERVAL`` s, "Lost
connection with prefill instance" after ``..._HEARTBEAT_MAX_FAILURE`` misses), each failure a
"Decode transfer failed ..." and ``num_transfer_failed_reqs_total``. A received request needs no
prefill compute, reports the prefill's cached tokens and no input logprobs.
"""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from typing import Any

from pytest_sglang.simulator import tokenizer
from pytest_sglang.simulator.disagg.config import FAKE_BOOTSTRAP_HOST, TRANSFER_BASE_S, PDConfig
from pytest_sglang.simulator.disagg.errors import (
    UNKNOWN_REASON,
    Failure,
    decode_transfer_failed,
    handshake_failed,
)
from pytest_sglang.simulator.disagg.metrics import PDStats
from pytest_sglang.simulator.disagg.transfer import KVClient, Unreachable
from pytest_sglang.simulator.failures.pd import PDFaults
from pytest_sglang.simulator.launch.startup import scheduler_exception
from pytest_sglang.simulator.logs import Logger
from pytest_sglang.simulator.scheduling.request import Request

#: 0.5.23's decode prealloc queue: ``_max_ensure_retries`` 15, ``_ensure_retry_interval`` 1 s.
ENSURE_RETRIES = 15
ENSURE_INTERVAL_S = 1.0
#: What ``Request.extra`` carries once the KV arrived (read by the engine and the logprob writer).
KV_RECEIVED = "kv_received"


def scramble(req: Request, salt: int) -> None:
    """Decode from a KV that is not this prompt's: the tokens become another (still plausible) text."""
    req.seed = tokenizer.other_seed(req.seed, salt)
    req.natural_len = tokenizer.natural_length(req.seed)
    req.script = None


class DecodeSide:
    def __init__(
        self,
        pd: PDConfig,
        faults: PDFaults,
        stats: PDStats,
        log: Logger,
        *,
        scale: float,
        own_addr: str,
        weights_seed: int,
    ) -> None:
        self.pd, self.faults, self.stats, self.log = pd, faults, stats, log
        self.scale, self.own_addr, self.weights_seed = scale, own_addr, weights_seed
        self.client = KVClient()
        self.rng = random.Random()

    async def stop(self) -> None:
        await self.client.close()

    async def receive(self, req: Request, room: int, host: str | None, port: object) -> Failure | None:
        """Bootstrap with the prefill, wait for the KV, and prepare ``req`` to continue from it."""
        queues = self.stats.queues
        if host == FAKE_BOOTSTRAP_HOST or (host is None and self.pd.backend == "fake"):
            # a fake transfer moves no KV: the decode continues from an uninitialised cache
            scramble(req, zlib.crc32(req.rid.encode()))
            req.extra[KV_RECEIVED] = True
            return None
        if self.pd.backend == "fake":
            # The fake receiver reports success, but the metadata never lands: 0.5.23 waits forever.
            queues["num_decode_transfer_queue_reqs"] += 1
            try:
                await asyncio.Event().wait()
            finally:
                queues["num_decode_transfer_queue_reqs"] -= 1
        addr = f"{host}:{port}"
        queues["num_decode_prealloc_queue_reqs"] += 1
        try:
            failure = await self._handshake(req, room, addr)
        finally:
            queues["num_decode_prealloc_queue_reqs"] -= 1
        if failure is not None:
            return failure
        registered = time.perf_counter()
        self.stats.observe_bootstrap(registered - req.arrival_perf, 0.0)
        queues["num_decode_transfer_queue_reqs"] += 1
        try:
            kv = await self._wait(req, room, addr, registered)
            return kv if isinstance(kv, Failure) else await self._apply(req, room, kv)
        except asyncio.CancelledError:
            # the client (the gateway) gave up: 0.5.23 aborts and counts a failed transfer
            self._transfer_failed(req, room, "Aborted by AbortReq.")
            raise
        finally:
            queues["num_decode_transfer_queue_reqs"] -= 1

    async def _handshake(self, req: Request, room: int, addr: str) -> Failure | None:
        for attempt in range(1, ENSURE_RETRIES + 1):
            try:
                if self.faults.lost_peer:
                    raise Unreachable(f"Cannot connect to host {addr} (--sim-fault pd-lost-peer)")
                info = await self.client.parallel_info(addr)
            except Unreachable as exc:
                self.log.always(str(exc))
                if attempt < ENSURE_RETRIES:
                    await asyncio.sleep(self.scale * ENSURE_INTERVAL_S)
                continue
            self._check_layout(info)
            return None
        self.log.always(f"Could not fetch prefill parallel info from {addr} after {ENSURE_RETRIES} attempts")
        message = handshake_failed(req.rid, room, "Aborted by AbortReq.")
        self.log.always(message)
        self.stats.bootstrap_failed += 1
        return Failure(message)

    def _check_layout(self, info: dict[str, Any]) -> None:
        """0.5.23 raises in the scheduler when the pair's KV layouts differ: the decode server dies."""
        page, dtype = info.get("page_size"), info.get("kv_cache_dtype")
        error = None
        if page is not None and page != self.pd.page_size:
            error = (f"RuntimeError: Page size mismatch: prefill server has page_size={page}, but decode "
                     f"server has page_size={self.pd.page_size}. Both servers must use the same --page-size value.")
        elif dtype is not None and dtype != self.pd.kv_cache_dtype:
            error = (f"RuntimeError: KV cache dtype mismatch: prefill server has kv_cache_dtype={dtype}, but "
                     f"decode server has kv_cache_dtype={self.pd.kv_cache_dtype}. Both servers must use the "
                     "same --kv-cache-dtype value.")
        if error is not None:
            scheduler_exception(self.log, error, where="sglang/srt/disaggregation/common/conn.py",
                                func="try_ensure_parallel_info", stmt="raise RuntimeError(", rank="")

    async def _wait(self, req: Request, room: int, addr: str, registered: float) -> dict[str, Any] | Failure:
        interval = self.scale * self.pd.heartbeat_interval_s
        deadline = registered + self.scale * self.pd.waiting_timeout_s
        misses = 0
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                elapsed = (time.perf_counter() - registered) / self.scale
                return self._transfer_failed(
                    req, room, f"Request {room} timed out after {elapsed:.1f}s in KVPoll.WaitingForInput"
                )
            try:
                result = await self.client.poll(addr, room, self.own_addr, min(remaining, interval))
            except Unreachable:
                misses += 1
                if misses >= self.pd.heartbeat_max_failure:
                    self.client.forget(addr)
                    reason = f"Lost connection with prefill instance (bootstrap_addr: {addr})"
                    self.log.always(f"{reason}, 1 requests affected")
                    return self._transfer_failed(req, room, reason)
                await asyncio.sleep(min(interval, remaining))
                continue
            misses = 0
            if result.get("status") == "ready" and isinstance(result.get("kv"), dict):
                kv: dict[str, Any] = result["kv"]
                return kv
            if result.get("status") == "failed":
                return self._transfer_failed(req, room, str(result.get("reason")))

    def _transfer_failed(self, req: Request, room: int, reason: str) -> Failure:
        message = decode_transfer_failed(req.rid, room, reason)
        self.log.always(message)
        self.stats.transfer_failed += 1
        return Failure(message)

    async def _apply(self, req: Request, room: int, kv: dict[str, Any]) -> Failure | None:
        rate = max(self.faults.transfer_failure, self.pd.env_failure_prob)
        if rate and self.rng.random() < rate:
            return self._transfer_failed(req, room, UNKNOWN_REASON)
        if self.faults.slow_transfer > 1:  # this side's link is the slow one
            nbytes = int(kv.get("kv_bytes", 0))
            base = TRANSFER_BASE_S + (nbytes / self.pd.bandwidth if self.pd.bandwidth else 0.0)
            await asyncio.sleep(self.scale * base * (self.faults.slow_transfer - 1))
        corrupt = bool(self.faults.checksum_mismatch) and self.rng.random() < self.faults.checksum_mismatch
        expected = int(kv.get("checksum") or 0)
        if self.pd.kv_checksum and expected:
            actual = expected ^ 0x10000 if corrupt else expected
            if self.pd.env_checksum_mismatch_prob and self.rng.random() < self.pd.env_checksum_mismatch_prob:
                actual ^= 1  # SGLANG_TEST_DISAGG_KV_CHECKSUM_MISMATCH_PROB flips the computed digest
            if actual != expected:
                self.log.always(f"KV checksum mismatch req={req.rid} bootstrap_room={room} "
                                f"expected={expected:#x} got={actual:#x}")
                self.stats.transfer_failed += 1
                return Failure("KV checksum mismatch")
        elif corrupt:
            scramble(req, 0x10000)  # unchecked corruption: the output is silently wrong
        prompt = kv.get("prompt_ids")
        if isinstance(prompt, list) and prompt != req.prompt_ids:
            # another request's KV under this room (a gateway bug): decode continues from it, silently
            req.seed = tokenizer.output_seed(prompt, self.weights_seed)
            req.natural_len = tokenizer.natural_length(req.seed)
            req.script = None
        req.cached_device = int(kv.get("cached_device") or 0)
        req.cached_host = int(kv.get("cached_host") or 0)
        req.extra[KV_RECEIVED] = True
        return None
