"""The workload behind ``sglang_hicache(effective=True)`` and the examples' hicache A/B.

Shared prefixes whose total exceeds the GPU KV pool but fits the host pool are sent twice, in the
same order. With the GPU pool alone, an in-order scan larger than the pool misses every time
(LRU evicts each prefix before it comes back); with a working hierarchical cache the evicted
prefixes come back from the host tier, reported as ``meta_info.cached_tokens_details.host``, and
the second pass is faster because only the suffixes are prefilled.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_sglang import ledger
from pytest_sglang.errors import SGLangError
from pytest_sglang.formatting import fmt
from pytest_sglang.redaction import clean_text

if TYPE_CHECKING:
    import httpx

    from pytest_sglang.server.members import Handle


@dataclass(frozen=True)
class PassResult:
    """One pass over the prefixes: wall seconds and the server's cached-token counts."""

    seconds: float
    prompt_tokens: int
    cached_tokens: int
    host_cached_tokens: int
    #: Whether responses carried ``cached_tokens_details`` (older servers only give ``cached_tokens``).
    details_seen: bool = True


@dataclass(frozen=True)
class ReuseResult:
    """Two passes over ``prefixes`` shared prefixes of ``prefix_len`` tokens."""

    prefixes: int
    prefix_len: int
    device_tokens: int
    host_tokens: int
    first: PassResult
    second: PassResult
    #: ``sglang:load_back_tokens_total`` growth during the second pass (None without /metrics).
    load_back_tokens: int | None = None

    @property
    def working_set(self) -> int:
        return self.prefixes * self.prefix_len

    @property
    def gain(self) -> float:
        """How much faster the second pass was (first / second wall time)."""
        return self.first.seconds / max(self.second.seconds, 1e-9)

    def shape(self) -> str:
        return (f"{self.prefixes} prefixes x {fmt(self.prefix_len)} tokens = {fmt(self.working_set)} "
                f"tokens (GPU pool {fmt(self.device_tokens)}, host pool {fmt(self.host_tokens)}), "
                "sent twice in order")

    def to_dict(self) -> dict[str, Any]:
        return {"shape": self.shape(), "gain": round(self.gain, 3),
                "first": vars(self.first), "second": vars(self.second)}


def reuse_workload(device_tokens: int, host_tokens: int, max_input: int) -> tuple[int, int]:
    """(prefixes, prefix_len) whose total exceeds the GPU pool and fits the host pool.

    Raises ValueError (the reason) when no such workload exists.
    """
    if host_tokens <= device_tokens * 1.2:
        raise ValueError(f"the host pool ({fmt(host_tokens)} tokens per rank) is not larger than the GPU "
                         f"pool ({fmt(device_tokens)} tokens): no working set can exceed the GPU pool "
                         "and still fit the host pool")
    target = min(int(device_tokens * 1.5), (device_tokens + host_tokens) // 2)
    prefix_len = max(16, min(max_input - 8, device_tokens // 4))
    return max(2, math.ceil(target / prefix_len)), prefix_len


def prefix_ids(i: int, length: int) -> list[int]:
    """Prefix ``i``: deterministic token ids, distinct from the first token on."""
    return [10 + i] + [10 + (i * 7919 + j * 104729) % 990 for j in range(1, length)]


def _run_pass(client: httpx.Client, prefixes: int, prefix_len: int, tag: int) -> PassResult:
    start, prompt, cached, host, seen = time.perf_counter(), 0, 0, 0, False
    for i in range(prefixes):
        body = {"input_ids": [*prefix_ids(i, prefix_len), 10 + tag, 11 + i],
                "sampling_params": {"max_new_tokens": 1, "temperature": 0.0}}
        response = client.post("/generate", json=body)
        if response.status_code != 200:
            raise SGLangError(f"POST /generate answered {response.status_code} during the prefix-reuse "
                              f"workload: {clean_text(response.text[:300])}\nFix: check the server log; the "
                              f"prompts are {fmt(prefix_len + 2)} tokens.")
        meta = _meta(response)
        prompt += _int(meta.get("prompt_tokens"))
        cached += _int(meta.get("cached_tokens"))
        details = meta.get("cached_tokens_details")
        seen = seen or isinstance(details, dict)
        host += _int(details.get("host")) if isinstance(details, dict) else 0
    return PassResult(time.perf_counter() - start, prompt, cached, host, seen)


def _meta(response: httpx.Response) -> dict[str, Any]:
    """``meta_info`` of a /generate answer; anything else is an error that says what came back."""
    try:
        data = response.json()
    except ValueError:
        data = None
    meta = data.get("meta_info") if isinstance(data, dict) else None
    if not isinstance(meta, dict):
        raise SGLangError(f"POST /generate answered 200 without a meta_info object during the prefix-reuse "
                          f"workload: {clean_text(response.text[:200])!r}\nFix: check that the server is SGLang.")
    return meta


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def load_back_total(server: Handle) -> int | None:
    """Sum of ``sglang:load_back_tokens_total`` over ranks, or None when /metrics is off."""
    try:
        samples = server.metrics().get("sglang:load_back_tokens_total", [])
    except Exception:  # metrics are optional corroboration
        return None
    return int(sum(s.value for s in samples)) if samples else None


def run_prefix_reuse(server: Handle, *, device_tokens: int, host_tokens: int, max_input: int) -> ReuseResult:
    """Send the workload twice, after ``/flush_cache`` so that earlier traffic does not count."""
    import httpx  # lazily: the hicache gate module is imported for its keywords alone

    prefixes, prefix_len = reuse_workload(device_tokens, host_tokens, max_input)
    with server.client(timeout=httpx.Timeout(600.0, connect=10.0)) as client:
        ledger.note_flush()
        client.post("/flush_cache")
        first = _run_pass(client, prefixes, prefix_len, 0)
        before = load_back_total(server)
        second = _run_pass(client, prefixes, prefix_len, 1)
        after = load_back_total(server)
    loaded = None if before is None or after is None else after - before
    return ReuseResult(prefixes, prefix_len, device_tokens, host_tokens, first, second, loaded)
