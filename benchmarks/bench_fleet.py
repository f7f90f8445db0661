"""Fleets: readiness lag, parallel validation of many workers, and the gateway's own cost, side by side.

(a) readiness lag of ``launch_fleet`` (simulator workers, smg 1.13.0): from the moment the fleet is
    ready (every worker Up, per its ``--sim-trace`` ``server_up``, AND the gateway answering
    ``/readiness`` 200 with every worker listed healthy, seen by a 5 ms poller on the side) until
    ``launch_fleet`` returns. Target: median <= 0.3 s.
(b) validation of 16 simulated workers behind smg: ``attach_gateway`` (detect, readiness, each
    worker's /health and validated /server_info) with the probes in parallel (as shipped) against
    one at a time (MAX_PARALLEL=1), same gateway, same run. Target: parallel median < 2 s.
(c) the gateway's own cost: the same load (LoadSpec) sent straight to one worker and through smg in
    front of that one worker, alternating; the ratios of output throughput and of median ITL.

Run: ``python benchmarks/bench_fleet.py [--runs 5] [--workers 16] [--requests 64]``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from pytest_sglang.fleet import FleetProgress, FleetSpec, attach_gateway, launch_fleet
from pytest_sglang.fleet import probe as probe_module
from pytest_sglang.fleet.gateway import GatewayCommand, GatewayMember, gateway_argv, resolve_command, start_gateway
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.server import LaunchConfig
from pytest_sglang.server.url import parse_server_url
from pytest_sglang.simulator import Simulator
from pytest_sglang.sockets import free_port

READY_TARGET_S = 0.3
VALIDATE_TARGET_S = 2.0
SIM = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05")


class ReadyWatch:
    """Polls a gateway every 5 ms from the moment its URL is known; records when it first was ready."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.ready_perf: float | None = None
        self._url: str | None = None
        self._found = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def line(self, text: str) -> None:
        """FleetProgress's writer: the gateway's URL is in its "starting at" line."""
        found = re.search(r"gateway .* starting at (http://\S+)", text)
        if found and self._url is None:
            self._url = found.group(1)
            self._found.set()

    def _ready(self, client: httpx.Client) -> bool:
        try:
            if client.get(f"{self._url}/readiness").status_code != 200:
                return False
            listed = client.get(f"{self._url}/workers").json()["workers"]
        except (httpx.HTTPError, ValueError, KeyError):
            return False
        return len(listed) == self.workers and all(w["is_healthy"] for w in listed)

    def _run(self) -> None:
        self._found.wait()
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while not self._stop.is_set():
                if self._ready(client):
                    self.ready_perf = time.perf_counter()
                    return
                time.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()
        self._found.set()
        self._thread.join(5)


def launch_lag(work: Path, workers: int) -> float:
    """One fleet launch: seconds from "fleet ready" to launch_fleet() returning."""
    trace = work / f"trace-{time.monotonic_ns()}.jsonl"
    config = LaunchConfig(runner="simulator", log_dir=work, startup_timeout_s=120,
                          args=(*SIM, "--sim-trace", str(trace)))
    watch = ReadyWatch(workers)
    try:
        gateway = launch_fleet(config, FleetSpec(workers=workers), FleetProgress(watch.line, workers))
        returned = time.perf_counter()
    finally:
        watch.stop()
    try:
        events = [json.loads(line) for line in trace.read_text().splitlines()]
        ups: list[float] = [float(e["perf"]) for e in events if e.get("event") == "server_up"]
    finally:
        gateway.stop()
    assert len(ups) == workers and watch.ready_perf is not None, (ups, watch.ready_perf)
    return returned - max(*ups, watch.ready_perf)


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    raise SystemExit(f"timed out after {timeout_s:.0f}s waiting for {what}")


def _healthy(url: str) -> Callable[[], bool]:
    return lambda: httpx.get(f"{url}/health", timeout=2, trust_env=False).status_code == 200


@contextmanager
def sim_fleet(work: Path, workers: int, command: GatewayCommand) -> Iterator[tuple[str, list[str]]]:
    """``workers`` simulators and smg in front of them (started here, not by the fleet engine)."""
    # all started at once (wait="none"), then waited for: N starts overlap
    sims = [Simulator([*SIM], log_path=work / f"sim-{i}.log", wait="none").start() for i in range(workers)]
    proc = None
    try:
        for sim in sims:
            wait_until(_healthy(sim.url), f"simulator {sim.url} healthy; see {sim.log_path}")
        port = free_port()
        argv = gateway_argv(command, host="127.0.0.1", port=port, metrics_port=free_port(),
                            members=[GatewayMember(s.url) for s in sims], args=())
        url = f"http://127.0.0.1:{port}"
        proc = start_gateway(argv, url=url, log_path=work / "gateway.log", env={})

        def ready() -> bool:
            listed = httpx.get(f"{url}/workers", timeout=2, trust_env=False).json()["workers"]
            return len(listed) == workers and all(w["is_healthy"] for w in listed)

        wait_until(ready, f"gateway with {workers} healthy workers; see {work / 'gateway.log'}")
        yield url, [s.url for s in sims]
    finally:
        if proc is not None:
            proc.stop(1.0)
        for sim in sims:
            sim.stop()


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def validation(work: Path, workers: int, runs: int, command: GatewayCommand) -> tuple[list[float], list[float]]:
    """attach_gateway to a ready gateway with ``workers`` workers: parallel probes, then one at a time."""
    with sim_fleet(work, workers, command) as (url, _):
        address = parse_server_url(url, source="bench")

        def attach() -> None:
            gateway = attach_gateway(address, api_key=None, validate="strict", timeout_s=60)
            assert gateway is not None
            assert len(gateway.reachable_workers()) == workers

        parallel, serial = [], []
        shipped = probe_module.MAX_PARALLEL
        for _ in range(runs):  # alternate, so both see the same machine load
            parallel.append(timed(attach))
            probe_module.MAX_PARALLEL = 1
            try:
                serial.append(timed(attach))
            finally:
                probe_module.MAX_PARALLEL = shipped
    return parallel, serial


def gateway_cost(work: Path, runs: int, requests: int, command: GatewayCommand) -> dict[str, list[float]]:
    """The same load direct to one worker and through the gateway in front of it, alternating."""
    spec = LoadSpec(requests=requests, concurrency=16, input_len=256, output_len=64, warmup=2, model="sim/tiny-llama")
    out: dict[str, list[float]] = {"direct tok/s": [], "gateway tok/s": [], "direct ITL": [], "gateway ITL": []}
    with sim_fleet(work, 1, command) as (gateway, [worker]):
        for _ in range(runs):
            for name, url in (("direct", worker), ("gateway", gateway)):
                result = run_load(url, spec)
                assert result.failed == 0, result.errors
                out[f"{name} tok/s"].append(result.output_throughput)
                out[f"{name} ITL"].append(result.median_itl_ms)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=16, help="workers behind the gateway in (b)")
    parser.add_argument("--requests", type=int, default=64, help="requests per load in (c)")
    opts = parser.parse_args()
    command = resolve_command(None)
    print(f"gateway: {command.describe()} ({' '.join(command.argv)})")
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        work = Path(tmp)
        lags = [launch_lag(work, 2) for _ in range(opts.runs)]
        parallel, serial = validation(work, opts.workers, opts.runs, command)
        cost = gateway_cost(work, opts.runs, opts.requests, command)
    med = statistics.median
    print(f"{'measure':58} {'median':>9} {'min':>9} {'max':>9} {'target':>8}")
    rows = [("(a) readiness lag: fleet ready -> launch_fleet returns (s)", lags, READY_TARGET_S),
            (f"(b) attach + validate {opts.workers} workers, parallel (s)", parallel, VALIDATE_TARGET_S),
            (f"(b) attach + validate {opts.workers} workers, one at a time (s)", serial, None)]
    ok = True
    for name, values, target in rows:
        if target is not None:
            ok &= med(values) <= target
        shown = f"{target:8.2f}" if target is not None else f"{'':>8}"
        print(f"{name:58} {med(values):9.3f} {min(values):9.3f} {max(values):9.3f} {shown}")
    print(f"(b) parallel / one at a time: {med(parallel) / med(serial):.2f}")
    for key in cost:
        print(f"(c) {key:54} {med(cost[key]):9.1f} {min(cost[key]):9.1f} {max(cost[key]):9.1f}")
    print(f"(c) output throughput, gateway / direct: {med(cost['gateway tok/s']) / med(cost['direct tok/s']):.3f}")
    print(f"(c) median ITL, gateway / direct: {med(cost['gateway ITL']) / med(cost['direct ITL']):.3f}")
    print(f"runs={opts.runs}: {'within targets' if ok else 'TARGET MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
