"""Ctrl-C (SIGINT) and SIGTERM to pytest, during start-up and during tests, leave no process behind."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from plugin_helpers import SIM_LAUNCH, owned_by, wait_for


def _start(pytester: pytest.Pytester, *args: str) -> subprocess.Popen[bytes]:
    pytester.copy_example("test_sleepy.py")
    with open(pytester.path / "out.txt", "wb") as out:
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--sglang-simulate", *args]
        return pytester.popen(argv, stdout=out, stderr=subprocess.STDOUT)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_startup_leaves_nothing(pytester: pytest.Pytester, sig: signal.Signals) -> None:
    # hang-at keeps the server in its start-up phases until the signal arrives.
    proc = _start(pytester, f"--sglang-launch={SIM_LAUNCH} --sim-fault hang-at:weights")
    wait_for(lambda: bool(owned_by(proc.pid)), 60, "the server process to start")
    proc.send_signal(sig)
    assert proc.wait(timeout=60) != 0
    assert owned_by(proc.pid) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_tests_leaves_nothing(pytester: pytest.Pytester, sig: signal.Signals) -> None:
    proc = _start(pytester, f"--sglang-launch={SIM_LAUNCH}")
    wait_for(lambda: (pytester.path / "server-ready.txt").exists(), 60, "the test to hold the server")
    assert owned_by(proc.pid)
    proc.send_signal(sig)
    assert proc.wait(timeout=60) != 0
    assert owned_by(proc.pid) == []
