"""Readiness- and crash-detection lag of the server engine, against the simulator.

* readiness lag: the simulator turned Up (``server_up`` in its ``--sim-trace``, perf_counter clock,
  CLOCK_MONOTONIC like ours) -> ``launch()`` returned (health 200 seen, /server_info validated).
* crash lag: the server process was SIGKILLed (while hanging in a startup phase) -> ServerExited raised.

Run: ``python benchmarks/bench_readiness.py [--runs 7] [--time-scale 0.05]``. Targets: readiness
<= 0.25 s, crash <= 0.5 s (medians). The seed's loop polled every 5 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from pytest_sglang.errors import ServerExited
from pytest_sglang.server import LaunchConfig, launch
from pytest_sglang.server import runner as runner_module

READY_TARGET_S = 0.25
CRASH_TARGET_S = 0.5


def readiness_lag(workdir: Path, scale: float) -> float:
    trace = workdir / f"trace-{time.monotonic_ns()}.jsonl"
    config = LaunchConfig(
        runner="simulator",
        log_dir=workdir,
        startup_timeout_s=120,
        args=("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", str(scale),
              "--sim-trace", str(trace)),
    )
    server = launch(config)
    returned = time.perf_counter()
    try:
        events = [json.loads(line) for line in trace.read_text().splitlines()]
        up = next(e["perf"] for e in events if e.get("event") == "server_up")
    finally:
        server.stop()
    return returned - up


def crash_lag(workdir: Path, scale: float, kill_after_s: float = 0.8) -> float:
    killed: dict[str, float] = {}
    real_start = runner_module.SimulatorRunner.start

    def start_then_kill(self: runner_module.SimulatorRunner, *args: object) -> runner_module.RunningProcess:
        proc = real_start(self, *args)  # type: ignore[arg-type]

        def kill() -> None:
            killed["at"] = time.perf_counter()
            proc.popen.kill()  # type: ignore[attr-defined]

        threading.Timer(kill_after_s, kill).start()
        return proc

    config = LaunchConfig(
        runner="simulator",
        log_dir=workdir,
        startup_timeout_s=120,
        args=("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", str(scale),
              "--sim-fault", "hang-at:weights"),
    )
    runner_module.SimulatorRunner.start = start_then_kill  # type: ignore[method-assign]
    try:
        launch(config)
    except ServerExited:
        raised = time.perf_counter()
    else:  # pragma: no cover - the kill must end the start
        raise AssertionError("launch() returned although the server was killed")
    finally:
        runner_module.SimulatorRunner.start = real_start  # type: ignore[method-assign]
    return raised - killed["at"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--time-scale", type=float, default=0.05)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-readiness-") as tmp:
        work = Path(tmp)
        ready = [readiness_lag(work, opts.time_scale) for _ in range(opts.runs)]
        crash = [crash_lag(work, opts.time_scale) for _ in range(opts.runs)]
    rows = [
        ("readiness lag (Up -> launch() returns)", ready, READY_TARGET_S),
        ("crash lag (SIGKILL -> ServerExited)", crash, CRASH_TARGET_S),
    ]
    print(f"{'measure':42} {'median':>8} {'min':>8} {'max':>8} {'target':>8} {'median/target':>14}")
    ok = True
    for name, values, target in rows:
        med = statistics.median(values)
        ok &= med <= target
        print(
            f"{name:42} {med:8.3f} {min(values):8.3f} {max(values):8.3f} {target:8.3f} {med / target:14.2f}"
        )
    print(f"runs={opts.runs} time_scale={opts.time_scale}: {'within targets' if ok else 'TARGET MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
