"""The plugin's log follower reads real SGLang 0.5.23's own startup log (raw server's log file)."""

from __future__ import annotations

import pytest
from realsgl import RawServer

pytestmark = pytest.mark.real_sglang


def test_follower_reads_phases_and_capacity_from_real_log(raw_server: RawServer) -> None:
    from pytest_sglang.server.phases import LogFollower

    report = LogFollower(raw_server.log_path).stop()  # reads the whole file once
    names = [span.name for span in report.phases]
    # CPU launch: no CUDA graph capture, no host pools; the order is SGLang's (reference §9)
    assert names == ["launching", "loading weights", "allocating KV cache", "starting HTTP server",
                     "warming up", "ready"], names
    assert report.kv_tokens == 4096
    assert report.max_total_num_tokens == 4096
    assert report.scheduler_info.get("context_len") == "2048", report.scheduler_info
    assert report.uvicorn_url == raw_server.url
    assert report.fatal == [], report.fatal
    assert raw_server.api_key is not None and raw_server.api_key not in repr(report)
