"""Helpers for the plugin's end-to-end tests (pytester + the simulator as a real subprocess)."""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil

from pytest_sglang.server import ledger

#: The simulator's smallest profile at a compressed time scale: starts in well under a second.
SIM_LAUNCH = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05"
OWNER_ENV = "PYTEST_SGLANG_OWNER"


def owned_by(pid: int) -> list[psutil.Process]:
    """Live processes started by the pytest process ``pid``: tagged with the owner marker, or recorded in
    the run's ledger (smg writes its title over its environment, and the marker with it)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(OWNER_ENV, "").startswith(f"{pid}:"):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    pids = {proc.pid for proc in found}
    for entry in ledger.running():
        if entry.owner_pid == pid and entry.pid not in pids:
            try:
                found.append(psutil.Process(entry.pid))
            except psutil.Error:
                continue
    return found


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
