"""Every wait of a load has a deadline: per request (``request_timeout_s``) and per load (``load_timeout_s``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from loadgen.loadgen_fake import FakeServer
from pytest_sglang.gates.load.throughput import run_marker as throughput_marker
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen import LoadSpec, run_load

FAST: dict[str, Any] = dict(input_len=8, output_len=8, sample_server_metrics=False)


def test_a_stalled_stream_is_cut_at_the_request_timeout(fake_server: FakeServer) -> None:
    fake_server.behaviour.stall_after = 3  # three tokens, then silence with the stream open
    started = time.monotonic()
    result = run_load(fake_server.url, LoadSpec(requests=4, concurrency=2, request_timeout_s=0.5, **FAST))
    elapsed = time.monotonic() - started
    # warmup (one wave) + two waves of 0.5 s, instead of 600 s each
    assert elapsed < 1.5 + 3.0, elapsed
    assert result.errors == {"timeout": 4} and result.completed == 0
    assert result.failure_examples() == [
        "request 0: timeout: no complete answer within request_timeout_s=0.5 s (3 chunks received)"
    ]
    assert result.warmup_errors == ["timeout: no complete answer within request_timeout_s=0.5 s (3 chunks received)"]


def test_the_throughput_gate_fails_with_the_timeout_kind_and_its_limit(fake_server: FakeServer) -> None:
    fake_server.behaviour.stall_after = 2
    ctx = GateContext(server=None, load=lambda spec: run_load(fake_server.url, spec))
    started = time.monotonic()
    outcome = throughput_marker(ctx, min_output_tok_s=1, requests=4, concurrency=4, input_len=8, output_len=8,
                                request_timeout_s=0.5)
    assert time.monotonic() - started < 1.0 + 3.0
    assert not outcome.passed
    lines = outcome.message().splitlines()
    # Led by the timeouts (with the limit), not by the throughput floor and its capacity advice.
    assert lines[0].startswith("sglang throughput gate failed: max_error_rate=0.0: measured 1 (timeout_rate); ")
    assert any(line.startswith("  max_error_rate=0.0: timeout_rate measured 1, required <= 0 "
                               "[request_timeout_s=0.5 s per request, load_timeout_s=") for line in lines)
    assert lines[-1].startswith("Fix: the server stalled or answers slower than the limits")
    assert "raise server capacity" not in outcome.message()
    assert [c.metric for c in outcome.checks] == ["timeout_rate", "error_rate", "output_throughput"]


def test_the_load_deadline_stops_a_stalled_load(fake_server: FakeServer) -> None:
    fake_server.behaviour.stall_after = 1
    started = time.monotonic()
    result = run_load(fake_server.url, LoadSpec(requests=1000, concurrency=3, warmup=0, request_timeout_s=600,
                                                load_timeout_s=1.0, **FAST))
    assert time.monotonic() - started < 1.0 + 3.0
    assert result.errors == {"timeout": 3} and result.not_sent == 997 and result.total == 1000
    assert result.stopped == "the load's deadline load_timeout_s=1 s passed: 3 requests sent, 997 not sent"
    assert result.failure_examples() == [
        "request 0: timeout: cancelled in flight: the load's deadline load_timeout_s=1 s passed (timed run)"
    ]
    data = result.to_dict()
    assert data["not_sent"] == 997 and data["stopped"] == result.stopped


def test_the_deadline_covers_the_warmup_too(fake_server: FakeServer) -> None:
    fake_server.behaviour.stall_after = 1
    started = time.monotonic()
    result = run_load(fake_server.url, LoadSpec(requests=5, concurrency=1, warmup=2, load_timeout_s=0.5, **FAST))
    assert time.monotonic() - started < 0.5 + 3.0
    assert result.not_sent == 5 and result.completed == result.failed == 0
    assert result.warmup_errors[0].startswith("timeout: cancelled in flight: the load's deadline")


def test_derived_defaults_scale_with_the_workload() -> None:
    small = LoadSpec(requests=4, concurrency=2, input_len=16, output_len=8)
    assert small.request_timeout() == pytest.approx(60 + 16 / 1000 + 8 / 10)
    # one warmup wave (output capped at 32 tokens) + 2 waves of requests + set-up allowance
    assert small.load_timeout() == pytest.approx(120 + small.request_timeout() * 3)
    big = LoadSpec(requests=256, input_len=1024, output_len=256, warmup=0)  # all at once: 4 batches queue
    assert big.request_timeout() == pytest.approx(60 + (1.024 + 25.6) * 256 / 64)
    rate = LoadSpec(requests=100, request_rate=10.0, warmup=0)
    assert rate.load_timeout() == pytest.approx(120 + 2 * 100 / 10 + rate.request_timeout())
    assert LoadSpec(request_timeout_s=3, load_timeout_s=7).request_timeout() == 3.0
    assert LoadSpec(request_timeout_s=3, load_timeout_s=7).load_timeout() == 7.0


def test_options_are_defaults_only_for_unset_timeouts() -> None:
    spec = LoadSpec(request_timeout_s=5.0)
    assert spec.with_timeouts(9.0, 99.0) == spec.replace(load_timeout_s=99.0)
    assert spec.with_timeouts(None, None) is spec


def test_old_timeout_s_name_still_works_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"LoadSpec\(timeout_s=...\) is deprecated"):
        spec = LoadSpec(timeout_s=12.0)  # type: ignore[call-arg]
    assert spec.request_timeout_s == 12.0
    assert LoadSpec.from_dict({"timeout_s": 30.0}).request_timeout_s == 30.0  # reports written before


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), True, "5"])
def test_bad_timeouts_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match=r"LoadSpec\.request_timeout_s=.*: must be a finite number of seconds > 0"):
        LoadSpec(request_timeout_s=value)  # type: ignore[arg-type]


def test_options_reach_the_gate_through_the_plugin(pytester: pytest.Pytester) -> None:
    # A working server and a limit no request can meet: every request (warmup included) times out.
    pytester.makepyfile(test_inner="""
        import pytest

        @pytest.mark.sglang_throughput(min_output_tok_s=1, concurrency=2, requests=4, input_len=16, output_len=8)
        def test_gate():
            pass
    """)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-request-timeout", "0.001")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*sglang throughput gate failed: max_error_rate=0.0: measured 1 (timeout_rate)*",
        "*timeout_rate measured 1, required <= 0 [[]request_timeout_s=0.001 s per request*",
    ])
