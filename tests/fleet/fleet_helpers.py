"""Helpers of tests/fleet: SGLang's real gateways (smg, sglang-router) in front of simulator workers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from tests.plugin.plugin_helpers import owned_by, wait_for

ROOT = Path(__file__).resolve().parents[2]
GATEWAY_FIXTURES = ROOT / "fixtures" / "gateway"
#: The simulator's smallest profile at a compressed time scale (a worker starts in about a second).
SIM_LAUNCH = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05"
#: A gateway that notices a dead worker within about a second (the default interval is 60 s).
FAST_HEALTH = "--health-check-interval-secs 1 --health-failure-threshold 1"


def smg_command() -> str:
    """``smg launch`` from this venv (the ``gateway`` extra), as --sglang-gateway-command text."""
    smg = shutil.which("smg", path=str(Path(sys.executable).parent))
    assert smg is not None, "smg is not installed in this venv: pip install -e '.[dev]' (it pulls the gateway extra)"
    return f"{smg} launch"


def load_fixture(name: str) -> dict[str, Any]:
    """``fixtures/gateway/<name>.json``."""
    data: dict[str, Any] = json.loads((GATEWAY_FIXTURES / f"{name}.json").read_text())
    return data


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])




@dataclass
class Gateway:
    """A gateway this test started itself (not through the plugin), in its own session."""

    popen: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def workers(self) -> list[dict[str, Any]]:
        body: dict[str, Any] = httpx.get(f"{self.url}/workers", timeout=5, trust_env=False).json()
        workers: list[dict[str, Any]] = body["workers"]
        return workers

    def wait_ready(self, healthy: int, timeout_s: float = 60.0) -> None:
        """Until ``/readiness`` is 200 and ``healthy`` workers are listed healthy."""
        def ready() -> bool:
            try:
                if httpx.get(f"{self.url}/readiness", timeout=5, trust_env=False).status_code != 200:
                    return False
                return sum(w["is_healthy"] for w in self.workers()) >= healthy
            except httpx.HTTPError:
                return False

        try:
            wait_for(ready, timeout_s, f"gateway {self.url} with {healthy} healthy workers")
        except AssertionError:
            raise AssertionError(f"gateway not ready; its log:\n{self.log_path.read_text()[-3000:]}") from None

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)  # ours alone; smg's graceful stop takes 5 s
        self.popen.wait(10)


def start_gateway(command: str, worker_urls: Sequence[str], log_dir: Path, *extra: str) -> Gateway:
    """Start ``command`` (``smg launch`` or the router module) in front of ``worker_urls`` on free ports."""
    port = free_port()
    argv = [*command.split(), "--host", "127.0.0.1", "--port", str(port), "--prometheus-host", "127.0.0.1",
            "--prometheus-port", str(free_port()), "--worker-urls", *worker_urls, *extra]
    log_path = log_dir / f"gateway-{port}.log"
    with log_path.open("wb") as log:
        popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
    return Gateway(popen, f"http://127.0.0.1:{port}", log_path)


INNER = Path(__file__).parent / "inner"


@dataclass
class InnerRun:
    """A pytest run in a subprocess whose pid is known (to find the processes it left behind)."""

    pid: int
    returncode: int
    lines: list[str]

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def fnmatch_lines(self, patterns: list[str], consecutive: bool = False) -> None:
        import pytest

        pytest.LineMatcher(self.lines).fnmatch_lines(patterns, consecutive=consecutive)

    def leftovers(self, timeout_s: float = 10.0) -> list[str]:
        """Processes still carrying this run's owner marker after ``timeout_s`` (empty when all ended)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = owned_by(self.pid)
            if not left or time.monotonic() >= deadline:
                return [_describe(p) for p in left]
            time.sleep(0.1)


def _describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid}: {' '.join(proc.cmdline())}"
    except psutil.Error:
        return f"pid {proc.pid}"


def copy_inner(directory: Path, name: str) -> Path:
    """``tests/fleet/inner/<name>.py`` as ``test_<name>.py`` in ``directory``."""
    target = directory / f"test_{name}.py"
    target.write_text((INNER / f"{name}.py").read_text())
    return target


def run_inner(directory: Path, *args: str, env: dict[str, str] | None = None, timeout_s: float = 300.0,
              on_line: Callable[[str, subprocess.Popen[str]], None] | None = None) -> InnerRun:
    """``python -m pytest ARGS`` in ``directory`` (its own basetemp); ``on_line`` sees each output line."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--basetemp={directory / 'basetemp'}", *args]
    lines: list[str] = []
    with subprocess.Popen(argv, cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL) as popen:
        killer = threading.Timer(timeout_s, popen.kill)
        killer.start()
        try:
            assert popen.stdout is not None
            for line in popen.stdout:
                lines.append(line.rstrip("\n"))
                if on_line is not None:
                    on_line(lines[-1], popen)
            returncode = popen.wait()
        finally:
            killer.cancel()
    if returncode == -signal.SIGKILL:
        raise AssertionError(f"inner pytest did not end within {timeout_s}s:\n" + "\n".join(lines[-40:]))
    return InnerRun(popen.pid, returncode, lines)
