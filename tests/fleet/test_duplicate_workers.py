"""One worker listed twice is one worker (issue 22): real smg 1.13.0 lists each --worker-urls spelling as given,
and a fleet gate counted one 4,096-token worker as two."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import Gateway, smg_command
from hypothesis import given
from hypothesis import strategies as st

from pytest_sglang.errors import ServerUnavailable
from pytest_sglang.fleet.attach import attach_gateway
from pytest_sglang.fleet.discovery import parse_workers, worker_key
from pytest_sglang.fleet.probe import server_fingerprint
from pytest_sglang.server.url import parse_server_url
from pytest_sglang.simulator import Simulator
from tests.conftest import FAST
from tests.server.fakehttp import Route, fake_server, json_answer

ports = st.integers(min_value=1, max_value=65535)


def _spellings(port: int) -> list[str]:
    return [f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/", f"HTTP://LOCALHOST:{port}",
            f"http://localhost:{port}//", f"http://user:pw@127.0.0.1:{port}", f"http://[::ffff:127.0.0.1]:{port}",
            f"http://localhost.:{port}"]


@given(ports, st.data())
def test_every_spelling_of_one_endpoint_has_one_key(port: int, data: st.DataObject) -> None:
    a, b = data.draw(st.sampled_from(_spellings(port))), data.draw(st.sampled_from(_spellings(port)))
    assert worker_key(a) == worker_key(b) == f"http://127.0.0.1:{port}"


@given(st.sampled_from(["http", "https"]), st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z]{2,5})?", fullmatch=True))
def test_a_default_port_spelled_or_not_is_one_endpoint(scheme: str, host: str) -> None:
    port = 80 if scheme == "http" else 443
    assert worker_key(f"{scheme}://{host.upper()}") == worker_key(f"{scheme}://{host}:{port}/")


@given(ports, ports)
def test_distinct_ports_stay_distinct(a: int, b: int) -> None:
    assert (worker_key(f"http://127.0.0.1:{a}") == worker_key(f"http://localhost:{b}")) == (a == b)


@given(st.text(max_size=40))
def test_any_text_gets_a_key_without_raising(text: str) -> None:
    assert isinstance(worker_key(text), str)


def _gateway_routes(urls: list[str]) -> dict[str, Route]:
    workers = [{"url": u, "worker_type": "regular", "is_healthy": True, "labels": {}} for u in urls]
    body = {"workers": workers, "total": len(workers)}
    return {"/workers": lambda h: json_answer(body),
            "/readiness": lambda h: json_answer({"healthy_workers": len(urls), "total_workers": len(urls)}),
            "/health": lambda h: (200, "", None)}


def test_a_worker_listed_under_two_spellings_is_counted_once_by_readiness() -> None:
    found = parse_workers({"workers": [{"url": "http://127.0.0.1:3/", "is_healthy": True},
                                       {"url": "http://localhost:3", "is_healthy": True}]})
    assert found is not None and len(found.workers) == 2 and found.distinct_healthy() == 1
    assert [tuple(w.url for w in g) for g in found.duplicates()] == [("http://127.0.0.1:3", "http://localhost:3")]


def test_attach_refuses_a_gateway_listing_one_worker_twice(sim_factory: Any) -> None:
    sim = sim_factory()
    port = parse_server_url(sim.url).port
    spellings = [f"http://127.0.0.1:{port}/", f"http://LOCALHOST:{port}", f"http://127.0.0.1:{port}"]
    with fake_server(_gateway_routes(spellings)) as gateway, pytest.raises(ServerUnavailable) as excinfo:
        attach_gateway(parse_server_url(gateway.url), api_key=None, validate="strict", timeout_s=20, min_workers=3)
    lines = str(excinfo.value).splitlines()
    assert lines[0] == "the gateway lists 2 worker(s) twice under different URLs:"
    assert lines[1] == (f"  http://127.0.0.1:{port} and http://127.0.0.1:{port} and http://LOCALHOST:{port} are one "
                        f"endpoint (http://127.0.0.1:{port})")
    assert lines[-1].startswith("Fix: register each worker with the gateway once")


def test_attach_refuses_two_addresses_of_one_server_by_its_server_info(tmp_path: Path) -> None:
    # 127.0.0.1 and 127.0.0.2 are two addresses (no URL rule may merge them), but a server bound to
    # 0.0.0.0 answers on both: only the server's own /server_info tells it is one process.
    with Simulator(list(FAST), host="0.0.0.0", log_path=tmp_path / "sim.log") as sim:
        urls = [f"http://127.0.0.1:{sim.port}", f"http://127.0.0.2:{sim.port}"]
        with fake_server(_gateway_routes(urls)) as gateway, pytest.raises(ServerUnavailable) as excinfo:
            attach_gateway(parse_server_url(gateway.url), api_key=None, validate="strict", timeout_s=20)
    port = sim.port
    assert str(excinfo.value).splitlines()[:2] == [
        "the gateway lists 1 worker(s) twice under different URLs:",
        f"  http://127.0.0.1:{port} and http://127.0.0.2:{port} answer with the same server's /server_info "
        "(port, random_seed and startup_time alike)"]


def test_two_simulators_are_two_servers(sim_factory: Any) -> None:
    sims = [sim_factory(), sim_factory()]
    with fake_server(_gateway_routes([s.url for s in sims])) as gateway:
        handle = attach_gateway(parse_server_url(gateway.url), api_key=None, validate="strict", timeout_s=20)
    assert handle is not None and len(handle.workers) == 2


def test_the_fingerprint_needs_a_seed_a_port_and_measured_startup_times() -> None:
    info = {"port": 30000, "random_seed": 7, "startup_time": {"load_weight": 0.0140144}}
    assert server_fingerprint(info) == json.dumps([30000, 7, {"load_weight": 0.0140144}])
    assert server_fingerprint({**info, "startup_time": None}) is None
    assert server_fingerprint({**info, "random_seed": None}) is None
    assert server_fingerprint(None) is None


def test_real_smg_listing_one_worker_twice_is_refused(sim_factory: Any,
                                                       gateway_factory: Callable[..., Gateway]) -> None:
    sim = sim_factory()
    port = parse_server_url(sim.url).port
    gateway = gateway_factory(smg_command(), [f"http://127.0.0.1:{port}", f"http://localhost:{port}"])
    gateway.wait_ready(2)
    assert len(gateway.workers()) == 2  # smg 1.13.0 keeps both spellings
    with pytest.raises(ServerUnavailable, match=r"the gateway lists 1 worker\(s\) twice under different URLs"):
        attach_gateway(parse_server_url(gateway.url), api_key=None, validate="strict", timeout_s=20, min_workers=2)
