"""fleet.connect: gateway detection above both handles (a 404 on /workers means one SGLang server)."""

from __future__ import annotations

import pytest

from pytest_sglang.errors import ServerUnavailable
from pytest_sglang.fleet.connect import connect, start_server
from pytest_sglang.fleet.handle import SGLangFleet
from pytest_sglang.server.handle import SGLangServer
from tests.server.fakehttp import SERVER_INFO, fake_server, json_answer


def _ok(_: dict[str, str]) -> tuple[int, str, None]:
    return 200, "", None


def test_a_404_on_workers_is_one_server_and_is_asked_first() -> None:
    with fake_server({"/health": _ok, "/server_info": lambda h: json_answer(SERVER_INFO)}) as fake:
        server = connect(fake.url)
        assert isinstance(server, SGLangServer) and not isinstance(server, SGLangFleet)
        assert [p for p, _ in fake.hits][:3] == ["/workers", "/health", "/server_info"]


def test_start_server_with_a_url_never_stops_what_it_attached_to() -> None:
    with fake_server({"/health": _ok, "/server_info": lambda h: json_answer(SERVER_INFO)}) as fake:
        with start_server(url=fake.url) as server:
            assert server.info()["max_total_num_tokens"] == 4096
        assert server.process is None  # nothing launched, so nothing to stop


def test_start_server_needs_a_config_or_a_url() -> None:
    with pytest.raises(TypeError, match="needs a LaunchConfig or url="), start_server():
        pass


def test_a_dead_port_fails_within_the_deadline() -> None:
    with fake_server({}) as fake:
        url = fake.url
    with pytest.raises(ServerUnavailable):
        connect(url, timeout_s=2)
