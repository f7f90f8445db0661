"""The live parts of the gates against real simulator processes: verify_live and effective.

Each catches a server that lies: a /server_info advertising more KV capacity than the real pool, or a
hierarchical cache that is reported on but does not serve anything.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_sglang.gates.facts import capacity, hicache
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen import run_load
from pytest_sglang.server import LaunchConfig, SGLangServer, launch

BASE = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--max-total-tokens", "8192", "--enable-metrics")
# Time scale 1 keeps prefill time (what the host tier saves) well above HTTP overhead; tiny starts in ~1 s.
HICACHE_ON = (*BASE, "--enable-hierarchical-cache", "--hicache-ratio", "4")
# The live capacity checks decode 512 tokens per request: compress time so that takes ~0.5 s.
HICACHE_OFF = (*BASE, "--sim-time-scale", "0.1")


def _launch(args: tuple[str, ...]) -> Iterator[SGLangServer]:
    with launch(LaunchConfig(runner="simulator", args=args, startup_timeout_s=60)) as server:
        yield server


@pytest.fixture(scope="module")
def hicache_on() -> Iterator[SGLangServer]:
    yield from _launch(HICACHE_ON)


@pytest.fixture(scope="module")
def hicache_off() -> Iterator[SGLangServer]:
    yield from _launch(HICACHE_OFF)


def Ctx(server: Any) -> GateContext:
    return GateContext(server=server, load=lambda spec: run_load(server.url, spec))


class Lying:
    """A real server whose /server_info is rewritten (what a misreporting server would send)."""

    def __init__(self, real: SGLangServer, **changes: Any) -> None:
        self.real, self.changes = real, changes
        self.url, self.api_key, self.startup = real.url, real.api_key, None

    def info(self) -> dict[str, Any]:
        info = copy.deepcopy(self.real.info())
        tokens = self.changes.get("token_capacity")
        if tokens is not None:
            info["max_total_num_tokens"] = tokens
            info["internal_states"][0]["memory_usage"]["token_capacity"] = tokens
        info.update({k: v for k, v in self.changes.items() if k != "token_capacity"})
        return info

    def metrics(self) -> Any:
        return self.real.metrics()

    def client(self, **kwargs: Any) -> Any:
        return self.real.client(**kwargs)

    # The Handle protocol (server/members.py), as SGLangServer has it: a lone server is its own one member.
    server, unreachable, role = property(lambda self: self), None, "regular"

    def label(self) -> None:
        return None

    def members(self) -> tuple[Lying]:
        return (self,)


def test_verify_live_passes_on_an_honest_server(hicache_off: SGLangServer) -> None:
    outcome = capacity.run_marker(Ctx(hicache_off), min_concurrent_requests=8, avg_request_tokens=1024,
                                  verify_live=True)
    assert outcome.passed, outcome.message()
    assert outcome.checks[-1].metric == "live_concurrent_requests"


def test_verify_live_catches_advertised_capacity_larger_than_the_pool(hicache_off: SGLangServer) -> None:
    liar = Lying(hicache_off, token_capacity=65_536)  # the real pool holds 8,192 tokens
    static = capacity.evaluate_capacity(liar.info(), min_concurrent_requests=16, avg_request_tokens=1024)
    assert static.passed  # the numbers alone would pass
    outcome = capacity.run_marker(Ctx(liar), min_concurrent_requests=16, avg_request_tokens=1024,
                                  verify_live=True)
    assert [c.metric for c in outcome.failed] == ["live_concurrent_requests"]
    assert outcome.failed[0].measured is not None and outcome.failed[0].measured <= 8
    assert "requests queued instead of running together" in outcome.message()


def test_effective_passes_with_host_hits_and_gain(hicache_on: SGLangServer) -> None:
    outcome = hicache.run_marker(Ctx(hicache_on), effective=True, min_gain=1.5)
    assert outcome.passed, outcome.message()
    hits = next(c for c in outcome.checks if c.metric == "host_hit_tokens")
    assert isinstance(hits.measured, int) and hits.measured > 8192


def test_effective_catches_a_cache_reported_on_that_does_not_work(hicache_off: SGLangServer) -> None:
    liar = Lying(hicache_off, enable_hierarchical_cache=True, hicache_ratio=4.0)
    outcome = hicache.run_marker(Ctx(liar), effective=True, min_gain=1.5)
    assert {c.metric for c in outcome.failed} >= {"host_hit_tokens", "repeat_gain"}
    hits = next(c for c in outcome.checks if c.metric == "host_hit_tokens")
    assert hits.measured == 0
    assert "the host tier did not serve the evicted prefixes" in outcome.message()


def test_effective_on_a_server_with_hicache_off_says_so(hicache_off: SGLangServer) -> None:
    outcome = hicache.run_marker(Ctx(hicache_off), effective=True)
    assert outcome.failed[0].metric == "enable_hierarchical_cache"
    assert "workload not run: /server_info enable_hierarchical_cache is not true" in outcome.message()
