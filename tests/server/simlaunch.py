"""Helpers for launching the simulator through the engine (real subprocesses, tiny profile, fast clock)."""

from __future__ import annotations

from pathlib import Path

import psutil

from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.runner import LAUNCH_ENV, OWNER_ENV, RUN_ID, marked_processes

#: Simulated durations x 0.05: a start takes ~0.5 s of wall time on an idle machine.
FAST = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05")


def sim_config(tmp_path: Path, *args: str, timeout: float = 60.0, **kwargs: object) -> LaunchConfig:
    return LaunchConfig(
        runner="simulator", args=(*FAST, *args), startup_timeout_s=timeout, log_dir=tmp_path, **kwargs
    )  # type: ignore[arg-type]


def live(pids_of: str = RUN_ID) -> list[psutil.Process]:
    """Our run's marked processes that are still alive (zombies do not count)."""
    out = []
    for proc, marker in marked_processes(OWNER_ENV):
        try:
            if marker.endswith(pids_of) and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.Error:
            continue
    return out


def launched(launch_id: str) -> list[psutil.Process]:
    return [p for p, _ in marked_processes(LAUNCH_ENV, launch_id)]
