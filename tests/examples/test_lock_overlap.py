"""Inner test file: run with ``-n 2 --dist each``, so this test runs on both workers at once.

A barrier makes both workers ask for their load at the same moment (each waits until the other has
arrived), so the run-wide load lock is really contended; ``LOCK_DIR`` is shared by the two workers.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest_sglang.loadgen  # noqa: F401  (imported before the barrier: the calls then time the loads)


def _barrier(shared: Path, me: str, deadline_s: float = 60.0) -> None:
    (shared / f"arrived-{me}").write_text("")
    deadline = time.monotonic() + deadline_s
    while len(list(shared.glob("arrived-*"))) < 2:
        assert time.monotonic() < deadline, "the other xdist worker never reached the barrier"
        time.sleep(0.01)


def test_load(sglang_load):
    shared = Path(os.environ["LOCK_DIR"])
    me = os.environ["PYTEST_XDIST_WORKER"]
    _barrier(shared, me)
    called = time.perf_counter()
    result = sglang_load(concurrency=1, requests=3, input_len=16, output_len=32, warmup=0)
    returned = time.perf_counter()
    (shared / f"load-{me}.json").write_text(json.dumps({"called": called, "returned": returned,
                                                        "duration": result.duration}))
