"""The smoke load is sized by the server's own figures."""

from __future__ import annotations

from pytest_sglang.smoke.plan import MAX_CONCURRENCY, smoke_shape


def test_a_large_server_gets_the_full_smoke_load() -> None:
    shape = smoke_shape({"max_total_num_tokens": 500_000, "max_running_requests": 256, "context_length": 8192})
    assert (shape.concurrency, shape.requests, shape.input_len, shape.output_len) == (MAX_CONCURRENCY, 32, 256, 32)


def test_a_server_running_two_requests_gets_two_in_flight() -> None:
    shape = smoke_shape({"max_total_num_tokens": 500_000, "max_running_requests": 2, "context_length": 8192})
    assert (shape.concurrency, shape.requests) == (2, 8)


def test_a_short_context_shortens_the_requests_to_fit() -> None:
    shape = smoke_shape({"max_total_num_tokens": 500_000, "max_running_requests": 8, "context_length": 128})
    assert shape.request_tokens < 128
    assert shape.output_len == 16  # an eighth of the context
