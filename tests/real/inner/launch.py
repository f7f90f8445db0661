"""Inner tests run by pytester: the plugin launched real SGLang 0.5.23 itself (process runner)."""

from __future__ import annotations

import os


def test_launched_handle(sglang_server):
    assert sglang_server.mode == "process"
    assert sglang_server.health() == 200
    log = sglang_server.log_path.read_text(errors="replace")
    assert "Uvicorn running on" in log
    assert os.environ["REAL_EXPECT_MODEL"] in log


def test_startup_report_read_from_real_log(sglang_server):
    report = sglang_server.startup
    assert report is not None
    assert report.max_total_num_tokens == 4096
    assert report.ready_s > 0


def test_server_info_of_launched(sglang_server_info):
    assert sglang_server_info["version"] == "0.5.23"
    assert sglang_server_info["max_total_num_tokens"] == 4096
    assert sglang_server_info["sleep_on_idle"] is True
