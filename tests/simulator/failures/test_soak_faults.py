"""``--sim-fault leak:MB_PER_MIN`` (the process's real RSS grows), ``kv-leak:TOKENS`` (free KV tokens drift
down) and ``stall-after:N`` (requests hang)."""

from __future__ import annotations

import argparse
import time

import httpx
import psutil
import pytest

from pytest_sglang.sglang import metrics_text
from pytest_sglang.simulator.failures.faults import check_fault
from pytest_sglang.simulator.failures.production import ProductionFaults, parse_production_faults
from pytest_sglang.simulator.launch.leak import Leak
from tests.conftest import SimFactory


def test_the_kinds_parse_and_bad_arguments_name_the_fix() -> None:
    assert parse_production_faults(["leak:10", "stall-after:100", "kv-leak:16"]) == ProductionFaults(
        leak_mb_per_min=10.0, stall_after=100, kv_leak_tokens=16)
    for spec, fix in (("leak", "leak needs megabytes per minute, e.g. leak:10"), ("leak:0", "must be > 0"),
                      ("leak:nan", "must be > 0"), ("leak:1e9", "at most 60,000 MB per minute"),
                      ("stall-after:", "stall-after:100"), ("stall-after:1.5", "stall-after:100"),
                      ("kv-leak:0", "kv-leak:16"), ("kv-leak:x", "kv-leak:16")):
        with pytest.raises(argparse.ArgumentTypeError, match=fix):
            check_fault(spec)


def test_the_leak_commits_real_memory_and_stops_at_its_cap() -> None:
    leak = Leak(600.0, cap=30_000_000)  # 10 MB a second, capped at 30 MB
    proc = psutil.Process()
    before = proc.memory_info().rss
    try:
        assert leak.step(2.0)
        assert 19_000_000 <= leak.held <= 20_000_000
        assert proc.memory_info().rss - before >= 15_000_000  # touched: resident, not only mapped
        assert not leak.step(10.0)  # 100 MB due, 30 MB allowed
        assert leak.held == 30_000_000
        assert not leak.step(10.0) and leak.held == 30_000_000
    finally:
        leak.release()


def _rss(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 1e6


def test_a_leaking_simulator_grows_its_rss_at_the_rate(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "leak:1200")  # 20 MB a second
    assert sim.proc is not None
    start = _rss(sim.proc.pid)
    time.sleep(3.0)
    grown = _rss(sim.proc.pid) - start
    assert 40 <= grown <= 80, grown
    assert "--sim-fault leak:1200: leaking 1200 MB of host memory a minute" in sim.log_text()


def test_after_n_requests_nothing_completes_while_health_still_answers(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "stall-after:3", "--enable-metrics")
    body = {"text": "x", "sampling_params": {"max_new_tokens": 2}}
    for _ in range(3):
        assert httpx.post(f"{sim.url}/generate", json=body, timeout=10).status_code == 200
    with pytest.raises(httpx.TimeoutException):
        httpx.post(f"{sim.url}/generate", json=body, timeout=1.5)
    assert httpx.get(f"{sim.url}/health", timeout=10).status_code == 200
    assert httpx.get(f"{sim.url}/health_generate", timeout=10).status_code == 200


def _kv(url: str) -> tuple[float, float]:
    samples = metrics_text.parse(httpx.get(f"{url}/metrics", timeout=10).text)
    available = metrics_text.value(samples, "sglang:kv_available_tokens")
    evictable = metrics_text.value(samples, "sglang:kv_evictable_tokens")
    assert available is not None and evictable is not None
    return available, evictable


def test_each_finished_request_keeps_kv_tokens_for_ever(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "kv-leak:100", "--enable-metrics")
    before = sum(_kv(sim.url))
    body = {"text": "x", "sampling_params": {"max_new_tokens": 2}}
    for _ in range(5):
        assert httpx.post(f"{sim.url}/generate", json=body, timeout=10).status_code == 200
    assert before - sum(_kv(sim.url)) == 500  # free = available + evictable: 100 tokens lost per request
