"""Signals to pytest leave no real SGLang process behind: Ctrl-C while the server starts (scheduler
already spawned), SIGTERM while a test uses it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from realsgl import RealSetup, launch_options, sglang_processes

pytestmark = pytest.mark.real_sglang


def test_sigint_during_real_startup_leaves_nothing(
    pytester: pytest.Pytester, inner_file: Callable[[str], Path], real_setup: RealSetup,
    leftover_check: None,
) -> None:
    since = time.time()
    inner_file("crash")  # its tests never run: pytest is interrupted while the server starts
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
            *launch_options(real_setup, pytester.path / "logs")]
    with (pytester.path / "outer.log").open("w") as out:
        proc = pytester.popen(argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not any("sglang::scheduler" in p for p in sglang_processes(real_setup, since)):
            running = proc.poll() is None and time.monotonic() < deadline
            assert running, (pytester.path / "outer.log").read_text()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (pytester.path / "outer.log").read_text(errors="replace")
    assert rc != 0, log
    assert "KeyboardInterrupt" in log or "Interrupted" in log, log


def test_sigterm_during_a_test_leaves_nothing(
    pytester: pytest.Pytester, inner_file: Callable[[str], Path], real_setup: RealSetup,
    leftover_check: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    flag = pytester.path / "holding"
    monkeypatch.setenv("REAL_HOLD_FLAG", str(flag))
    inner_file("hold")
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
            *launch_options(real_setup, pytester.path / "logs")]
    with (pytester.path / "outer.log").open("w") as out:
        proc = pytester.popen(argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not flag.exists():
            running = proc.poll() is None and time.monotonic() < deadline
            assert running, (pytester.path / "outer.log").read_text()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc != 0, (pytester.path / "outer.log").read_text()
