"""Discovery parsing (pytest_sglang/fleet/discovery.py) on what both gateways really answer.

The payloads in fixtures/gateway/ were recorded from smg 1.13.0 and sglang-router 0.3.2 in front of
simulator workers (three, one then SIGKILLed) and in front of one real SGLang 0.5.23 CPU worker.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fleet_helpers import load_fixture

from pytest_sglang.errors import ServerUnavailable
from pytest_sglang.fleet.discovery import Discovery, discover, parse_readiness, parse_workers

RECORDINGS = {
    "smg-1.13.0-simulator": "smg",
    "smg-1.13.0-real-sglang-0.5.23": "smg",
    "sglang-router-0.3.2-simulator": "sglang-router",
    "sglang-router-0.3.2-real-sglang-0.5.23": "sglang-router",
}
#: Both gateways, before any worker registered (observed; the same body from both).
NOT_READY = b'{"status":"not ready","reason":"insufficient healthy workers"}'
NO_WORKERS = {"workers": [], "total": 0, "stats": {"prefill_count": 0, "decode_count": 0, "regular_count": 0}}


def _workers(name: str, state: str = "up") -> Any:
    record = load_fixture(name)
    return (record["dead"] if state == "dead" else record)["/workers"]["body"]


@pytest.mark.parametrize(("name", "flavor"), sorted(RECORDINGS.items()))
def test_recorded_worker_lists_parse(name: str, flavor: str) -> None:
    record = load_fixture(name)
    found = parse_workers(record["/workers"]["body"])
    assert found is not None
    assert found.flavor == flavor
    assert len(found.workers) == record["worker_count"] == len(found.healthy)
    assert [w.url for w in found.workers] == sorted(f"http://WORKER{i}" for i in range(record["worker_count"]))
    for worker in found.workers:
        assert worker.role == "regular"
        assert worker.load == 0
        assert worker.model_id is not None
        assert worker.fact("tp_size") == worker.fact("dp_size") == "1"
        assert worker.fact("model_path") == worker.model_id


def test_smg_labels_carry_the_worker_version() -> None:
    found = parse_workers(_workers("smg-1.13.0-real-sglang-0.5.23"))
    assert found is not None
    assert found.workers[0].fact("version") == "0.5.23"
    assert found.workers[0].fact("max_total_tokens") == "4096"


def test_sglang_router_metadata_has_no_version_but_disaggregation_mode() -> None:
    found = parse_workers(_workers("sglang-router-0.3.2-real-sglang-0.5.23"))
    assert found is not None
    assert found.workers[0].fact("version") is None
    assert found.workers[0].fact("disaggregation_mode") == "null"


@pytest.mark.parametrize("name", ["smg-1.13.0-simulator", "sglang-router-0.3.2-simulator"])
def test_a_worker_the_gateway_marked_dead(name: str) -> None:
    found = parse_workers(_workers(name, "dead"))
    assert found is not None
    assert [w.url for w in found.workers if not w.is_healthy] == ["http://WORKER2"]
    assert len(found.healthy) == 2
    ready = load_fixture(name)["dead"]["/readiness"]
    assert (ready["status"], ready["body"]["healthy_workers"], ready["body"]["total_workers"]) == (200, 2, 3)


@pytest.mark.parametrize("body", [
    {"router_manager": True, "routers_count": 1, "workers_count": 2},  # router 0.3.2's /get_server_info
    {"detail": "Not Found"},  # a plain SGLang server
    [{"url": "http://w"}],
    {"workers": "http://w"},
    "workers",
    None,
])
def test_bodies_that_are_not_a_worker_list(body: object) -> None:
    assert parse_workers(body) is None


def test_a_worker_without_url_is_an_error_naming_the_gateway_fix() -> None:
    with pytest.raises(ServerUnavailable, match=r"GET /workers: a worker without a 'url'.*\nFix: point --sglang-url"):
        parse_workers({"workers": [{"worker_type": "regular", "is_healthy": True}]})


def test_roles_order_and_unknown_values() -> None:
    found = parse_workers({"workers": [
        {"url": "http://d/", "worker_type": "decode", "is_healthy": True},
        {"url": "http://b", "worker_type": "Prefill", "is_healthy": "yes", "bootstrap_port": 8998},
        {"url": "http://a", "worker_type": "shiny", "is_healthy": True, "load": True},
        "not a worker",
    ]})
    assert found is not None
    assert [(w.url, w.role) for w in found.workers] == [
        ("http://a", "regular"), ("http://b", "prefill"), ("http://d", "decode")]
    prefill = found.workers[1]
    assert (prefill.is_healthy, prefill.bootstrap_port) == (False, 8998)  # only JSON true is healthy
    assert found.workers[0].load is None  # a bool is no load figure
    assert found.flavor == "sglang-router"  # no smg-only keys
    assert Discovery("smg", ()).healthy == ()


def test_an_empty_list_cannot_tell_the_flavour() -> None:
    # Before any worker registered, smg and sglang-router answer the same body: "sglang-router".
    found = parse_workers(NO_WORKERS)
    assert found is not None
    assert (found.flavor, found.workers) == ("sglang-router", ())


def _response(status: int, content: bytes) -> httpx.Response:
    return httpx.Response(status, content=content, request=httpx.Request("GET", "http://gw/readiness"))


def test_readiness_ready_and_not_ready() -> None:
    for name in RECORDINGS:
        body = load_fixture(name)["/readiness"]["body"]
        ready = parse_readiness(_response(200, json.dumps(body).encode()))
        assert ready.ready
        assert ready.describe() == f"GET /readiness -> 200 ({ready.healthy_workers}/{ready.total_workers} workers " \
                                   "healthy)"
    not_ready = parse_readiness(_response(503, NOT_READY))
    assert not not_ready.ready
    assert not_ready.describe() == "GET /readiness -> 503: insufficient healthy workers"


@pytest.mark.parametrize(("content", "reason"), [(b"<html>bad gateway</html>", "<html>bad gateway</html>"),
                                                 (b'["x"]', '["x"]')])
def test_readiness_body_that_is_not_an_object(content: bytes, reason: str) -> None:
    parsed = parse_readiness(_response(502, content))
    assert (parsed.ready, parsed.healthy_workers, parsed.reason) == (False, None, reason)


def _client(handler: Any) -> httpx.Client:
    return httpx.Client(base_url="http://gw", transport=httpx.MockTransport(handler))


def test_discover_tells_a_gateway_from_a_server() -> None:
    body = json.dumps(_workers("smg-1.13.0-simulator")).encode()
    with _client(lambda request: httpx.Response(200, content=body)) as client:
        found = discover(client)
    assert found is not None and found.flavor == "smg" and len(found.workers) == 3
    with _client(lambda request: httpx.Response(404, json={"detail": "Not Found"})) as client:
        assert discover(client) is None
    with _client(lambda request: httpx.Response(200, content=b"OK")) as client:
        assert discover(client) is None


def test_discover_leaves_transport_errors_to_the_readiness_wait() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with _client(refuse) as client:
        assert discover(client) is None
