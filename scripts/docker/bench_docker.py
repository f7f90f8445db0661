"""Measure the docker runner against the simulator runner on this machine (medians of N runs).

    python scripts/docker/bench_docker.py [--runs 5]

Needs a running engine and the local image (scripts/docker/engine.sh, build-image.sh). Prints:
ready time (launch -> fixture returns) for both runners, the crash-detection lag (the engine's
FinishedAt of the container -> ``exit_status()`` answers), the OOM-kill report time, and stop+remove.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "docker"))

from dockerhelp import IMAGE, SIM_ARGS, host_volumes, sim_command

from pytest_sglang.errors import ServerExited
from pytest_sglang.server import launch
from pytest_sglang.server.config import DockerOptions, LaunchConfig
from pytest_sglang.server.docker.runner import DockerRunner


def _config(runner: str, *extra: str, memory: str | None = None) -> LaunchConfig:
    docker = DockerOptions(image=IMAGE, gpus="none", shm_size="64m", volumes=host_volumes(), pull="never",
                           memory=memory) if runner == "docker" else None
    return LaunchConfig(runner=runner, args=(*SIM_ARGS, *extra), docker=docker, preflight=False,
                        command=sim_command() if runner == "docker" else None, startup_timeout_s=60)


def ready_and_stop(runner: str) -> tuple[float, float]:
    started = time.monotonic()
    server = launch(_config(runner))
    ready = time.monotonic() - started
    started = time.monotonic()
    server.stop()
    return ready, time.monotonic() - started


def crash_lag() -> float:
    """Seconds from the container's exit (engine clock) to ``exit_status()`` reporting it."""
    handle = DockerRunner().start(_config("docker", "--sim-fault", "crash-at:weights"), 30000,
                                  Path(tempfile.mkdtemp()) / "crash.log")
    try:
        while handle.exit_status() is None:
            time.sleep(0.005)
        seen = time.time()
        handle.container.reload()
        finished = handle.container.attrs["State"]["FinishedAt"]
        # The engine prints nanoseconds: keep microseconds for datetime.
        head, _, frac = finished.rstrip("Z").partition(".")
        exited = datetime.fromisoformat(f"{head}.{frac[:6]}+00:00").timestamp()
        return seen - exited
    finally:
        handle.stop(0)


def oom_report() -> float:
    started = time.monotonic()
    try:
        launch(_config("docker", "--enable-hierarchical-cache", "--hicache-size", "16",
                       "--sim-host-alloc-scale", "0.03", memory="256m"))
    except ServerExited as exc:
        assert "out-of-memory killer" in str(exc)
        return time.monotonic() - started
    raise AssertionError("the container was not OOM-killed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args(argv).runs
    med = statistics.median
    sim = [ready_and_stop("simulator") for _ in range(runs)]
    dock = [ready_and_stop("docker") for _ in range(runs)]
    lags = [crash_lag() for _ in range(runs)]
    ooms = [oom_report() for _ in range(runs)]
    print(f"runs={runs} (medians)")
    print(f"{'':28}{'simulator':>12}{'docker':>12}{'ratio':>8}")
    for name, i in (("ready (s)", 0), ("stop + remove (s)", 1)):
        a, b = med(x[i] for x in sim), med(x[i] for x in dock)
        print(f"{name:28}{a:12.3f}{b:12.3f}{b / a:8.1f}")
    print(f"{'crash detection lag (s)':28}{'':12}{med(lags):12.3f}   (max {max(lags):.3f})")
    print(f"{'OOM kill reported after (s)':28}{'':12}{med(ooms):12.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
