"""Inner tests run against the simulator through the real plugin (markers record everything)."""

import pytest


@pytest.mark.sglang_capacity(min_total_tokens=1)
def test_capacity(sglang_server):
    pass


@pytest.mark.sglang_throughput(min_output_tok_s=1, concurrency=4, requests=16, input_len=32, output_len=16)
def test_throughput():
    pass
