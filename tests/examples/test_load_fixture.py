"""Inner test file: sglang_load runs a small load and records it."""

from __future__ import annotations


def test_small_load(sglang_load):
    result = sglang_load(concurrency=2, requests=4, input_len=16, output_len=8, warmup=0)
    assert result.completed == 4
    assert result.output_throughput > 0
