"""A fleet the test starts itself (for attach tests): simulator workers and SGLang's gateway as subprocesses.

``own_fleet(...)`` starts each worker with its own arguments (e.g. a different ``--model-path``) and a
gateway in front of them (``smg launch`` from this environment, or sglang-router 0.3.2 from the Python
named by ``SGLANG_ROUTER_PYTHON``), waits until the gateway's ``/readiness`` counts every worker
healthy, and stops everything on exit, also when the start fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from pytest_sglang.simulator import Simulator, free_port

#: The simulator's smallest profile at a compressed time scale, with /metrics (shares need them).
SIM = ("--sim-profile", "tiny", "--sim-time-scale", "0.05", "--enable-metrics")
SIM_LAUNCH = "--model-path sim/tiny-llama " + " ".join(SIM)
SMG = (str(Path(sys.executable).parent / "smg"), "launch")
#: sglang-router 0.3.2 lives in a venv of its own (it also installs an ``smg`` script).
ROUTER_PYTHON = os.environ.get("SGLANG_ROUTER_PYTHON", "/tmp/gw/venv-router/bin/python")
ROUTER = (ROUTER_PYTHON, "-m", "sglang_router.launch_router")


@dataclass
class OwnFleet:
    """The gateway's URL and the workers behind it."""

    url: str
    workers: list[Simulator]


def gateway_ready(url: str, workers: int) -> bool:
    """The gateway at ``url`` answers /readiness with ``workers`` healthy workers."""
    try:
        body = httpx.get(f"{url}/readiness", timeout=2.0).json()
    except (httpx.HTTPError, ValueError):
        return False
    return isinstance(body, dict) and body.get("healthy_workers") == workers


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group of ``proc``, SIGKILL it after 10 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextlib.contextmanager
def own_fleet(worker_args: Sequence[Sequence[str]], logs: Path, *, gateway: Sequence[str] = SMG,
              gateway_args: Sequence[str] = ("--policy", "round_robin"), timeout_s: float = 60.0) -> Iterator[OwnFleet]:
    """Start one simulator per ``worker_args`` entry and ``gateway`` in front of them; stop all on exit."""
    workers: list[Simulator] = []
    proc: subprocess.Popen[bytes] | None = None
    try:
        for i, args in enumerate(worker_args):
            workers.append(Simulator([*SIM, *args], log_path=logs / f"worker-{i}.log").start())
        port, metrics = free_port(), free_port()
        argv = [*gateway, "--host", "127.0.0.1", "--port", str(port), "--prometheus-host", "127.0.0.1",
                "--prometheus-port", str(metrics), "--worker-urls", *(w.url for w in workers), *gateway_args]
        with open(logs / "gateway.log", "wb") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout_s
        while not gateway_ready(url, len(workers)):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (logs / "gateway.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"gateway {' '.join(argv)} not ready (exit {proc.poll()}):\n{tail}")
            time.sleep(0.1)
        yield OwnFleet(url, workers)
    finally:
        if proc is not None:
            stop_group(proc)
        for worker in workers:
            worker.stop()
