"""Inner test file: sglang_ab launches A and B in turn, one small load per launch."""

from __future__ import annotations

import os


def test_ab(sglang_ab):
    limits = os.environ.get("AB_MAX_REGRESSION")
    outcome = sglang_ab(requests=8, concurrency=4, input_len=16, output_len=16, warmup=0,
                        max_regression=limits or None)
    print("AB-OUTCOME", outcome)
