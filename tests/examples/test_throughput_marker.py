"""Inner test file: a throughput gate measured in setup, judged after the body, readable in the body."""

from __future__ import annotations

import pytest


@pytest.mark.sglang_throughput(min_output_tok_s=1, concurrency=2, requests=4, input_len=16, output_len=8)
def test_throughput_met(sglang_gate):
    assert sglang_gate.load.completed == 4
    assert sglang_gate["throughput"].passed


# Valid keywords (checked at collection), but the live check's load shape is beyond what the load
# generator can open at once: a measurement that cannot be made is an ERROR in setup.
@pytest.mark.sglang_capacity(min_concurrent_requests=100_000, avg_request_tokens=64, verify_live=True)
def test_cannot_measure():
    pass
