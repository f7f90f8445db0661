"""Throughput and SLO gates: floors pass and fail where they should, with a message that explains."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.load.slo import run_marker as slo_marker
from pytest_sglang.gates.load.throughput import assert_throughput, evaluate_throughput, median_result
from pytest_sglang.gates.load.throughput import run_marker as throughput_marker
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.loadgen.measure.record import RequestRecord


def result(
    out_tok_s: float = 1000.0,
    p99_ttft: float = 50.0,
    failed: int = 0,
    spec: LoadSpec | None = None,
    **extra: Any,
) -> LoadResult:
    records = [
        RequestRecord(index=0, error_kind="truncated", error="stream ended without [DONE] after 3 tokens")
    ] * failed
    return LoadResult(
        spec=spec or LoadSpec(requests=10, concurrency=4),
        url="http://sim:1",
        completed=10,
        failed=failed,
        output_throughput=out_tok_s,
        p99_ttft_ms=p99_ttft,
        duration=2.0,
        errors={"truncated": failed} if failed else {},
        records=records,
        **extra,
    )


def test_floors_pass_and_fail_with_measured_vs_floor() -> None:
    ok = evaluate_throughput(result(), min_output_tok_s=900, max_ttft_ms_p99=60)
    assert ok.passed and [c.metric for c in ok.checks] == ["output_throughput", "p99_ttft_ms", "error_rate"]
    bad = evaluate_throughput(result(out_tok_s=850.0), min_output_tok_s=900, max_ttft_ms_p99=60)
    assert not bad.passed
    msg = bad.message()
    assert (
        msg.splitlines()[0]
        == "sglang throughput gate failed: min_output_tok_s=900: measured 850.0 tok/s (output_throughput)"
    )
    assert (
        "load: 10 requests, concurrency=4, input_len=1024, output_len=128, api=native, dataset=random-ids"
        in msg
    )
    assert "integrity: 10/10 completed; failed by kind: none" in msg
    assert "server view (/metrics peaks): unavailable (start SGLang with --enable-metrics)" in msg
    assert "Fix: raise server capacity" in msg


def test_error_rate_default_zero_fails_on_any_integrity_failure() -> None:
    outcome = evaluate_throughput(result(failed=2))
    assert not outcome.passed
    msg = outcome.message()
    assert "max_error_rate=0.0: error_rate measured 0.1667, required <= 0" in msg
    assert "failures: request 0: truncated: stream ended without [DONE] after 3 tokens" in msg
    assert evaluate_throughput(result(failed=2), max_error_rate=0.2).passed


def test_no_completed_request_never_passes_a_latency_ceiling() -> None:
    r = LoadResult(spec=LoadSpec(), completed=0, failed=3, errors={"http_503": 3})
    outcome = evaluate_throughput(r, max_ttft_ms_p99=100, max_error_rate=1.0)
    assert [c.passed for c in outcome.checks] == [False, True]


def test_server_view_shown() -> None:
    r = result(
        server_view={
            "peak_num_running_reqs": 8.0,
            "peak_num_queue_reqs": 3.0,
            "peak_token_usage": 0.5,
            "samples": 4.0,
        }
    )
    assert (
        "server view (/metrics peaks): running 8, queued 3, token_usage 0.50 (4 samples)"
        in evaluate_throughput(r).message()
    )


def test_assert_throughput_raises_same_message() -> None:
    r = result(out_tok_s=10.0)
    with pytest.raises(AssertionError) as info:
        assert_throughput(r, min_output_tok_s=20)
    assert str(info.value) == evaluate_throughput(r, min_output_tok_s=20).message()


def test_median_of_repeats() -> None:
    merged = median_result([result(out_tok_s=v) for v in (100.0, 300.0, 200.0)])
    assert merged.output_throughput == 200.0 and merged.completed == 30


class FakeCtx(GateContext):
    """A server whose p99 TTFT grows with concurrency: 10 ms per concurrent request."""

    def __init__(self, ms_per_request: float = 10.0) -> None:
        super().__init__(server=None, load=self._load)
        self.ms = ms_per_request
        self.specs: list[LoadSpec] = []

    def _load(self, spec: LoadSpec) -> LoadResult:
        self.specs.append(spec)
        c = spec.concurrency or 1
        return LoadResult(
            spec=spec, completed=spec.requests, p99_ttft_ms=self.ms * c, output_throughput=100.0 * c
        )


def test_throughput_marker_builds_spec_and_repeats() -> None:
    ctx = FakeCtx()
    outcome = throughput_marker(
        ctx, min_output_tok_s=500, concurrency=8, requests=16, input_len=64, output_len=8, repeats=3
    )
    assert outcome.passed and len(ctx.specs) == 3
    assert ctx.specs[0] == LoadSpec(requests=16, concurrency=8, input_len=64, output_len=8)
    # other prompts per repeat (a cold cache each time), the same shape
    assert [s.seed for s in ctx.specs] == [42, 43, 44]
    assert {dataclasses.replace(s, seed=0) for s in ctx.specs} == {dataclasses.replace(ctx.specs[0], seed=0)}
    assert outcome.context["repeats"] == "median of 3 runs; output tok/s per run: 800.0, 800.0, 800.0"
    with pytest.raises(ConfigError, match=r"sglang_throughput\(repeats=...\)=0: must be a whole number >= 1"):
        throughput_marker(ctx, repeats=0)


def test_slo_search_finds_the_knee_and_reports_the_curve() -> None:
    ctx = FakeCtx()  # SLO 200 ms holds up to concurrency 20
    outcome = slo_marker(ctx, max_ttft_ms_p99=200, min_concurrency=4, max_requests=10_000)
    assert outcome.passed
    best = outcome.checks[0].measured
    assert isinstance(best, int) and 18 <= best <= 20  # bisection stops within ~12%
    curve = outcome.context["curve"]
    assert curve["4"]["slo_met"] and curve["32"]["slo_met"] is False
    assert curve["16"]["p99_ttft_ms"] == 160.0
    assert any(
        n.startswith("concurrency 32: SLO broken: p99_ttft_ms 320.0 (limit <= 200)") for n in outcome.notes
    )


def test_slo_below_min_concurrency_fails() -> None:
    ctx = FakeCtx(ms_per_request=100.0)  # holds up to 2
    outcome = slo_marker(ctx, max_ttft_ms_p99=250, min_concurrency=8)
    assert not outcome.passed
    assert outcome.checks[0].measured == 2
    assert outcome.message().splitlines()[0] == (
        "sglang slo gate failed: min_concurrency=8: measured 2 concurrent requests (max_concurrency_meeting_slo)"
    )


def test_slo_budget_bounds_the_search() -> None:
    ctx = FakeCtx(ms_per_request=0.001)
    outcome = slo_marker(ctx, max_ttft_ms_p99=200, min_concurrency=1, max_requests=100)
    assert sum(s.requests for s in ctx.specs) <= 100
    assert "stopped: request budget of 100 used" in outcome.context["search"]


def test_slo_needs_a_ceiling() -> None:
    with pytest.raises(ConfigError) as info:
        slo_marker(FakeCtx(), min_concurrency=1)
    assert str(info.value) == (
        "sglang_slo='no ceiling': needs at least one latency ceiling. Fix: give "
        "max_ttft_ms_p99=, max_itl_ms_p99=, max_tpot_ms_median= or max_e2e_ms_p99="
    )


def test_integrity_failures_lead_without_capacity_advice() -> None:
    outcome = evaluate_throughput(result(out_tok_s=10.0, failed=2), min_output_tok_s=900)
    assert [c.metric for c in outcome.checks] == ["error_rate", "output_throughput"]
    msg = outcome.message()
    assert msg.splitlines()[0] == (
        "sglang throughput gate failed: max_error_rate=0.0: measured 0.1667 (error_rate); "
        "min_output_tok_s=900: measured 10 tok/s (output_throughput)"
    )
    assert msg.splitlines()[-1] == "Fix: read the failed requests' reasons above (integrity is always checked)"


def test_protocol_breaks_get_their_own_remedy() -> None:
    r = result(failed=1)
    r.errors = {"token_mismatch": 1}
    assert evaluate_throughput(r).message().splitlines()[-1] == (
        "Fix: the server's stream broke its own protocol (see the failures above): check the server version, "
        "or a proxy between it and the client"
    )


def test_slo_levels_carry_the_timeouts_and_the_budget_is_their_deadline() -> None:
    ctx = FakeCtx()
    slo_marker(ctx, max_ttft_ms_p99=200, min_concurrency=4, request_timeout_s=5, time_budget_s=30, max_requests=10_000)
    assert ctx.specs and all(s.request_timeout_s == 5 for s in ctx.specs)
    assert all(s.load_timeout_s is not None and 0 < s.load_timeout_s <= 30 for s in ctx.specs)


def test_slo_level_cut_by_the_budget_is_not_judged() -> None:
    class Slow(FakeCtx):
        def _load(self, spec: LoadSpec) -> LoadResult:
            time.sleep(spec.load_timeout_s or 0)  # the load runs into its deadline
            return LoadResult(spec=spec, completed=1, failed=1, errors={"timeout": 1}, not_sent=spec.requests - 2)

    outcome = slo_marker(Slow(), max_ttft_ms_p99=200, min_concurrency=4, time_budget_s=0.2)
    assert outcome.context["curve"] == {}
    assert outcome.context["search"].endswith("stopped: time budget of 0.2 s ran out during concurrency 4")
    assert outcome.checks[0].measured == 0
