"""A launched server must be the one answering: a taken --port once let every gate pass against
whatever held the port (issue 11, defect 1)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from fakehttp import Fake, fake_server, sglang_twin
from simlaunch import live, sim_config

import pytest_sglang.server.start as engine
from pytest_sglang.errors import ConfigError, ServerStartError
from pytest_sglang.server import identity, launch
from pytest_sglang.server.base import RunningProcess
from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.docker.container import RunningContainer
from pytest_sglang.server.probe import Expected, Target
from pytest_sglang.server.runner import SimulatorRunner
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
    assert f"port {port} is held by pid {os.getpid()} (" in lines[0]
    assert "which is neither the launched process nor one it started" in lines[0]
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


TWIN = Path(__file__).with_name("twin.py")


@pytest.fixture
def late_twin() -> Iterator[tuple[list[subprocess.Popen[str]], object]]:
    """``on_start`` that starts a foreign twin process on the port while the launched server still loads."""
    twins: list[subprocess.Popen[str]] = []

    def bind_after_launch(proc: RunningProcess, port: int) -> None:
        twin = subprocess.Popen([sys.executable, str(TWIN), str(port), MODEL], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, cwd=TWIN.parent,
                                env={**os.environ, "PYTHONPATH": str(TWIN.parent)})
        twins.append(twin)
        assert twin.stdout is not None and twin.stdout.readline().strip() == "listening"

    yield twins, bind_after_launch
    for twin in twins:
        twin.kill()
        twin.communicate(timeout=10)  # reaps it and closes its pipes


@pytest.mark.parametrize("how", ["--port in the launch args", "a fleet worker's port"])
def test_a_server_binding_the_port_after_the_launch_is_refused_whatever_its_age(
    tmp_path: Path, port: int, late_twin: tuple[list[subprocess.Popen[str]], object], how: str
) -> None:
    # Issue 22: a twin started after the launch, younger than it, used to pass as ours (same port and model).
    twins, bind = late_twin
    slow = ("--sim-time-scale", "20")  # ~18 s of loading: the twin answers long before ours would
    args = (*slow, "--port", str(port)) if how.startswith("--port") else slow
    t0 = time.monotonic()
    with pytest.raises(ServerStartError) as excinfo:
        launch(sim_config(tmp_path, *args), port=None if how.startswith("--port") else port,
               on_start=lambda proc: bind(proc, port))  # type: ignore[operator]
    assert time.monotonic() - t0 < 15
    first = str(excinfo.value).splitlines()[0]
    assert "was launched, but another server answers at " in first
    assert f"port {port} is held by pid {twins[0].pid} (" in first
    assert "twin.py" in first and "which is neither the launched process nor one it started" in first
    assert live() == []  # ours was stopped


def test_a_listener_of_another_user_is_foreign_when_our_tree_is_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    me = os.getpid()
    monkeypatch.setattr(identity, "listener_pids", lambda port: {None})
    expected = Expected(port=30000, model_path=MODEL, launched_at=time.time())
    assert identity._socket_verdict(me, expected) == (
        False, "port 30000 is held by a process of another user, outside the launched process tree")
    monkeypatch.setattr(identity, "listener_pids", lambda port: None)  # the socket table is closed to us
    assert identity._socket_verdict(me, expected) == (None, "")


class _EngineView:
    """What the docker SDK's Container shows of a container: its init's host pid."""

    def __init__(self, pid: int) -> None:
        self.attrs = {"State": {"Pid": pid}}

    def reload(self) -> None:
        return None


def _host_network_container(init_pid: int, *, host_network: bool = True) -> RunningContainer:
    container = RunningContainer.__new__(RunningContainer)  # no engine here: only what identity reads
    container.container = _EngineView(init_pid)  # type: ignore[assignment]
    container.host_network, container.pid = host_network, None
    return container


def _twin_process(port: int) -> subprocess.Popen[str]:
    twin = subprocess.Popen([sys.executable, str(TWIN), str(port), MODEL], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=TWIN.parent,
                            env={**os.environ, "PYTHONPATH": str(TWIN.parent)})
    assert twin.stdout is not None and twin.stdout.readline().strip() == "listening"
    return twin


def test_a_host_network_container_is_proven_by_its_init_process_tree(port: int) -> None:
    info = {"port": port, "model_path": MODEL}
    expected = Expected(port=port, model_path=MODEL, launched_at=time.time())
    twin = _twin_process(port)  # stands for the container's server, listening on the host port
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ours = Target(url=parse_server_url(f"http://127.0.0.1:{port}"), mode="docker",
                      process=_host_network_container(twin.pid), expected=expected)
        assert identity.mismatch(ours, info) is None
        # another container's init (or ours still loading): the listener is not in its tree, whatever /server_info says
        theirs = Target(url=ours.url, mode="docker", process=_host_network_container(idle.pid), expected=expected)
        problem = identity.mismatch(theirs, info)
        assert problem is not None and problem.startswith(f"port {port} is held by pid {twin.pid} (")
        # a bridge network: the engine holds the published port; /server_info is the proof
        bridge = Target(url=ours.url, mode="docker", process=_host_network_container(idle.pid, host_network=False),
                        expected=expected)
        assert identity.mismatch(bridge, info) is None
    finally:
        for proc in (twin, idle):
            proc.kill()
            proc.communicate(timeout=10)


def test_a_published_port_is_proven_by_the_port_the_server_was_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The docker runner on a bridge network: the server is told --port P inside the container and is
    # reached on the host port the engine published; /server_info says P, never the host port.
    inner = _free_port()

    class Publishing(SimulatorRunner):
        def start(self, config: LaunchConfig, port: int, log_path: Path) -> RunningProcess:
            assert port == inner
            proc = super().start(config, port, log_path)
            proc.url = published.url
            monkeypatch.setattr(proc, "listener_root_pid", lambda: None)  # no local pid, as for a container
            return proc

    monkeypatch.setattr(engine, "get_runner", lambda config, progress=None: Publishing())
    with fake_server(sglang_twin(inner, MODEL)) as published:  # what the published host port answers
        server = launch(sim_config(tmp_path), port=inner)
        try:
            assert server.url == published.url
        finally:
            server.stop()
