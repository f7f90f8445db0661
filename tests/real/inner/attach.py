"""Inner tests run by pytester against a real SGLang 0.5.23 server given with --sglang-url."""

from __future__ import annotations

import json
import os

EXPECT_URL = os.environ["REAL_EXPECT_URL"]
EXPECT_MODEL = os.environ["REAL_EXPECT_MODEL"]


def test_handle_is_attached(sglang_server):
    assert sglang_server.mode == "attach"
    assert sglang_server.url.rstrip("/") == EXPECT_URL
    assert sglang_server.health() == 200


def test_server_info_validated_and_scrubbed(sglang_server_info):
    assert sglang_server_info["version"] == "0.5.23"
    assert sglang_server_info["max_total_num_tokens"] == 4096
    assert sglang_server_info["model_path"] == EXPECT_MODEL
    # real SGLang returns api_key in plain text (top level, launch_command, internal_states)
    assert os.environ["SGLANG_API_KEY"] not in json.dumps(sglang_server_info)


def test_metrics_are_parsed(sglang_server):
    families = sglang_server.metrics()
    assert any(name.startswith("sglang:") for name in families), sorted(families)[:10]


def test_client_generates_through_real_scheduler(sglang_client):
    body = {"text": "Hello, world!", "sampling_params": {"max_new_tokens": 5, "temperature": 0,
                                                          "ignore_eos": True}}
    r = sglang_client.post("/generate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["meta_info"]["completion_tokens"] == 5
