"""Inner test file: two load tests on different xdist workers must not overlap."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest


@pytest.mark.parametrize("n", range(2))
def test_load(sglang_load, n):
    start = time.monotonic()
    result = sglang_load(concurrency=1, requests=3, input_len=16, output_len=32, warmup=0)
    end = time.monotonic()
    Path(f"load-{n}.json").write_text(json.dumps({"waited_and_ran_s": end - start,
                                                  "duration": result.duration}))
