"""A cancellation storm against real SGLang 0.5.23 on CPU (issue 33 item 4).

Half the requests' clients close their stream after 4 tokens. 0.5.23 aborts a request whose client went
away and frees its slot and its KV: ``sglang:num_running_reqs`` and ``sglang:kv_used_tokens`` in
``/metrics`` come back to their idle values within ``max_drain_s``.
"""

from __future__ import annotations

import pytest
from realsgl import RawServer

from pytest_sglang.gates.load import drain
from pytest_sglang.gates.load.throughput import evaluate_throughput
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.server.start import attach

pytestmark = pytest.mark.real_sglang


def test_cancelled_requests_give_back_their_slots_and_kv(raw_server: RawServer, real_api_key: str) -> None:
    server = attach(raw_server.url, api_key=real_api_key)
    storm = drain.Storm.before(server, max_drain_s=60.0)
    assert all(not g.why for g in storm.idle.values()), storm.idle  # the gauges are there (--enable-metrics)
    spec = LoadSpec(requests=8, concurrency=4, input_len=128, output_len=64, cancel_rate=0.5, cancel_after_tokens=4)
    result = run_load(raw_server.url, spec, api_key=real_api_key)
    assert (result.cancelled, result.failed, result.completed) == (4, 0, 4), result.failure_examples()
    outcome = evaluate_throughput(result)
    storm.judge("throughput", result, outcome)
    assert outcome.passed, outcome.message()
    print(outcome.message())
