"""The production ``--sim-fault`` kinds: health-under-load and stalled-dp-rank (speculative and weights
faults are shown by tests/simulator/test_weights_checker.py and tests/gates/test_speculative_marker.py)."""

from __future__ import annotations

import argparse
import concurrent.futures
import time

import httpx
import pytest

from pytest_sglang.simulator.faults import check_fault
from pytest_sglang.simulator.production_faults import ProductionFaults, parse_production_faults
from tests.conftest import SimFactory


def test_the_kinds_parse_and_bad_arguments_name_the_fix() -> None:
    faults = parse_production_faults(["spec-collapse", "health-under-load:3", "stalled-dp-rank:1", "crash-at:x"])
    assert faults == ProductionFaults(spec_collapse=True, health_under_load_s=3.0, stalled_dp_rank=1)
    for spec, fix in (("spec-slow:2", "takes no argument"), ("health-under-load:soon", "health-under-load:3"),
                      ("stalled-dp-rank:-1", "stalled-dp-rank:1"), ("corrupt-weights:1", "takes no argument")):
        with pytest.raises(argparse.ArgumentTypeError, match=fix):
            check_fault(spec)


def _health_s(url: str) -> float:
    start = time.monotonic()
    assert httpx.get(f"{url}/health", timeout=30).status_code == 200
    return time.monotonic() - start


def test_health_answers_late_only_while_requests_run(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "health-under-load:20", "--sim-decode-step-ms", "200")  # 1 s, 10 ms/step
    idle = _health_s(sim.url)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        body = {"text": "x", "sampling_params": {"max_new_tokens": 300, "ignore_eos": True}}
        busy = pool.submit(httpx.post, f"{sim.url}/generate", json=body, timeout=60)
        time.sleep(0.3)
        loaded = _health_s(sim.url)
        assert busy.result().status_code == 200
    assert idle < 0.5 and loaded >= 1.0


def test_a_stalled_dp_rank_hangs_its_requests_while_health_stays_200(sim_factory: SimFactory) -> None:
    sim = sim_factory("--dp-size", "2", "--sim-fault", "stalled-dp-rank:1")
    body = {"text": "x", "sampling_params": {"max_new_tokens": 2}}
    answers = []
    for _ in range(2):  # round-robin: the first goes to rank 0, the second to rank 1
        try:
            answers.append(httpx.post(f"{sim.url}/generate", json=body, timeout=1.5).status_code)
        except httpx.TimeoutException:
            answers.append(None)
    assert answers == [200, None]
    assert httpx.get(f"{sim.url}/health", timeout=10).status_code == 200


def test_a_stalled_rank_beyond_dp_size_is_refused_at_start(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "stalled-dp-rank:1", wait="none")
    assert sim.proc is not None and sim.proc.wait(20) != 0
    assert "stalled-dp-rank:1: no such rank with --dp-size 1 (ranks 0 to 0); add --dp-size 2" in sim.log_text()
