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


def _output(pytester: pytest.Pytester) -> str:
    return (pytester.path / "out.txt").read_text(errors="replace")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_startup_leaves_nothing(pytester: pytest.Pytester, sig: signal.Signals) -> None:
    # hang-at keeps the server in its start-up phases until the signal arrives.
    proc = _start(pytester, f"--sglang-launch={SIM_LAUNCH} --sim-fault hang-at:weights")
    wait_for(lambda: bool(owned_by(proc.pid)) or proc.poll() is not None, 120, "the server process to start")
    assert proc.poll() is None, _output(pytester)  # pytest ended early: show why
    proc.send_signal(sig)
    assert proc.wait(timeout=60) != 0
    assert owned_by(proc.pid) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_tests_leaves_nothing(pytester: pytest.Pytester, sig: signal.Signals) -> None:
    proc = _start(pytester, f"--sglang-launch={SIM_LAUNCH}")
    ready = pytester.path / "server-ready.txt"
    # A deadline, not a timing claim: generous for a busy machine, cut short if pytest ends early.
    wait_for(lambda: ready.exists() or proc.poll() is not None, 120, "the test to hold the server")
    assert ready.exists(), _output(pytester)
    assert owned_by(proc.pid)
    proc.send_signal(sig)
    assert proc.wait(timeout=60) != 0
    assert owned_by(proc.pid) == []
