"""Details where real SGLang 0.5.23 (the referee, tests/real/test_simulator_parity.py) disagreed."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_sglang.simulator import Simulator
from tests.conftest import SimFactory

#: The launch of tests/real/realsgl.py (a CPU server), with a context length of our own.
CPU = (
    "--device", "cpu", "--disable-cuda-graph", "--max-total-tokens", "4096", "--enable-metrics",
    "--context-length", "1024",
)  # fmt: skip


@pytest.fixture(scope="module")
def cpu_sim(tmp_path_factory: pytest.TempPathFactory) -> Any:
    log = tmp_path_factory.mktemp("fidelity") / "sim.log"
    argv = ["--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05", *CPU]
    with Simulator(argv, log_path=log) as sim:
        yield sim


def _events(body: bytes) -> list[Any]:
    blocks = [b for b in body.decode().split("\n\n") if b]
    assert all(b.startswith("data: ") for b in blocks), blocks
    return [b[6:] if b == "data: [DONE]" else json.loads(b[6:]) for b in blocks]


def test_generate_rejects_negative_max_new_tokens(cpu_sim: Simulator) -> None:
    r = httpx.post(f"{cpu_sim.url}/generate", json={"text": "Hi", "sampling_params": {"max_new_tokens": -1}})
    assert r.status_code == 400
    assert r.json() == {"error": {"message": "max_new_tokens must be at least 0, got -1."}}
    r = httpx.post(f"{cpu_sim.url}/generate", json={"text": "Hi", "sampling_params": {"max_new_tokens": "x"}})
    assert r.status_code == 400 and "max_new_tokens must be an integer, got 'x'" in r.text
    zero = httpx.post(f"{cpu_sim.url}/generate", json={"text": "Hi", "sampling_params": {"max_new_tokens": 0}})
    assert zero.status_code == 200
    body = zero.json()
    assert (body["text"], body["output_ids"]) == ("", [])
    assert body["meta_info"]["finish_reason"] == {"type": "length", "length": 0}
    assert body["meta_info"]["completion_tokens"] == 0 and "decode_throughput" not in body["meta_info"]


def test_chat_rejects_empty_messages(cpu_sim: Simulator) -> None:
    r = httpx.post(f"{cpu_sim.url}/v1/chat/completions", json={"model": "default", "messages": [], "max_tokens": 4})
    assert r.status_code == 400
    assert r.json() == {
        "object": "error",
        "message": "Messages cannot be empty.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }


def test_batch_generate_answers_one_result_per_prompt(cpu_sim: Simulator) -> None:
    url = cpu_sim.url
    before = _metric(url, "sglang:num_requests_total", is_streaming="false")
    sp = {"max_new_tokens": 3, "ignore_eos": True}
    r = httpx.post(f"{url}/generate", json={"text": ["a", "bbbb cccc dddd"], "sampling_params": sp})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    out = r.json()
    assert isinstance(out, list) and len(out) == 2
    assert [o["meta_info"]["prompt_tokens"] for o in out] == [1, 3]
    assert [o["meta_info"]["completion_tokens"] for o in out] == [3, 3]
    assert out[0]["meta_info"]["id"] != out[1]["meta_info"]["id"]
    ids = httpx.post(f"{url}/generate", json={"input_ids": [[5, 6], [7, 8, 9], [1]], "sampling_params": sp})
    assert [o["meta_info"]["prompt_tokens"] for o in ids.json()] == [2, 3, 1]
    # every prompt was its own engine request
    assert _metric(url, "sglang:num_requests_total", is_streaming="false") == before + 5


def test_batch_generate_streams_chunks_with_index(cpu_sim: Simulator) -> None:
    body = {"input_ids": [[5, 6], [7, 8, 9]], "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}
    r = httpx.post(f"{cpu_sim.url}/generate", json={**body, "stream": True})
    assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream; charset=utf-8"
    events = _events(r.content)
    assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
    chunks = [e for e in events if isinstance(e, dict)]
    by_index = {i: [c for c in chunks if c["index"] == i] for i in (0, 1)}
    assert len(chunks) == len(by_index[0]) + len(by_index[1])  # every chunk carries its index
    for i, prompt_len in ((0, 2), (1, 3)):
        own = by_index[i]
        assert [c["meta_info"]["completion_tokens"] for c in own] == [1, 2, 3, 4]
        assert own[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 4}
        assert {c["meta_info"]["prompt_tokens"] for c in own} == {prompt_len}


def test_meta_info_with_metrics_like_real(cpu_sim: Simulator) -> None:
    gen = {"text": "Qx7! never sent before 31337", "sampling_params": {"max_new_tokens": 3}}
    first = httpx.post(f"{cpu_sim.url}/generate", json=gen).json()["meta_info"]
    stages = {"storage_prefetch_wait", "storage_staging_wait", "forward_entry_time", "prefill_finished_time"}
    final = stages | {"queue_time", "api_server_dispatch_finish_ts", "response_sent_to_client_ts"}
    assert final <= set(first)
    assert first["cached_tokens"] == 0 and first["cached_tokens_details"] is None  # key kept, null
    rx, fwd, pre = first["request_received_ts"], first["forward_entry_time"], first["prefill_finished_time"]
    assert rx <= first["api_server_dispatch_finish_ts"] and rx <= fwd <= pre <= first["request_finished_ts"]
    again = httpx.post(f"{cpu_sim.url}/generate", json={**gen, "stream": True})
    chunks = [e for e in _events(again.content) if isinstance(e, dict)]
    assert len(chunks) == 3
    assert all(stages | {"queue_time"} <= set(c["meta_info"]) for c in chunks)
    assert "response_sent_to_client_ts" in chunks[0]["meta_info"]
    assert "response_sent_to_client_ts" not in chunks[1]["meta_info"]  # real stamps the first chunk only
    assert chunks[0]["meta_info"]["cached_tokens_details"] == {"device": chunks[0]["meta_info"]["cached_tokens"],
                                                               "host": 0}


def test_headers_like_real(cpu_sim: Simulator) -> None:
    with httpx.Client(base_url=cpu_sim.url) as c:
        for r in (c.get("/server_info"), c.get("/model_info"), c.get("/nope"), c.get("/metrics/nope")):
            assert r.headers["content-type"] == "application/json", r.url  # no charset parameter
        flush = c.post("/flush_cache")
        assert flush.status_code == 200 and "content-type" not in flush.headers
        assert flush.text.startswith("Cache flushed.\n")


def test_cpu_launch_log_and_internal_states(cpu_sim: Simulator) -> None:
    log = cpu_sim.log_text()
    assert "Capture target" not in log
    assert log.count("Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled'") == 1
    assert "KV Cache is allocated. dtype: torch.float16, #tokens: 4096" in log
    m = re.search(r"max_total_num_tokens=4096, .*context_len=(\d+), available_cpu_mem=\d+\.\d\d GB$", log, re.M)
    assert m and m.group(1) == "1024"
    assert "--disable-cuda-graph is an SGLang" not in log  # modelled, so no pass-through warning
    info = httpx.get(f"{cpu_sim.url}/server_info").json()
    state = info["internal_states"][0]
    assert state["decode_cuda_graph_bs"] == [] and state["memory_usage"]["graph"]["decode"] == 0.0
    assert state["pp_max_micro_batch_size"] == state["effective_max_running_requests_per_dp"] == 2048
    assert state["disaggregation_decode_retraction_backup"] == "cpu_tensor"
    assert info["context_length"] == 1024 and info["disable_cuda_graph"] is True


@pytest.mark.parametrize("flag", ["--cuda-graph-backend-prefill=disabled", "--disable-prefill-cuda-graph"])
def test_prefill_graph_alone_disabled(sim_factory: SimFactory, flag: str) -> None:
    sim = sim_factory(flag)
    log = sim.log_text()
    assert "Disable prefill CUDA graph because" in log and "Capture target prefill" not in log
    assert "Capture target decode CUDA graph end" in log
    assert "available_gpu_mem=" in log and "dtype: torch.bfloat16" in log
    assert httpx.get(f"{sim.url}/server_info").json()["internal_states"][0]["decode_cuda_graph_bs"][:3] == [1, 2, 4]


def test_metrics_families_real_has(cpu_sim: Simulator) -> None:
    text = httpx.get(f"{cpu_sim.url}/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in ("kv_cache_memory_usage_gb", "weight_memory_usage_gb", "new_token_ratio", "num_retracted_reqs",
                 "num_paused_reqs", "startup_available_gpu_memory_gb", "is_cuda_graph"):
        assert families[f"sglang:{name}"].type == "gauge", name
    graph = {s.labels["phase"]: s.value for s in families["sglang:graph_memory_usage_gb"].samples}
    assert graph["prefill"] == graph["decode"] == 0.0 and len(graph) == 6  # graphs disabled
    assert families["sglang:new_token_ratio"].samples[0].value == 0.7
    samples = families["sglang:http_requests_active"].samples
    active = {(s.labels["endpoint"], s.labels["method"]): s.value for s in samples}
    assert active[("/metrics", "GET")] == 1.0  # this very request
    assert active.get(("/server_info", "GET"), 0.0) == 0.0
    phases = {s.labels["phase"] for s in families["sglang:startup_time_seconds"].samples}
    assert {"load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e"} <= phases


def _metric(url: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics").text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return 0.0
