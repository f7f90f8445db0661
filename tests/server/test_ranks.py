"""Multi-node servers (``--nnodes N``): one process per node rank, watched as one server.

The launches go through ``launch()`` (``server/start.py`` wraps the runner in a RankedRunner); the
ranks are real simulator subprocesses on this machine.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from simlaunch import live, sim_config

from pytest_sglang.errors import ConfigError, ServerExited
from pytest_sglang.server import start
from pytest_sglang.server.base import ExitStatus
from pytest_sglang.server.probe import Target
from pytest_sglang.server.ranks import (
    Rank,
    RankedProcess,
    RankExit,
    needs_ranks,
    rank_configs,
    rank_log_path,
)
from pytest_sglang.server.readiness import wait_until_ready
from pytest_sglang.server.runner import SimulatorRunner
from pytest_sglang.server.url import parse_server_url
from pytest_sglang.sockets import free_port

NODE = "node-a"
TWO = ("--tp-size", "2", "--nnodes", "2")


@pytest.fixture(autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    yield
    deadline = time.monotonic() + 5
    while live() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live() == [], "a test left a rank process running"


@pytest.fixture
def ranked_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """``launch()`` as shipped (a RankedRunner around the runner when needs_ranks()), its node named NODE."""
    monkeypatch.setattr("pytest_sglang.server.ranks.socket.gethostname", lambda: NODE)


def _ranked(process: object) -> RankedProcess:
    assert isinstance(process, RankedProcess)
    return process


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _wait(predicate: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def _argv_line(log: Path) -> str:
    return log.read_text().splitlines()[0]  # ProcessRunner writes "# pytest-sglang <time>: <argv>" first


# --- each rank's launch -------------------------------------------------------------------------

def test_rank_configs_add_node_rank_and_one_dist_init_addr(tmp_path: Path) -> None:
    config = sim_config(tmp_path, *TWO, "--port", "31234")
    ranks = rank_configs(config, rank0_host="10.0.0.3", pick_port=lambda host: 29500)
    assert [c.args[-4:] for c in ranks] == [("--dist-init-addr", "10.0.0.3:29500", "--node-rank", str(k))
                                           for k in (0, 1)]
    assert "31234" in ranks[0].args and "--port" not in ranks[1].args  # one machine: one --port each
    assert rank_configs(config, rank0_host="::1", pick_port=lambda host: 7)[0].args[-3] == "[::1]:7"


@pytest.mark.parametrize("flag", ["--dist-init-addr", "--nccl-init-addr"])
def test_a_given_dist_init_addr_is_kept(tmp_path: Path, flag: str) -> None:
    config = sim_config(tmp_path, *TWO, flag, "10.0.0.9:4000")
    for k, rank in enumerate(rank_configs(config, pick_port=lambda host: pytest.fail("no port to pick"))):
        assert rank.args == (*config.args, "--node-rank", str(k))


def test_needs_ranks(tmp_path: Path) -> None:
    assert needs_ranks(sim_config(tmp_path, *TWO))
    assert not needs_ranks(sim_config(tmp_path))
    assert not needs_ranks(sim_config(tmp_path, "--nnodes", "1"))
    assert not needs_ranks(sim_config(tmp_path, *TWO, "--use-ray"))  # SGLang starts the ranks itself


@pytest.mark.parametrize(("args", "flag", "value", "words"), [
    (("--nnodes", "0"), "--nnodes", 0, "drop --nnodes for a one-node server"),
    (("--nnodes", "-2"), "--nnodes", -2, "give --nnodes N (N >= 2"),
    ((*TWO, "--node-rank", "1"), "--node-rank", 1, "drop --node-rank from the launch args (ranks 0 to 1 are added)"),
    (("--nnodes", "2"), "--nnodes", 2, "give --tp-size (or --pp-size) a multiple of 2, e.g. --tp-size 2"),
    ((*TWO, "--dp-size", "2"), "--dp-size", 2, "no data-parallel replicas across nodes"),
    ((*TWO, "--dist-init-addr", "10.0.0.9"), "--dist-init-addr", "10.0.0.9", "e.g. --dist-init-addr 10.0.0.9:29500"),
    ((*TWO, "--use-ray"), "--use-ray", True, "drop --use-ray"),
])
def test_refusals_name_the_flag_the_value_and_the_fix(tmp_path: Path, args: tuple[str, ...], flag: str,
                                                      value: object, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        rank_configs(sim_config(tmp_path, *args))
    assert (info.value.source, info.value.value) == (flag, value)
    assert words in str(info.value) and "Fix: " in str(info.value)


@pytest.mark.usefixtures("ranked_launch")
@pytest.mark.parametrize("args", [("--nnodes", "0"), (*TWO, "--node-rank", "1")])
def test_launch_refuses_before_starting_anything(tmp_path: Path, args: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match=re.escape(args[-2])):
        start.launch(sim_config(tmp_path, *args))
    assert live() == []


# --- the ranks as one server ----------------------------------------------------------------------

def test_healthy_only_once_every_rank_is_up(tmp_path: Path) -> None:
    """The join a placement (this machine, Ray) makes: rank 0 alone never becomes ready."""
    config = sim_config(tmp_path, *TWO)
    first, second = rank_configs(config)
    runner = SimulatorRunner()
    log = tmp_path / "sglang.log"
    rank0 = runner.start(first, free_port(), log)
    server: RankedProcess | None = None
    try:
        _wait(lambda: "Init parallel begin." in log.read_text())
        time.sleep(1.0)
        assert not _healthy(rank0.url) and "Load weight begin" not in log.read_text()
        rank1 = runner.start(second, free_port(), rank_log_path(log, 1))
        server = RankedProcess([Rank(1, "10.0.0.4", rank1), Rank(0, "10.0.0.3", rank0)])
        target = Target(url=parse_server_url(server.url), mode="simulator", process=server)
        wait_until_ready(target, 30.0)
        assert all(_healthy(r.process.url) for r in server.ranks) and server.exit_status() is None
        assert re.fullmatch(r"2 node ranks: rank 0 on node 10\.0\.0\.3 \(pid \d+\), rank 1 on node 10\.0\.0\.4 "
                            r"\(pid \d+\), running", server.describe()), server.describe()
        assert server.log_paths == {0: log, 1: tmp_path / "sglang-rank1.log"}
    finally:
        if server is not None:
            server.stop(2.0)
        rank0.stop(2.0)


@pytest.mark.usefixtures("ranked_launch")
def test_stop_ends_every_rank_rank0_first(tmp_path: Path) -> None:
    server = start.launch(sim_config(tmp_path, *TWO))
    ranked = _ranked(server.process)
    assert len(live()) == 2 and _healthy(ranked.ranks[1].process.url)
    began = time.monotonic()
    server.stop()
    # Rank 1 ignores SIGTERM; rank 0's shutdown ends it (exit 0) instead of a SIGKILL after the grace.
    assert time.monotonic() - began < 5.0
    assert ranked.ranks[1].process.exit_status() == ExitStatus(code=0)
    assert live() == []
    assert ranked.stop() == ranked.exit_status() is not None  # idempotent


@pytest.mark.usefixtures("ranked_launch")
def test_a_given_dist_init_addr_reaches_every_rank(tmp_path: Path) -> None:
    addr = f"127.0.0.1:{free_port()}"
    with start.launch(sim_config(tmp_path, *TWO, "--dist-init-addr", addr)) as server:
        for k, path in _ranked(server.process).log_paths.items():
            assert f"--dist-init-addr {addr} --node-rank {k}" in _argv_line(path)


@pytest.mark.usefixtures("ranked_launch")
def test_rank1_killed_during_startup_fails_the_start_naming_it(tmp_path: Path) -> None:
    def kill_rank1_once_loading(process: object) -> None:
        ranked = _ranked(process)
        log = ranked.log_paths[1]

        def kill() -> None:
            _wait(lambda: log.exists() and "Load weight begin" in log.read_text())
            ranked.ranks[1].process.kill(signal.SIGKILL)

        threading.Thread(target=kill, daemon=True).start()

    # Real-time phases (--sim-time-scale 1): rank 0 is still starting when rank 1 dies.
    with pytest.raises(ServerExited) as info:
        start.launch(sim_config(tmp_path, *TWO, "--sim-time-scale", "1"), on_start=kill_rank1_once_loading)
    status = info.value.exit_status
    assert isinstance(status, RankExit) and (status.node_rank, status.node, status.signal) == (1, NODE, 9)
    message = str(info.value)
    headline = message.splitlines()[0]
    assert re.search(rf"rank 1 on node {NODE} \(pid \d+, ended first: killed by SIGKILL\)", headline), headline
    fix = message.splitlines()[-1]
    assert fix.startswith(f"Fix: rank 1 on node {NODE} ended first") and "-rank1.log" in fix


@pytest.mark.usefixtures("ranked_launch")
def test_rank1_killed_after_ready_is_the_exit_status(tmp_path: Path) -> None:
    with start.launch(sim_config(tmp_path, *TWO)) as server:
        ranked = _ranked(server.process)
        ranked.ranks[1].process.kill(signal.SIGKILL)
        _wait(lambda: server.exit_status() is not None)
        status = server.exit_status()
        assert status is not None
        assert status.describe().startswith(f"rank 1 on node {NODE} killed by SIGKILL: most likely the out-of-memory")
        # Rank 0 loses its peer and SGLang kills rank 0's own tree: it is listed after rank 1.
        _wait(lambda: ranked.ranks[0].process.exit_status() is not None)
        last = ranked.exit_status()
        assert last is not None and last.then == (f"rank 0 on node {NODE} killed by SIGKILL: most likely the "
                                                  "out-of-memory killer (check `dmesg -T | grep -i oom`)",)
        assert "Connection closed by peer" in server.log_path.read_text()  # type: ignore[union-attr]
