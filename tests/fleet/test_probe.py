"""Direct probes of the workers a gateway lists (pytest_sglang/fleet/probe.py): healthy, dead, unreachable."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fleet_helpers import free_port

from pytest_sglang.errors import ServerUnavailable
from pytest_sglang.fleet.discovery import Discovery, WorkerEntry
from pytest_sglang.fleet.probe import probe_workers
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.url import parse_server_url
from tests.server.fakehttp import fake_server


def _fleet(*entries: tuple[str, bool]) -> Discovery:
    return Discovery("smg", tuple(WorkerEntry(url, "regular", healthy) for url, healthy in entries))


def _probe(discovery: Discovery, direct: str = "auto", **kwargs: Any) -> list[Any]:
    return probe_workers(discovery, api_key=None, validate="strict", direct=direct, timeout_s=15.0, **kwargs)


@contextmanager
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers (a hung worker)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def test_healthy_workers_are_probed_in_parallel(sim_factory: Any) -> None:
    sims = [sim_factory() for _ in range(3)]
    handles = _probe(_fleet(*((s.url, True) for s in sims)))
    assert [h.reachable for h in handles] == [True, True, True]
    assert handles[0].info()["max_total_num_tokens"] > 0
    assert handles[1].health() == 200


def test_a_dead_worker_the_gateway_calls_healthy_is_an_error(sim_factory: Any) -> None:
    alive = sim_factory()
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerUnavailable) as err:
        _probe(_fleet((alive.url, True), (dead, True)))
    text = str(err.value)
    assert "1 of 2 worker(s) behind the gateway failed the direct probe:" in text
    assert f"worker 1 ({dead}): the gateway calls it healthy but GET /health -> connection refused" in text
    assert "--sglang-fleet-direct off" in text


def test_a_worker_answering_503_is_dead() -> None:
    with fake_server({"/health": lambda h: (503, "", None)}) as fake, \
            pytest.raises(ServerUnavailable, match=r"GET /health -> 503"):
        _probe(_fleet((fake.url, True)))


def test_a_hung_worker_is_dead_within_the_deadline() -> None:
    with silent_server() as url:
        started = time.monotonic()
        with pytest.raises(ServerUnavailable, match=r"GET /health -> no answer within \d+s"):
            probe_workers(_fleet((url, True)), api_key=None, validate="strict", direct="auto", timeout_s=2.0)
    assert time.monotonic() - started < 6.0


def test_an_unresolvable_worker_is_not_reachable_from_here() -> None:
    handles = _probe(_fleet(("http://worker-0.sglang.invalid:30000", True)))
    assert not handles[0].reachable
    assert handles[0].unreachable is not None and handles[0].unreachable.startswith("not reachable from here")
    with pytest.raises(ServerUnavailable, match=r"worker 0 \(http://worker-0.sglang.invalid:30000\): not reachable "
                                                r"from here.*\(--sglang-fleet-direct require\)"):
        _probe(_fleet(("http://worker-0.sglang.invalid:30000", True)), direct="require")


def test_direct_off_probes_nothing(sim_factory: Any) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    handles = _probe(_fleet((dead, True)), direct="off")
    assert handles[0].unreachable == "direct probing off (--sglang-fleet-direct off)"
    with pytest.raises(ServerUnavailable, match=r"direct probing off.*\nFix: run the tests where"):
        handles[0].info()


def test_unhealthy_workers_are_not_probed(sim_factory: Any) -> None:
    alive = sim_factory()
    dead = f"http://127.0.0.1:{free_port()}"
    for direct in ("auto", "require"):
        handles = _probe(_fleet((alive.url, True), (dead, False)), direct=direct)
        by_url = {h.url: h for h in handles}
        assert by_url[alive.url].reachable
        assert by_url[dead].unreachable == "unhealthy according to the gateway; not probed"


def test_known_workers_are_not_probed_again() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    own = SGLangServer(parse_server_url(dead, source="test"), "simulator")
    handles = _probe(_fleet((dead, True)), known={dead: own})
    assert handles[0].server is own
