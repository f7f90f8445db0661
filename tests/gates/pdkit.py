"""A prefill-decode fleet the test starts itself: simulator workers and SGLang's gateway in PD mode, as subprocesses.

``own_pd_fleet(prefill_args, decode_args, logs)`` starts one simulator per entry of each list (with
exactly the arguments given: no role flag is added, so a test can pair two ``null`` workers), then
``smg launch --pd-disaggregation --prefill URL PORT --decode URL`` in front of them, waits until the
gateway's ``/readiness`` counts every worker healthy, and stops everything on exit.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gates.fleetkit import SIM, SMG, gateway_ready, stop_group
from pytest_sglang.simulator import Simulator, free_port

#: The bootstrap port a prefill worker is listed with when the test does not say (SGLang's default).
DEFAULT_BOOTSTRAP_PORT = 8998
MODEL = ("--model-path", "sim/tiny-llama")


@dataclass
class OwnPDFleet:
    """The gateway's URL and the workers behind it."""

    url: str
    prefill: list[Simulator]
    decode: list[Simulator]


@contextlib.contextmanager
def own_pd_fleet(prefill_args: Sequence[Sequence[str]], decode_args: Sequence[Sequence[str]], logs: Path, *,
                 bootstrap_ports: Sequence[int] | None = None, timeout_s: float = 60.0) -> Iterator[OwnPDFleet]:
    """Start the simulators and ``smg`` in PD mode in front of them; stop all on exit."""
    prefill: list[Simulator] = []
    decode: list[Simulator] = []
    proc: subprocess.Popen[bytes] | None = None
    try:
        for i, args in enumerate(prefill_args):
            prefill.append(Simulator([*SIM, *MODEL, *args], log_path=logs / f"prefill-{i}.log").start())
        for i, args in enumerate(decode_args):
            decode.append(Simulator([*SIM, *MODEL, *args], log_path=logs / f"decode-{i}.log").start())
        ports = list(bootstrap_ports or [DEFAULT_BOOTSTRAP_PORT] * len(prefill))
        port, metrics = free_port(), free_port()
        argv = [*SMG, "--host", "127.0.0.1", "--port", str(port), "--prometheus-host", "127.0.0.1",
                "--prometheus-port", str(metrics), "--pd-disaggregation", "--policy", "round_robin"]
        for worker, boot in zip(prefill, ports, strict=True):
            argv += ["--prefill", worker.url, str(boot)]
        for worker in decode:
            argv += ["--decode", worker.url]
        with open(logs / "gateway.log", "wb") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout_s
        while not gateway_ready(url, len(prefill) + len(decode)):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (logs / "gateway.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"gateway {' '.join(argv)} not ready (exit {proc.poll()}):\n{tail}")
            time.sleep(0.1)
        yield OwnPDFleet(url, prefill, decode)
    finally:
        if proc is not None:
            stop_group(proc)
        for worker in [*prefill, *decode]:
            worker.stop()
