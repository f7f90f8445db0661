"""The steady-state window (``LoadSpec.steady_state``): what it leaves out, said; bench_serving's figures unchanged."""

from __future__ import annotations

import pytest

from loadgen.sim_model import SHAPE
from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.load.throughput import evaluate_throughput
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.loadgen.measure.collect import Collector
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.measure.steady import steady_metrics
from pytest_sglang.loadgen.run.result import LoadResult
from pytest_sglang.report import terminal


def waves() -> list[RequestRecord]:
    """Concurrency 2: requests 0 and 1 at 0 s (the ramp-up), 2 and 3 at 1 s, 4 at 2 s (then the drain)."""
    return [RequestRecord(index=i, start=s, ttft=0.2 if s else 0.5, itl=[0.2] * 3, e2e=0.8 + 0.2 * (i % 2),
                          output_len=4, prompt_len=8)
            for i, s in enumerate((0.0, 0.0, 1.0, 1.0, 2.0))]


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_steady_state_must_be_a_boolean(bad: object) -> None:
    with pytest.raises(ConfigError) as err:
        LoadSpec(steady_state=bad)  # type: ignore[arg-type]
    text = str(err.value)
    assert "LoadSpec.steady_state" in text and repr(bad) in text and "steady_state=True" in text


def test_window_runs_from_the_first_completion_to_the_last_send() -> None:
    win, figures = steady_metrics(waves(), 3.0)
    assert win.start == pytest.approx(0.8) and win.end == 2.0
    assert (win.requests, win.kept_requests) == (5, 3)
    assert figures["completed"] == 3
    assert figures["p99_ttft_ms"] == pytest.approx(200.0)  # the ramp-up's 500 ms TTFTs are left out
    assert figures["output_throughput"] == pytest.approx(win.kept_tokens / 1.2)


def test_result_keeps_bench_serving_figures_and_says_what_was_left_out() -> None:
    plain = LoadResult.from_records(LoadSpec(requests=5, concurrency=2), waves(), 3.0)
    steady = LoadResult.from_records(LoadSpec(requests=5, concurrency=2, steady_state=True), waves(), 3.0)
    assert plain.steady_state == {} and "steady_state" in plain.to_dict()
    assert steady.metrics() == plain.metrics()  # the whole-run figures are bench_serving's either way
    report = steady.to_dict()["steady_state"]
    assert report["metrics"]["p99_ttft_ms"] == pytest.approx(200.0)
    assert report["window"]["kept_requests"] == 3
    line = next(x for x in steady.workload_lines() if x.startswith("steady state: "))
    assert "left out 0.80 s of ramp-up and 1.00 s of drain, 2 of 5 requests" in line
    assert "inside it: output" in line
    assert LoadResult.from_dict(steady.to_dict()).steady_state == report


def test_a_load_sent_at_once_has_no_steady_state_and_says_so() -> None:
    burst = [RequestRecord(index=i, start=0.0, ttft=0.2, itl=[0.1], e2e=0.3, output_len=2) for i in range(4)]
    result = LoadResult.from_records(LoadSpec(requests=4, steady_state=True), burst, 0.3)
    assert result.steady_state["metrics"] == {}
    assert "no steady state: every request was sent before the first one completed" in " ".join(
        result.workload_lines())


def test_a_sampled_load_scales_its_window_throughput_and_says_so() -> None:
    collector = Collector(cap=3, seed=1)
    many = [RequestRecord(index=i, start=i * 0.1, ttft=0.05, itl=[0.05], e2e=0.3, output_len=2) for i in range(40)]
    for rec in many:
        collector.add(rec)
    result = LoadResult.from_collector(LoadSpec(requests=40, concurrency=3, steady_state=True), collector, 4.2)
    assert collector.sampled
    assert "from a uniform sample of 3 of 40 requests" in result.steady_state["left_out"]


def test_a_real_load_reports_its_window(sim_url: str) -> None:
    result = run_load(sim_url, LoadSpec(**{**SHAPE, "requests": 24}, steady_state=True))
    assert result.completed == 24
    report = result.steady_state
    assert 0 < report["window"]["start"] < report["window"]["end"] <= result.duration
    assert report["window"]["kept_requests"] < 24
    assert report["metrics"]["output_throughput"] > 0
    assert "left out" in report["left_out"]


def test_the_throughput_gate_says_what_the_window_left_out() -> None:
    result = LoadResult.from_records(LoadSpec(requests=5, concurrency=2, steady_state=True), waves(), 3.0)
    outcome = evaluate_throughput(result, min_output_tok_s=1e9)
    assert "left out 0.80 s of ramp-up" in outcome.context["steady state"]
    assert "steady state: " in outcome.message()


def test_the_terminal_summary_says_what_the_window_left_out() -> None:
    load = LoadResult.from_records(LoadSpec(requests=5, concurrency=2, steady_state=True), waves(), 3.0).to_dict()
    lines = " ".join(terminal._workload_lines([load]))
    assert "steady state: steady-state window" in lines and "left out" in lines
