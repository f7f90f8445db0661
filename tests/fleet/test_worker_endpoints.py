"""The worker endpoints SGLang's gateways call, answered by the simulator as real SGLang 0.5.23 does.

What the gateways call (seen through a logging proxy, fixtures/gateway/README.md): smg 1.13.0
registers a worker with GET /health, /v1/models, /server_info, /model_info, then polls
GET /loads?model=M (404 on 0.5.23) and GET /v1/loads?include=core,disagg,queues,memory every 10 s;
sglang-router 0.3.2 registers with GET /health, /server_info, /model_info and asks GET /get_load
(404 on 0.5.23). Both health-check GET /health, read /metrics for /engine_metrics and
POST /flush_cache without a body. The recorded answers of real 0.5.23 are the reference here;
tests/real/test_simulator_parity.py checks the same against a live real server.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fleet_helpers import load_fixture

#: The launch the recording was made with (real SGLang on CPU, tiny Llama, 4096 KV tokens).
SIM_ARGS = ("--device", "cpu", "--max-total-tokens", "4096", "--enable-metrics")
RECORDED = load_fixture("worker-endpoints-sglang-0.5.23")["responses"]


def _type(value: Any) -> str:
    return {bool: "bool", int: "number", float: "number", str: "str", list: "list", dict: "dict",
            type(None): "null"}[type(value)]


def shape(value: Any, where: str = "$") -> dict[str, str]:
    """JSON path -> type name of every value (lists: their first item)."""
    out = {where: _type(value)}
    if isinstance(value, dict):
        for key, item in value.items():
            out.update(shape(item, f"{where}.{key}"))
    elif isinstance(value, list) and value:
        out.update(shape(value[0], f"{where}[0]"))
    return out


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from pytest_sglang.simulator import Simulator

    log = tmp_path_factory.mktemp("worker") / "sim.log"
    with Simulator(["--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05",
                    *SIM_ARGS], log_path=log) as sim:
        # a generation first: real's recording followed its warm-up, so its decode history was not empty
        httpx.post(f"{sim.url}/generate", json={"text": "Hi", "sampling_params": {"max_new_tokens": 3}},
                   timeout=30, trust_env=False).raise_for_status()
        yield sim


@pytest.mark.parametrize("request_line", sorted(RECORDED))
def test_simulator_answers_like_recorded_real(worker: Any, request_line: str) -> None:
    method, path = request_line.split(" ", 1)
    real = RECORDED[request_line]
    response = httpx.request(method, f"{worker.url}{path}", timeout=30, trust_env=False)
    assert response.status_code == real["status"], response.text
    assert response.headers.get("content-type") == real["content-type"]
    if isinstance(real["body"], str):
        assert response.text == real["body"]
    elif real["body"] is not None:
        ours, theirs = shape(response.json()), shape(real["body"])
        assert ours == theirs, {k: (theirs.get(k), ours.get(k)) for k in ours.keys() | theirs.keys()
                                if ours.get(k) != theirs.get(k)}


def _loads(worker: Any, query: str) -> httpx.Response:
    return httpx.get(f"{worker.url}/v1/loads{query}", timeout=30, trust_env=False)


def test_loads_sections_follow_include(worker: Any) -> None:
    polled = _loads(worker, "?include=core,disagg,queues,memory").json()["loads"][0]  # smg 1.13's poll
    assert {"memory", "disaggregation", "queues"} <= polled.keys()
    assert polled["memory"]["token_capacity"] == 4096
    assert polled["disaggregation"]["mode"] == "null"
    assert "memory" not in _loads(worker, "?include=queues").json()["loads"][0]
    assert "queues" not in _loads(worker, "?include=core").json()["loads"][0]
    assert "queues" in _loads(worker, "?include=all,bogus").json()["loads"][0]  # "all" skips the check


def test_loads_counters_move_with_work(worker: Any) -> None:
    before = _loads(worker, "").json()["loads"][0]
    httpx.post(f"{worker.url}/generate", json={"text": "count these tokens", "sampling_params": {
        "max_new_tokens": 4, "ignore_eos": True}}, timeout=30, trust_env=False).raise_for_status()
    after = _loads(worker, "").json()["loads"][0]
    assert after["total_prefill_uncached_tokens"] > before["total_prefill_uncached_tokens"]
    assert after["total_prefill_busy_us"] > before["total_prefill_busy_us"]
    assert after["decode_moments"][0] >= before["decode_moments"][0] + 3  # 4 tokens: 1 from prefill, 3 steps
    assert after["timestamp"] >= before["timestamp"]


def test_loads_dp_rank_filter_and_validation(worker: Any) -> None:
    assert [x["dp_rank"] for x in _loads(worker, "?dp_rank=0").json()["loads"]] == [0]
    assert _loads(worker, "?dp_rank=3").json()["loads"] == []
    assert _loads(worker, "?dp_rank=0&dp_rank=3").json()["loads"] == []  # the last value wins, as in FastAPI
    bad = _loads(worker, "?dp_rank=abc")
    assert bad.status_code == 400
    assert "'loc': ('query', 'dp_rank')" in bad.json()["message"]


def test_loads_prometheus_format(worker: Any) -> None:
    response = _loads(worker, "?format=prometheus&include=core,memory")
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    families = [line.split()[2] for line in response.text.splitlines() if line.startswith("# TYPE ")]
    assert families[0] == "sglang_timestamp"
    assert {"sglang_max_total_num_tokens", "sglang_memory_token_capacity"} <= set(families)
    assert not any(f.startswith(("sglang_queues_", "sglang_disagg_", "sglang_decode_moments")) for f in families)
    assert 'sglang_max_total_num_tokens{dp_rank="0"} 4096' in response.text.splitlines()
