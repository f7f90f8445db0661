"""Every endpoint against the recorded 0.5.23 payload shapes in fixtures/captures-0.5.23/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import SimFactory

CAPTURES = Path(__file__).parents[2] / "fixtures" / "captures-0.5.23"


def recorded(name: str) -> Any:
    return json.loads((CAPTURES / name).read_text().split("\n\n", 1)[1])


def test_probes_info_and_errors(sim_factory: SimFactory) -> None:
    sim = sim_factory("--enable-metrics", "--enable-hierarchical-cache", "--hicache-ratio", "2")
    with httpx.Client(base_url=sim.url) as c:
        for path in ("/health", "/health_generate", "/ready"):
            r = c.get(path)
            assert (r.status_code, r.content, r.headers["content-length"]) == (200, b"", "0")
            assert "content-type" not in r.headers
            assert c.head(path).status_code == 405  # GET only, as FastAPI
            assert c.post(path).json() == {"detail": "Method Not Allowed"}
        assert c.get("/nope").json() == {"detail": "Not Found"} and c.get("/nope").status_code == 404
        assert c.get("/").json() == "SGLang is running" and c.head("/").status_code == 200
        info, want = c.get("/server_info").json(), recorded("basic/server_info.txt")
        assert set(want) <= set(info)
        assert set(want["internal_states"][0]) <= set(info["internal_states"][0])
        assert (
            info["version"] == "0.5.23"
            and info["internal_states"][0]["memory_usage"]["token_capacity"] == info["max_total_num_tokens"]
        )
        assert c.get("/get_server_info").json().keys() == info.keys()
        assert set(c.get("/model_info").json()) == set(recorded("basic/model_info.txt"))
        assert c.get("/get_model_info").status_code == 200
        models = c.get("/v1/models").json()
        assert set(models["data"][0]) == set(recorded("basic/v1_models.txt")["data"][0])
        assert c.get("/v1/models/other").status_code == 404
        flush = c.post("/flush_cache")
        assert flush.status_code == 200 and flush.text.startswith("Cache flushed.\n")
        assert c.get("/hicache/storage-backend").status_code == 400
        assert c.get("/v1/loads").json()["loads"][0]["max_total_num_tokens"] == info["max_total_num_tokens"]
        c.post("/generate", json={"text": "warm the metrics", "sampling_params": {"max_new_tokens": 3}})
        m = c.get("/metrics")
        assert m.headers["content-type"].startswith("text/plain; version=0.0.4")
        names = {f.name for f in text_string_to_metric_families(m.text)}
    assert {
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:token_usage",
        "sglang:max_total_num_tokens",
        "sglang:cached_tokens",
        "sglang:time_to_first_token_seconds",
        "sglang:e2e_request_latency_seconds",
        "sglang:hicache_host_used_tokens",
        "sglang:hicache_host_total_tokens",
        "sglang:generation_tokens",
    } <= names
    log = sim.log_text()
    assert "Endpoint '/get_server_info' is deprecated" in log
    assert '"GET /health HTTP/1.1" 200 OK' in log


def test_metrics_404_without_flag_and_auth_rules(sim_factory: SimFactory) -> None:
    sim = sim_factory("--api-key", "sk-user", "--admin-api-key", "sk-admin")
    user, admin = {"Authorization": "Bearer sk-user"}, {"Authorization": "bearer sk-admin"}
    with httpx.Client(base_url=sim.url) as c:
        assert c.get("/health").status_code == 200  # probes are exempt
        assert c.get("/metrics").json() == {"detail": "Not Found"}
        assert c.get("/server_info").json() == {"error": "Unauthorized"}
        assert c.get("/server_info", headers=admin).status_code == 401  # admin key is not the api key
        info = c.get("/server_info", headers=user).json()
        assert info["api_key"] == "sk-user" and "--api-key sk-user" in info["launch_command"]
        assert info["internal_states"][0]["admin_api_key"] == "sk-admin"
        assert c.post("/flush_cache", headers=user).status_code == 401
        assert c.post("/flush_cache", headers=admin).status_code == 200
        backend = c.get("/hicache/storage-backend", headers=admin).json()
        assert backend["hicache_write_policy"] == "write_through"


def test_generate_shapes_and_errors(sim_factory: SimFactory) -> None:
    sim = sim_factory("--context-length", "64")
    with httpx.Client(base_url=sim.url) as c:
        body = c.post(
            "/generate", json={"text": "Hello world", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
        ).json()
        want = recorded("basic/generate_nonstream.txt")
        core = {
            "id",
            "finish_reason",
            "prompt_tokens",
            "weight_version",
            "num_retractions",
            "reasoning_tokens",
            "completion_tokens",
            "cached_tokens",
            "e2e_latency",
        }
        assert core <= set(body["meta_info"]) and core <= set(want["meta_info"])
        assert body["meta_info"]["finish_reason"] == {"type": "length", "length": 8}
        assert len(body["output_ids"]) == body["meta_info"]["completion_tokens"] == 8
        again = c.post(
            "/generate", json={"text": "Hello world", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
        ).json()
        assert again["text"] == body["text"]  # greedy is deterministic (sampled output is not, as on 0.5.23)
        assert again["meta_info"]["cached_tokens"] == again["meta_info"]["prompt_tokens"] - 1
        assert again["meta_info"]["cached_tokens_details"] == {
            "device": again["meta_info"]["cached_tokens"],
            "host": 0,
        }
        r = c.post("/generate", json={"sampling_params": {}})
        assert (r.status_code, r.json()) == (
            400,
            {"error": {"message": "Either text, input_ids or input_embeds should be provided."}},
        )
        r = c.post("/generate", json={"text": "x", "sampling_params": {"foo": 1}})
        assert r.status_code == 400 and r.json()["error"].startswith("unknown field `foo`, expected one of")
        r = c.post("/generate", json={"input_ids": list(range(100))})
        assert r.json() == {
            "error": {
                "message": "The input (100 tokens) is longer than the model's context length (64 tokens)."
            }
        }
        r = c.post("/v1/completions", json={"prompt": "x" * 400, "max_tokens": 4})
        assert r.status_code == 400 and r.json()["type"] == "BadRequestError" and r.json()["code"] == 400
        r = c.post("/v1/completions", content=b"{}", headers={"content-type": "text/plain"})
        assert r.status_code == 400 and "Unsupported Media Type" in r.json()["message"]
        r = c.post("/v1/completions", json={"prompt": ""})
        assert r.json()["message"] == "Prompt cannot be empty"
        chat = c.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6}
        ).json()
        want = recorded("basic/chat_completions.txt")
        assert set(chat) == set(want) and set(chat["choices"][0]) == set(want["choices"][0])
        assert set(chat["usage"]) == set(want["usage"]) and chat["usage"]["completion_tokens"] == 6
        assert c.post("/v1/chat/completions", json={}).json()["type"] == "Bad Request"
