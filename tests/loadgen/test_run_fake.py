"""run_load end to end against the in-thread fake server: shapes, auth, integrity, fail-fast."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from loadgen.loadgen_fake import FakeServer
from pytest_sglang.errors import LoadGenError
from pytest_sglang.loadgen import LoadSpec, run_load

FAST: dict[str, Any] = dict(input_len=8, output_len=6, warmup=0, sample_server_metrics=False)


def test_concurrency_cap_is_respected(fake_server: FakeServer) -> None:
    result = run_load(fake_server.url, LoadSpec(requests=12, concurrency=3, **FAST))
    assert result.completed == 12 and result.failed == 0
    assert fake_server.max_in_flight == 3
    assert result.total_output_tokens == 72 and result.total_input_tokens == 12 * 8
    assert len(result.records) == 12 and all(len(r.itl) == 5 for r in result.records)
    assert result.median_itl_ms > 0 and result.p99_ttft_ms >= result.median_ttft_ms


def test_multi_token_chunks_spread_itl(fake_server: FakeServer) -> None:
    fake_server.behaviour.tokens_per_chunk = 3
    fake_server.behaviour.step_s = 0.02
    result = run_load(fake_server.url, LoadSpec(requests=2, concurrency=2, **{**FAST, "output_len": 7}))
    assert result.completed == 2
    for r in result.records:
        # chunks of 3, 6, 7 tokens: first gives TTFT, then 3 + 1 ITL entries
        assert len(r.itl) == 4
        assert r.itl[0] == pytest.approx(r.itl[1]) == pytest.approx(r.itl[2])


def test_bearer_key_sent_and_401_warmup_fails_fast(fake_server: FakeServer) -> None:
    fake_server.behaviour.require_key = "sk-test-1234"
    ok = run_load(fake_server.url, LoadSpec(requests=2, **FAST), api_key="sk-test-1234")
    assert ok.completed == 2
    assert fake_server.headers[0]["Authorization"] == "Bearer sk-test-1234"
    with pytest.raises(LoadGenError) as info:
        run_load(fake_server.url, LoadSpec(requests=2, **{**FAST, "warmup": 1}), api_key="wrong-key")
    assert str(info.value) == (
        f"warmup request to {fake_server.url} failed: http_401: Unauthorized. "
        "Fix: pass the server's API key (api_key= / --api-key)."
    )


def test_http_errors_counted_by_kind(fake_server: FakeServer) -> None:
    fake_server.behaviour.status = 503
    result = run_load(fake_server.url, LoadSpec(requests=3, **FAST))
    assert result.completed == 0 and result.errors == {"http_503": 3}
    assert result.failure_examples() == ["request 0: http_503: The request queue is full."]


def test_dropped_stream_is_truncated(fake_server: FakeServer) -> None:
    fake_server.behaviour.drop_after = 3
    result = run_load(fake_server.url, LoadSpec(requests=2, **FAST))
    assert result.errors == {"truncated": 2}
    assert result.records[0].output_len == 3


def test_too_many_tokens_with_ignore_eos(fake_server: FakeServer) -> None:
    fake_server.behaviour.extra_tokens = 2
    result = run_load(fake_server.url, LoadSpec(requests=1, **FAST))
    assert result.errors == {"token_count": 1}
    assert result.records[0].error == "got 8 tokens, asked for 6 with ignore_eos"


def test_warmup_flush_and_server_view(fake_server: FakeServer) -> None:
    fake_server.behaviour.step_s = 0.1
    spec = LoadSpec(requests=4, concurrency=4, input_len=8, output_len=8, warmup=2, flush_cache=True)
    result = run_load(fake_server.url, spec)
    assert result.completed == 4
    assert fake_server.flushes == 1
    assert len(fake_server.bodies) == 6  # 2 warmup + 4 timed
    assert fake_server.bodies[0]["sampling_params"]["max_new_tokens"] == 8
    assert result.server_view["peak_num_running_reqs"] >= 1
    assert result.server_view["peak_token_usage"] == 0.25


def test_request_rate_spaces_arrivals(fake_server: FakeServer) -> None:
    result = run_load(fake_server.url, LoadSpec(requests=6, request_rate=20.0, **FAST))
    starts = [r.start for r in result.records]
    assert starts == sorted(starts)
    # 5 gaps of mean 50 ms: the run cannot be shorter than a few of them (seeded, so stable).
    assert starts[-1] > 0.05


def test_processes_merge_on_one_clock(fake_server: FakeServer) -> None:
    result = run_load(fake_server.url, LoadSpec(requests=8, concurrency=4, processes=2, **FAST))
    assert result.completed == 8
    assert sorted(r.index for r in result.records) == list(range(8))
    assert min(r.start for r in result.records) < 0.5  # both processes started at the barrier
    assert result.duration >= max(r.start + r.e2e for r in result.records) - 1e-9


def test_unreachable_url_fails_fast() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(LoadGenError) as info:
        run_load(url, LoadSpec(requests=1, **FAST))
    msg = str(info.value)
    assert msg.startswith(f"cannot reach the SGLang server at {url}: connection refused")
    assert msg.endswith("Fix: check the URL (host, port, http/https) and that the server is running.")


def test_processes_send_back_bounded_records(fake_server: FakeServer) -> None:
    spec = LoadSpec(requests=150, concurrency=4, processes=2, max_records=40, **FAST)
    result = run_load(fake_server.url, spec)
    assert result.completed == 150 and result.total_output_tokens == 150 * 6
    assert len(result.records) <= 40 and result.percentile_sample == len(result.records)
    assert result.median_itl_ms > 0


def test_processes_stop_at_the_load_deadline(fake_server: FakeServer) -> None:
    fake_server.behaviour.stall_after = 1
    spec = LoadSpec(requests=100, concurrency=2, processes=2, load_timeout_s=6.0, **FAST)
    result = run_load(fake_server.url, spec)
    assert result.errors == {"timeout": 2} and result.not_sent == 98
    assert "load_timeout_s=6 s passed" in result.stopped
