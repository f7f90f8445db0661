"""The production ``--sim-fault`` kinds: health-under-load and stalled-dp-rank (speculative and weights
faults are shown by tests/simulator/front/test_weights_checker.py and
tests/gates/production/test_speculative_marker.py)."""

from __future__ import annotations

import argparse
import concurrent.futures
import time

import httpx
import pytest

from pytest_sglang.simulator.failures.faults import check_fault
from pytest_sglang.simulator.failures.production import ProductionFaults, parse_production_faults
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


SPEC = ("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3")


def test_the_speculation_faults_parse_and_bad_arguments_name_the_fix() -> None:
    faults = parse_production_faults(["spec-decay-after:4096", "spec-rank-low:1"])
    assert faults == ProductionFaults(spec_decay_after=4096, spec_rank_low=1)
    for spec, fix in (("spec-decay-after", "spec-decay-after:4096"), ("spec-decay-after:0", "from 1 to"),
                      ("spec-decay-after:9999999", "from 1 to 1,048,576"), ("spec-decay-after:1k", "whole number"),
                      ("spec-rank-low", "spec-rank-low:1"), ("spec-rank-low:-1", "spec-rank-low:1")):
        with pytest.raises(argparse.ArgumentTypeError, match=fix):
            check_fault(spec)


def _accept_length(url: str, prompt_len: int, rank: int | None = None) -> float:
    """Accepted tokens per verify step over four greedy requests of ``prompt_len`` ids."""
    tokens = steps = 0
    for i in range(4):
        body: dict[str, object] = {"input_ids": [10 + (k + i) % 50 for k in range(prompt_len)],
                                   "sampling_params": {"max_new_tokens": 64, "ignore_eos": True}}
        if rank is not None:
            body["routed_dp_rank"] = rank
        meta = httpx.post(f"{url}/generate", json=body, timeout=60).json()["meta_info"]
        tokens, steps = tokens + meta["completion_tokens"], steps + meta["spec_verify_ct"]
    return tokens / steps


def test_acceptance_falls_beyond_the_decay_length_only(sim_factory: SimFactory) -> None:
    sick = sim_factory(*SPEC, "--sim-fault", "spec-decay-after:1000")
    assert _accept_length(sick.url, 100) > 2.0  # EAGLE3's 0.8 per draft: about 2.95 with 3 drafts
    assert _accept_length(sick.url, 1500) < 1.5  # 0.15 per draft: about 1.18


def test_one_dp_rank_accepts_less_and_server_info_says_which(sim_factory: SimFactory) -> None:
    sim = sim_factory(*SPEC, "--dp-size", "2", "--sim-fault", "spec-rank-low:1")
    assert _accept_length(sim.url, 100, rank=0) > 2.0
    assert _accept_length(sim.url, 100, rank=1) < 1.5
    states = httpx.get(f"{sim.url}/server_info", timeout=30).json()["internal_states"]
    assert states[0]["avg_spec_accept_length"] > 2.0 > 1.5 > states[1]["avg_spec_accept_length"]


def test_a_low_rank_beyond_dp_size_is_refused_at_start(sim_factory: SimFactory) -> None:
    sim = sim_factory(*SPEC, "--sim-fault", "spec-rank-low:1", wait="none")
    assert sim.proc is not None and sim.proc.wait(20) != 0
    assert "spec-rank-low:1: no such rank with --dp-size 1 (ranks 0 to 0); add --dp-size 2" in sim.log_text()
