"""``min_healthy`` counts a worker once however the gateway spells it (issue 22: real smg 1.13.0 listed one
worker under two URLs and ``min_healthy=3`` passed with one worker)."""

from __future__ import annotations

from pytest_sglang.fleet.handle import SGLangFleet
from pytest_sglang.gates.base import GateOutcome
from pytest_sglang.gates.fleet.health import health_check
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.url import parse_server_url
from tests.server.fakehttp import fake_server, json_answer

SPELLINGS = ["http://127.0.0.1:31001", "http://localhost:31001/", "HTTP://127.0.0.1:31001"]


def test_min_healthy_counts_one_worker_listed_three_times_once() -> None:
    workers = [{"url": u, "is_healthy": True, "labels": {}} for u in SPELLINGS]
    routes = {"/workers": lambda h: json_answer({"workers": workers}),
              "/readiness": lambda h: json_answer({"healthy_workers": 3, "total_workers": 3})}
    with fake_server(routes) as gateway:  # type: ignore[arg-type]
        fleet = SGLangFleet(SGLangServer(parse_server_url(gateway.url), "attach"), "smg", [])
        out = GateOutcome("fleet")
        health_check(fleet, 3, out)
    check = out.checks[0]
    assert (check.measured, check.passed) == (1, False)
    assert sum("a second time: counted once" in note for note in out.notes) == 2
