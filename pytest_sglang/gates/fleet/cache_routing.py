"""``sglang_fleet(cache_aware=True)``: the gateway sends requests that share a prefix to the worker that has it.

The workload: P prefixes (a prime >= 13, so round-robin routing cannot line a prefix up with one
worker by accident), each sent K times with a different 2-token suffix, interleaved (round k sends
prefix 0..P-1 once), one request at a time, ``max_new_tokens=1``. Sent once **through the gateway**
and once **to workers picked at random by the gate itself** (a seeded random choice per request): that
is random routing, without a second gateway. Every worker's prefix cache is flushed before each pass.
The cached prompt tokens each answer reports (``meta_info.cached_tokens``, native API) are summed.

Ideal routing misses each prefix once: ``P x (K - 1) x prefix_len`` reusable tokens are cached.
Random routing misses a prefix once on every worker it lands on. The gateway passes when it caches at
least the random pass's tokens plus half of what random routing missed; a ``random`` or
``round_robin`` gateway does no better than random and fails.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_sglang import ledger
from pytest_sglang.errors import SGLangError
from pytest_sglang.formatting import fmt
from pytest_sglang.loadgen.workloads.prefix_reuse import prefix_ids
from pytest_sglang.redaction import clean_text

if TYPE_CHECKING:
    import httpx

    from pytest_sglang.server.handle import SGLangServer
    from pytest_sglang.server.members import Handle

__all__ = ["RoutingResult", "RoutingWorkload", "run_cache_routing", "workload_for"]

_MIN_PREFIXES = 13
_TIMEOUT_S = 60.0


def _prime_at_least(n: int) -> int:
    while any(n % d == 0 for d in range(2, math.isqrt(n) + 1)):
        n += 1
    return n


@dataclass(frozen=True)
class RoutingWorkload:
    """P prefixes of ``prefix_len`` tokens, each sent ``repeats`` times."""

    prefixes: int
    repeats: int
    prefix_len: int

    @property
    def reusable(self) -> int:
        """Prompt tokens an ideal router gets from the cache: every repeat after the first hits its prefix."""
        return self.prefixes * (self.repeats - 1) * self.prefix_len

    def bodies(self) -> list[dict[str, Any]]:
        """The requests in sending order: round k sends every prefix once."""
        return [{"input_ids": [*prefix_ids(p, self.prefix_len), 10 + k, 11 + p],
                 "sampling_params": {"max_new_tokens": 1, "temperature": 0.0}}
                for k in range(self.repeats) for p in range(self.prefixes)]

    def shape(self) -> str:
        return (f"{self.prefixes} prefixes x {fmt(self.prefix_len)} tokens, each sent {self.repeats} times "
                f"(interleaved, one at a time, max_new_tokens=1)")


def workload_for(workers: int, pool_tokens: int, max_input: int) -> RoutingWorkload:
    """A workload for ``workers`` workers whose smallest KV pool holds ``pool_tokens`` tokens.

    Every prefix must stay cached on one worker even if random routing sends all of them there.
    """
    prefixes = _prime_at_least(max(_MIN_PREFIXES, workers + 1))
    repeats = max(4, workers + 2)  # more repeats than workers, so random routing misses visibly
    prefix_len = max(16, min(64, pool_tokens // (4 * prefixes), max_input - 8))
    return RoutingWorkload(prefixes, repeats, prefix_len)


@dataclass
class RoutingResult:
    """Cached prompt tokens through the gateway and under random routing, for one workload."""

    workload: RoutingWorkload
    gateway_cached: int = 0
    random_cached: int = 0
    #: Workers whose /flush_cache did not answer 200 (their cache may have held earlier prefixes).
    unflushed: list[str] = field(default_factory=list)

    @property
    def required(self) -> int:
        """Random routing's cached tokens plus half of the reusable tokens it missed."""
        missed = max(0, self.workload.reusable - self.random_cached)
        return self.random_cached + math.ceil(missed / 2)

    def source(self) -> str:
        return (f"sum of meta_info.cached_tokens over {len(self.workload.bodies())} requests per pass; required: "
                f"random routing's {fmt(self.random_cached)} + half of the "
                f"{fmt(max(0, self.workload.reusable - self.random_cached))} reusable tokens it missed (ideal "
                f"routing caches {fmt(self.workload.reusable)})")


def _post(client: httpx.Client, path: str, where: str, body: dict[str, Any] | None = None) -> httpx.Response:
    import httpx  # lazily: the gate module is imported for its keywords alone

    try:
        return client.post(path, json=body)
    except httpx.HTTPError as exc:
        raise SGLangError(f"POST {path} at {where} failed during the cache-aware routing workload: "
                          f"{type(exc).__name__}: {clean_text(str(exc)[:200])}\nFix: check that it is running.") \
            from None


def _cached(response: httpx.Response, where: str) -> int:
    if response.status_code != 200:
        raise SGLangError(f"POST /generate at {where} answered {response.status_code} during the cache-aware "
                          f"routing workload: {clean_text(response.text[:200])}\nFix: check that worker's log.")
    try:
        meta = response.json().get("meta_info")
    except (ValueError, AttributeError):
        meta = None
    value = meta.get("cached_tokens") if isinstance(meta, dict) else None
    if not isinstance(value, int) or isinstance(value, bool):
        raise SGLangError(f"POST /generate at {where} answered without meta_info.cached_tokens: "
                          f"{clean_text(response.text[:200])!r}\nFix: check that the workers are SGLang.")
    return value


def _flush(workers: list[SGLangServer], names: list[str]) -> list[str]:
    failed = []
    for server, name in zip(workers, names, strict=True):
        ledger.note_flush()
        with server.client(timeout=_TIMEOUT_S) as client:
            if _post(client, "/flush_cache", name).status_code != 200:
                failed.append(name)
    return failed


def run_cache_routing(gateway: Handle, workers: list[SGLangServer], names: list[str],
                      workload: RoutingWorkload, *, seed: int = 0) -> RoutingResult:
    """Send ``workload`` to random workers, then through the gateway; each pass after flushing every worker."""
    result = RoutingResult(workload)
    rng = random.Random(seed)
    bodies = workload.bodies()
    clients = [w.client(timeout=_TIMEOUT_S) for w in workers]
    try:
        result.unflushed += _flush(workers, names)
        for body in bodies:
            pick = rng.randrange(len(workers))
            result.random_cached += _cached(_post(clients[pick], "/generate", names[pick], body), names[pick])
    finally:
        for client in clients:
            client.close()
    result.unflushed += _flush(workers, names)
    with gateway.client(timeout=_TIMEOUT_S) as client:
        for body in bodies:
            result.gateway_cached += _cached(_post(client, "/generate", "the gateway", body), "the gateway")
    return result
