"""Inner test file: a throughput gate on a server that fails requests."""

from __future__ import annotations

import pytest


@pytest.mark.sglang_throughput(min_output_tok_s=1, concurrency=2, requests=6, input_len=16, output_len=8)
def test_throughput_with_failures():
    pass
