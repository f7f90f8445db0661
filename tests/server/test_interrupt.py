"""Ctrl-C and SIGTERM to the owning process during a start leave no server process behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from simlaunch import FAST

from pytest_sglang.server.runner import OWNER_ENV, marked_processes

OWNER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from pytest_sglang.server import LaunchConfig, launch
    cfg = LaunchConfig(runner="simulator", args=tuple(sys.argv[2:]), log_dir=Path(sys.argv[1]),
                       startup_timeout_s=120)
    try:
        launch(cfg)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        raise SystemExit(130)
""")


def _children_of(owner_pid: int) -> list[psutil.Process]:
    out = []
    for proc, marker in marked_processes(OWNER_ENV):
        try:
            if marker.startswith(f"{owner_pid}:") and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.Error:
            continue
    return out


def _wait(predicate: object, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM)])
def test_signal_during_startup_leaves_nothing(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path), *FAST, "--sim-fault", "hang-at:weights"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert _wait(lambda: any("Load weight begin" in p.read_text() for p in tmp_path.glob("*.log")))
        assert _children_of(owner.pid)
        owner.send_signal(sig)
        assert owner.wait(timeout=30) == code
    finally:
        if owner.poll() is None:
            owner.kill()
        assert owner.stdout is not None
        out = owner.stdout.read()
        owner.stdout.close()
    assert ("interrupted" in out) == (sig == signal.SIGINT)
    assert _wait(lambda: _children_of(owner.pid) == [], timeout=10)


@pytest.mark.parametrize("entry", ["spawn", "start_gateway"])
def test_ctrl_c_inside_popen_stops_the_child_whose_handle_it_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   entry: str) -> None:
    import os
    import uuid

    from pytest_sglang.fleet.gateway import start_gateway
    from pytest_sglang.server.runner import LAUNCH_ENV, spawn

    real = subprocess.Popen
    started: list[subprocess.Popen[bytes]] = []

    def interrupted(*args: object, **kwargs: object) -> None:
        """The child runs, then the Ctrl-C lands before Popen returns its handle."""
        started.append(real(*args, **kwargs))  # type: ignore[call-overload]
        raise KeyboardInterrupt

    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    monkeypatch.setattr(subprocess, "Popen", interrupted)
    with pytest.raises(KeyboardInterrupt):
        if entry == "spawn":
            launch_id = uuid.uuid4().hex
            with open(tmp_path / "log", "ab") as log:
                spawn(argv, log=log, env={**os.environ, LAUNCH_ENV: launch_id}, launch_id=launch_id)
        else:
            start_gateway(argv, url="http://127.0.0.1:1", log_path=tmp_path / "gateway.log", env={})
    monkeypatch.undo()
    assert len(started) == 1
    assert started[0].wait(timeout=15) is not None  # stopped, not left running: nothing else held it
