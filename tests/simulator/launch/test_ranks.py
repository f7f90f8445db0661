"""Multi-node ranks (``--nnodes/--node-rank/--dist-init-addr``) behave like SGLang 0.5.23's, as real subprocesses.

What real SGLang does is in the docstring of ``pytest_sglang/simulator/launch/ranks.py`` (with file:line).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from pytest_sglang.simulator import Simulator
from pytest_sglang.sockets import free_port
from tests.conftest import FAST

Ranks = Callable[..., list[Simulator]]


@pytest.fixture
def ranks(tmp_path: Path) -> Iterator[Ranks]:
    """``ranks(0, 1, extra=...)``: start those node ranks of one 2-node server (tp 2); stop all at teardown."""
    started: list[Simulator] = []
    addr = f"127.0.0.1:{free_port()}"

    def start(*node_ranks: int, extra: tuple[str, ...] = (), nnodes: int = 2) -> list[Simulator]:
        out = []
        for rank in node_ranks:
            args = [*FAST, "--tp-size", "2", "--nnodes", str(nnodes), "--dist-init-addr", addr,
                    "--node-rank", str(rank), *extra]
            sim = Simulator(args, wait="none", log_path=tmp_path / f"rank{rank}.log")
            out.append(sim.start())
        started.extend(out)
        return out

    yield start
    for sim in sorted(started, key=lambda s: int(s.args[s.args.index("--node-rank") + 1])):  # rank 0 stops the rest
        sim.stop()


def _wait(predicate: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def _healthy(sim: Simulator) -> bool:
    try:
        return httpx.get(f"{sim.url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _kill(sim: Simulator, signum: int) -> None:
    assert sim.proc is not None
    os.killpg(sim.proc.pid, signum)


def _exit_code(sim: Simulator, timeout_s: float = 20.0) -> int:
    assert sim.proc is not None
    return sim.proc.wait(timeout_s)


def test_rank0_opens_no_port_before_every_rank_joined(ranks: Ranks) -> None:
    (rank0,) = ranks(0)
    _wait(lambda: "Init parallel begin." in rank0.log_text())
    time.sleep(0.5)
    assert not _healthy(rank0) and "Load weight begin" not in rank0.log_text()
    (rank1,) = ranks(1)
    _wait(lambda: _healthy(rank0) and _healthy(rank1))
    assert " TP0] Init parallel ends. elapsed=" in rank0.log_text()
    # A node rank >= 1 has only SGLang's dummy health server: /health 200, everything else 404.
    assert httpx.get(f"{rank1.url}/health_generate").status_code == 200
    missing = httpx.get(f"{rank1.url}/get_server_info")
    assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found"})
    assert httpx.get(f"{rank0.url}/get_server_info").status_code == 200
    log1 = rank1.log_text()
    assert f"Dummy health check server started in background thread at 127.0.0.1:{rank1.port}" in log1
    assert " TP1] Load weight begin." in log1 and " TP0]" not in log1
    assert "Engine startup timings" not in log1 and "max_total_num_tokens=" not in log1
    assert "accepts but does not simulate" not in log1


def test_rank0_times_out_waiting_for_a_rank_that_never_comes(ranks: Ranks) -> None:
    (rank0,) = ranks(0, extra=("--dist-timeout", "1"))
    assert _exit_code(rank0) == -signal.SIGKILL  # the launcher kills its own tree, as 0.5.23 does
    log = rank0.log_text()
    assert ("torch.distributed.DistStoreError: Timed out after 2 seconds waiting for clients. 1/2 clients joined."
            in log)
    assert "Received sigquit from a child process" in log and "Uvicorn running" not in log


def test_a_rank_times_out_when_rank0_never_comes(ranks: Ranks) -> None:
    (rank1,) = ranks(1, extra=("--dist-timeout", "1"))
    assert _exit_code(rank1) == -signal.SIGKILL
    assert "DistNetworkError: The client socket has timed out after 1000ms while trying to connect to" \
        in rank1.log_text()


@pytest.mark.parametrize("ready", [False, True], ids=["during-startup", "after-ready"])
def test_a_dead_rank_takes_rank0_down(ranks: Ranks, ready: bool) -> None:
    # Slow phases keep rank 0 starting while rank 1 dies; the fast profile is ready in well under a second.
    extra = () if ready else ("--sim-time-scale", "1")
    rank0, rank1 = ranks(0, 1, extra=extra)
    if ready:
        _wait(lambda: _healthy(rank0) and _healthy(rank1))
    else:
        _wait(lambda: "Init parallel ends" in rank0.log_text())
    _kill(rank1, signal.SIGKILL)
    assert _exit_code(rank0) == -signal.SIGKILL
    log = rank0.log_text()
    assert "Scheduler hit an exception" in log and "Connection closed by peer [127.0.0.1]:" in log
    phase_line = "SIGQUIT received. signum=None" if ready else "Received sigquit from a child process"
    assert phase_line in log


def test_rank0_dying_takes_the_other_ranks_down(ranks: Ranks) -> None:
    rank0, rank1 = ranks(0, 1)
    _wait(lambda: _healthy(rank0) and _healthy(rank1))
    _kill(rank0, signal.SIGKILL)
    assert _exit_code(rank1) == -signal.SIGKILL
    assert "Connection closed by peer" in rank1.log_text()


def test_only_rank0_stops_the_server(ranks: Ranks) -> None:
    rank0, rank1 = ranks(0, 1)
    _wait(lambda: _healthy(rank0) and _healthy(rank1))
    _kill(rank1, signal.SIGTERM)
    _wait(lambda: "SIGTERM received on node_rank 1; waiting for the rank-0 ShutdownReq" in rank1.log_text())
    assert rank1.proc is not None and rank1.proc.poll() is None and _healthy(rank1)
    _kill(rank0, signal.SIGTERM)
    assert (_exit_code(rank0), _exit_code(rank1)) == (0, 0)
    assert "terminated with 0" in rank1.log_text()


def test_dist_init_port_taken(ranks: Ranks) -> None:
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        sim = Simulator([*FAST, "--tp-size", "2", "--nnodes", "2", "--node-rank", "0",
                         "--dist-init-addr", f"127.0.0.1:{port}"], wait="none")
        sim.start()
        try:
            assert _exit_code(sim) == -signal.SIGKILL
            assert f"The server socket has failed to listen on any local network address. port: {port}" \
                in sim.log_text()
        finally:
            sim.stop()


@pytest.mark.parametrize(("args", "error"), [
    (("--nnodes", "2"), "AssertionError: tp_size must be divisible by number of nodes"),
    (("--nnodes", "0"), "ZeroDivisionError: integer modulo by zero"),
    (("--nnodes", "2", "--tp-size", "2", "--dp-size", "2"),
     "AssertionError: multi-node data-parallel replicas are not supported"),
])
def test_topologies_sglang_refuses(args: tuple[str, ...], error: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_sglang.simulator", *FAST, *args], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert error in done.stderr
