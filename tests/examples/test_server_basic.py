"""Inner test file: the fixtures give one working server handle (attach or launch)."""

from __future__ import annotations

import os


def test_server_handle(sglang_server):
    assert sglang_server.url.startswith("http://")
    assert sglang_server.health() == 200
    print(f"SGLANG_URL={sglang_server.url} MODE={sglang_server.mode} PID={os.getpid()}")


def test_client_and_info(sglang_client, sglang_server_info):
    assert sglang_client.get("/health").status_code == 200
    assert sglang_server_info["max_total_num_tokens"] > 0
    assert sglang_server_info.get("api_key") in (None, "<redacted>")
