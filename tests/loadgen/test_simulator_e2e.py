"""End to end against the simulator (a real subprocess) with a known speed model.

Speed model (real seconds, after ``--sim-time-scale 0.05``): decode step 200 ms x 0.05 = 10 ms at
any batch size (per-request cost 0), so ITL ~ 10 ms and, at concurrency C, the server emits about
C tokens per 10 ms. Tolerances are wide because CI shares 2 cores between the server, the client
and other tests: ITL median in [9, 16] ms; throughput in [0.5, 1.1] x the model's figure.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadgen.sim_model import MODEL, SHAPE, STEP_S
from pytest_sglang.gates.load.slo import run_marker as slo_marker
from pytest_sglang.gates.load.throughput import evaluate_throughput
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen import LoadSpec, run_load


def model_output_tok_s(concurrency: int) -> float:
    return concurrency / STEP_S  # one token per running request per decode step


def test_metrics_match_the_speed_model(sim_url: str) -> None:
    result = run_load(sim_url, LoadSpec(**SHAPE))
    assert result.completed == 16 and result.errors == {}
    assert result.total_output_tokens == 16 * 32 and result.total_input_tokens == 16 * 64
    assert 0.9 * STEP_S * 1000 <= result.median_itl_ms <= 1.6 * STEP_S * 1000
    assert 0.9 * STEP_S * 1000 <= result.median_tpot_ms <= 1.6 * STEP_S * 1000
    assert 0.5 * model_output_tok_s(8) <= result.output_throughput <= 1.1 * model_output_tok_s(8)
    # e2e ~ TTFT + 31 steps; concurrency (sum e2e / duration) close to the cap
    assert result.median_e2e_latency_ms >= 31 * STEP_S * 1000
    assert 5.0 <= result.concurrency <= 8.0
    assert result.server_view["peak_num_running_reqs"] >= 1


def test_floors_pass_and_fail_where_they_should(sim_url: str) -> None:
    result = run_load(sim_url, LoadSpec(**SHAPE))
    model = model_output_tok_s(8)
    assert evaluate_throughput(result, min_output_tok_s=0.4 * model, max_itl_ms_p99=200).passed
    failing = evaluate_throughput(result, min_output_tok_s=3 * model)
    assert not failing.passed
    assert failing.message().startswith("sglang throughput gate failed: min_output_tok_s=")
    assert "server view (/metrics peaks): running " in failing.message()


def test_drop_stream_fault_fails_gate_as_truncated(sim_factory: Any) -> None:
    sim = sim_factory(*MODEL, "--sim-fault", "drop-stream-after:5")
    result = run_load(sim.url, LoadSpec(**SHAPE))
    assert result.completed == 0 and result.errors == {"truncated": 16}
    outcome = evaluate_throughput(result, min_output_tok_s=1)
    assert not outcome.passed
    msg = outcome.message()
    assert "integrity: 0/16 completed; failed by kind: {'truncated': 16}" in msg
    assert "failures: request 0: truncated: " in msg


def test_error_rate_fault_fails_gate_with_http_500(sim_factory: Any) -> None:
    sim = sim_factory(*MODEL, "--sim-fault", "error-rate:0.5")
    result = run_load(sim.url, LoadSpec(**{**SHAPE, "warmup": 0}))
    assert set(result.errors) == {"http_500"} and 0 < result.failed < 16
    outcome = evaluate_throughput(result)
    assert not outcome.passed
    assert outcome.failed[0].metric == "error_rate"
    assert (
        "http_500: Internal server error: simulated failure (--sim-fault error-rate:0.5)" in outcome.message()
    )


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_openai_apis_use_server_counts(sim_url: str, api: str) -> None:
    result = run_load(sim_url, LoadSpec(**{**SHAPE, "requests": 4, "api": api}))
    assert result.completed == 4, result.failure_examples()
    assert result.total_output_tokens == 4 * 32
    assert result.median_ttft_ms > 0 and result.median_itl_ms > 0


def test_slo_search_finds_the_running_request_cap(sim_factory: Any) -> None:
    # Speed model: at most 4 running requests. Up to concurrency 4 the TTFT is a prefill step; above
    # it a request queues behind a whole running request (24 tokens x 10 ms = 240 ms). A 120 ms p99
    # TTFT ceiling therefore holds up to exactly 4 concurrent requests and breaks beyond.
    sim = sim_factory(*MODEL, "--max-running-requests", "4")
    ctx = GateContext(server=None, load=lambda spec: run_load(sim.url, spec.replace(warmup=1)))
    outcome = slo_marker(ctx, max_ttft_ms_p99=120, min_concurrency=2, input_len=32, output_len=24)
    assert outcome.passed, outcome.message()
    (check,) = outcome.checks
    assert check.measured == 4
    curve = outcome.context["curve"]
    assert curve["4"]["slo_met"] and not curve["5"]["slo_met"] and not curve["8"]["slo_met"]
    assert curve["8"]["p99_ttft_ms"] >= 200  # queued behind a whole request
    failing = slo_marker(ctx, max_ttft_ms_p99=120, min_concurrency=8, input_len=32, output_len=24)
    assert not failing.passed
    assert failing.message().startswith(
        "sglang slo gate failed: min_concurrency=8: measured 4 concurrent requests (max_concurrency_meeting_slo)"
    )


def test_two_processes_merge_on_one_clock(sim_url: str) -> None:
    result = run_load(sim_url, LoadSpec(**{**SHAPE, "processes": 2}))
    assert result.completed == 16 and result.errors == {}, result.failure_examples()
    assert result.total_output_tokens == 16 * 32
    assert len({r.index for r in result.records}) == 16
    assert 0.9 * STEP_S * 1000 <= result.median_itl_ms <= 1.6 * STEP_S * 1000
    assert 0.5 * model_output_tok_s(8) <= result.output_throughput <= 1.1 * model_output_tok_s(8)
    # Both processes' records share one timeline: run-relative start and wall-clock start differ
    # by the same offset in every record (within scheduling noise), and the first requests of both
    # shards started together at the barrier.
    offsets = [r.start_time - r.start for r in result.records]
    assert max(offsets) - min(offsets) < 0.05
    starts = sorted(r.start for r in result.records)
    assert starts[1] < 0.5
