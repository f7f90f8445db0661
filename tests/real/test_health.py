"""What real SGLang 0.5.23 does while it starts and once it is up: the facts the plugin's waiter,
validator and redaction are built on (reference §1, §2, captures-0.5.23). Uses the raw server."""

from __future__ import annotations

import itertools

import httpx
import pytest
from realsgl import RawServer

pytestmark = pytest.mark.real_sglang


def _health(raw: RawServer) -> list[tuple[int | None, bytes, dict[str, str]]]:
    return [(p.status, p.body, p.headers) for p in raw.timeline if p.path == "/health"]


def test_port_refused_then_503_empty_then_200_empty(raw_server: RawServer) -> None:
    probes = _health(raw_server)
    phases = [status for status, _ in itertools.groupby(s for s, _, _ in probes)]
    assert phases == [None, 503, 200], raw_server.timeline
    for status, body, headers in probes:
        if status is not None:
            assert body == b"" and headers["content-length"] == "0", (status, body, headers)
            assert "content-type" not in headers


def test_server_info_answers_while_health_is_503(raw_server: RawServer) -> None:
    (probe,) = [p for p in raw_server.timeline if p.path == "/server_info"]
    assert probe.status == 200, probe
    assert b'"max_total_num_tokens":4096' in probe.body


def test_health_is_get_only_and_open_without_api_key(raw_server: RawServer) -> None:
    assert httpx.head(f"{raw_server.url}/health").status_code == 405
    r = httpx.get(f"{raw_server.url}/health_generate", timeout=30.0)
    assert (r.status_code, r.content) == (200, b"")
    assert httpx.get(f"{raw_server.url}/server_info").status_code == 401


def test_server_info_shows_api_key_in_plain_text(raw_server: RawServer) -> None:
    # Why the plugin must scrub /server_info before showing or storing any of it.
    assert raw_server.api_key is not None
    r = httpx.get(f"{raw_server.url}/server_info", headers=raw_server.auth())
    assert r.status_code == 200
    assert r.json()["api_key"] == raw_server.api_key
    assert r.text.count(raw_server.api_key) >= 2  # top level and launch_command at least
