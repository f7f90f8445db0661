"""Readiness- and crash-detection lag of the server engine, against the simulator.

* readiness lag: the simulator turned Up (``server_up`` in its ``--sim-trace``, perf_counter clock,
  CLOCK_MONOTONIC like ours) -> ``launch()`` returned (health 200 seen, /server_info validated).
* crash lag: the server process was SIGKILLed (while hanging in a startup phase) -> ServerExited raised.
* attach lag through pytest: a simulator warming up (its warmup stretched so that pytest is already
  waiting) turned Up -> the first test body ran, in ``pytest --sglang-url``: the readiness wait, gateway
  detection, ``/server_info`` validation and everything the plugin does before the body (issue 34).

Run: ``python benchmarks/bench_readiness.py [--runs 7] [--plugin-runs 5] [--time-scale 0.05]``. Targets:
readiness and attach lag <= 0.25 s, crash <= 0.5 s (medians). The seed's loop polled every 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pytest_sglang.errors import ServerExited
from pytest_sglang.server import LaunchConfig, launch
from pytest_sglang.server import runner as runner_module
from pytest_sglang.sockets import free_port

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


#: The simulator with its warmup phase stretched (simulated seconds): Up comes well after pytest waits.
_SLOW_WARMUP = ("import sys; from pytest_sglang.simulator.scheduling import profiles; "
                "profiles.TINY.phase_s['warmup'] = float(sys.argv.pop(1)); "
                "from pytest_sglang.simulator.server import main; sys.exit(main(sys.argv[1:]))")
_BODY_TEST = ("import os, time\n\n\ndef test_body(sglang_server):\n"
              "    with open(os.environ['BENCH_BODY_FILE'], 'w') as f:\n"
              "        f.write(repr(time.perf_counter()))\n")


def attach_lag(workdir: Path, scale: float, warmup_s: float = 10.0) -> float:
    """Up (the simulator's /health turns 200) -> the first test body of ``pytest --sglang-url``."""
    trace, body = workdir / f"trace-{time.monotonic_ns()}.jsonl", workdir / f"body-{time.monotonic_ns()}.txt"
    port = free_port("127.0.0.1")
    sim = subprocess.Popen([sys.executable, "-c", _SLOW_WARMUP, str(warmup_s / scale), "--model-path", "sim/tiny-llama",
                            "--sim-profile", "tiny", "--sim-time-scale", str(scale), "--port", str(port),
                            "--sim-trace", str(trace)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (trace.exists() and "port_open" in trace.read_text()):
            if time.monotonic() > deadline or sim.poll() is not None:
                raise SystemExit("the simulator did not open its port")
            time.sleep(0.02)
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               f"--sglang-url=http://127.0.0.1:{port}", "--sglang-startup-timeout=60", "test_body.py"],
                              cwd=workdir, env={**os.environ, "BENCH_BODY_FILE": str(body)}, capture_output=True,
                              text=True, timeout=180)
        if done.returncode != 0:
            raise SystemExit(f"pytest failed:\n{done.stdout}{done.stderr}")
        events = [json.loads(line) for line in trace.read_text().splitlines()]
        up = next(e["perf"] for e in events if e.get("event") == "server_up")
        opened = next(e["perf"] for e in events if e.get("event") == "port_open")
        reached = float(body.read_text())
        if up - opened < 1.0 or reached - opened < warmup_s:  # pragma: no cover - a machine too busy to measure
            print(f"note: pytest may not have been waiting when the server turned Up ({reached - opened:.1f} s)")
        return reached - up
    finally:
        sim.terminate()
        sim.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--plugin-runs", type=int, default=5, help="pytest --sglang-url runs (0: skip)")
    parser.add_argument("--time-scale", type=float, default=0.05)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-readiness-") as tmp:
        work = Path(tmp)
        (work / "pytest.ini").write_text("[pytest]\n")
        (work / "test_body.py").write_text(_BODY_TEST)
        ready = [readiness_lag(work, opts.time_scale) for _ in range(opts.runs)]
        crash = [crash_lag(work, opts.time_scale) for _ in range(opts.runs)]
        attached = [attach_lag(work, opts.time_scale) for _ in range(opts.plugin_runs)]
    rows = [
        ("readiness lag (Up -> launch() returns)", ready, READY_TARGET_S),
        ("crash lag (SIGKILL -> ServerExited)", crash, CRASH_TARGET_S),
        *([("attach lag (Up -> test body, pytest)", attached, READY_TARGET_S)] if attached else []),
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
