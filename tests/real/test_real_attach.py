"""The plugin and the engine attached to a real SGLang 0.5.23 server that they did not start."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from realsgl import RawServer, RealSetup

pytestmark = pytest.mark.real_sglang


def test_plugin_session_attached_to_real_server(
    pytester: pytest.Pytester, inner_file: Callable[[str], Path], raw_server: RawServer,
    real_setup: RealSetup, monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert raw_server.api_key is not None
    monkeypatch.setenv("REAL_EXPECT_URL", raw_server.url)
    monkeypatch.setenv("REAL_EXPECT_MODEL", str(real_setup.model))
    monkeypatch.setenv("SGLANG_API_KEY", raw_server.api_key)
    inner_file("attach")
    result = pytester.runpytest_subprocess("--sglang-url", raw_server.url, "--junitxml=junit.xml", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([f"*attach*{raw_server.url}*"])  # report header
    shown = result.stdout.str() + result.stderr.str() + (pytester.path / "junit.xml").read_text()
    assert raw_server.api_key not in shown
    # attach mode never stops or signals the server
    assert raw_server.proc is not None and raw_server.proc.poll() is None
    assert httpx.get(f"{raw_server.url}/health", timeout=30.0).status_code == 200


def test_engine_attach_without_pytest(raw_server: RawServer) -> None:
    from pytest_sglang.server import attach

    assert raw_server.api_key is not None
    server = attach(raw_server.url, api_key=raw_server.api_key)
    try:
        assert server.mode == "attach"
        assert server.health() == 200
        info = server.info()
        assert info["max_total_num_tokens"] == 4096
        assert raw_server.api_key not in json.dumps(info)
        assert "sglang:num_running_reqs" in server.metrics()
    finally:
        server.stop()  # a no-op for attached servers: it must not signal the real one
    assert raw_server.proc is not None and raw_server.proc.poll() is None


def test_schemas_accept_live_real_payloads(raw_server: RawServer) -> None:
    from pytest_sglang.server.validation import validate_payload

    with httpx.Client(base_url=raw_server.url, headers=raw_server.auth(), timeout=30.0) as client:
        for endpoint, schema in (("/server_info", "server_info"), ("/get_server_info", "server_info"),
                                 ("/model_info", "model_info")):
            r = client.get(endpoint)
            assert r.status_code == 200, (endpoint, r.status_code)
            validate_payload(r.json(), schema, endpoint)  # raises SchemaMismatch with the failing JSON paths
