"""A launched server must be the one answering: a taken --port once let every gate pass against
whatever held the port (issue 11, defect 1)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from fakehttp import Fake, fake_server, sglang_twin
from simlaunch import live, sim_config

from pytest_sglang.errors import ConfigError, ServerStartError
from pytest_sglang.server import identity, launch
from pytest_sglang.server.probe import Expected, Target
from pytest_sglang.server.url import parse_server_url

MODEL = "sim/tiny-llama"  # simlaunch's --model-path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def port() -> int:
    return _free_port()


def test_a_taken_port_is_refused_before_anything_starts(tmp_path: Path, port: int) -> None:
    with fake_server(sglang_twin(port, MODEL), port=port):
        t0 = time.monotonic()
        with pytest.raises(ConfigError) as excinfo:
            launch(sim_config(tmp_path, "--port", str(port)))
    assert time.monotonic() - t0 < 5
    message = str(excinfo.value)
    assert message.startswith(f"--port={port}: port {port} on 127.0.0.1 is already in use (by pid {os.getpid()}: ")
    assert message.endswith(f"Fix: stop what listens there (ss -ltnp 'sport = :{port}'), or drop --port from "
                            "--sglang-launch (the plugin picks a free port when --port is left out)")
    assert not list(tmp_path.glob("sglang-*.log"))  # nothing was started


@pytest.fixture
def lose_the_race(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Fake]]:
    """The port is free at the check, then a perfect SGLang twin takes it before the server binds."""
    twins: list[AbstractContextManager[Fake]] = []
    taken: list[Fake] = []
    check = identity.check_port_free

    def check_then_lose(host: str, port: int) -> None:
        check(host, port)
        twins.append(fake_server(sglang_twin(port, MODEL), port=port))
        taken.append(twins[-1].__enter__())

    monkeypatch.setattr(identity, "check_port_free", check_then_lose)
    yield taken
    for twin in twins:
        twin.__exit__(None, None, None)


def test_a_port_taken_after_the_check_is_caught_by_the_identity_check(
    tmp_path: Path, port: int, lose_the_race: list[Fake]
) -> None:
    with pytest.raises(ServerStartError) as excinfo:
        launch(sim_config(tmp_path, "--port", str(port)))
    assert lose_the_race and lose_the_race[0].hits  # the twin answered the probes
    lines = str(excinfo.value).splitlines()
    assert "was launched, but another server answers at " in lines[0]
    assert f"port {port} is held by pid {os.getpid()} (" in lines[0] and "running before this launch" in lines[0]
    assert lines[-1].startswith(f"Fix: stop what holds port {port} (ss -ltnp 'sport = :{port}'), or drop --port")
    assert live() == []  # our server was stopped


def test_a_free_given_port_launches_and_is_proven_ours(tmp_path: Path, port: int) -> None:
    with launch(sim_config(tmp_path, "--port", str(port))) as server:
        assert server.url == f"http://127.0.0.1:{port}"
        assert server.info()["port"] == port


def test_server_info_must_reflect_the_launch_where_no_pid_is_known() -> None:
    # The docker runner's case: no local pid, so /server_info is the proof.
    expected = Expected(port=30000, model_path="org/model-a", launched_at=time.time())
    target = Target(url=parse_server_url("http://127.0.0.1:49152"), mode="docker", expected=expected)
    assert identity.mismatch(target, {"port": 30000, "model_path": "org/model-a"}) is None
    assert identity.mismatch(target, {"port": 30001, "model_path": "org/model-a"}) == (
        "its /server_info says port 30001, but the launched server was told --port 30000 "
        "(a proxy or another server answers)")
    assert identity.mismatch(target, {"port": 30000, "model_path": "org/model-b"}) == (
        "its /server_info says model_path 'org/model-b', but the launched server was given "
        "--model-path 'org/model-a'")
    assert identity.mismatch(target, None) is None  # --sglang-validate off and not JSON: nothing to compare
