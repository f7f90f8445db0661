"""A server that dies during a load: the gate says so first (and how), not "raise server capacity"."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from loadgen.loadgen_fake import FakeServer
from pytest_sglang.gates.load.throughput import run_marker as throughput_marker
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen import run_load
from pytest_sglang.server.base import ExitStatus


def test_attached_server_that_stops_listening(fake_server: FakeServer) -> None:
    fake_server.behaviour.step_s = 0.05
    ctx = GateContext(server=None, load=lambda spec: run_load(fake_server.url, spec))
    timer = threading.Timer(0.5, fake_server.stop_listening)
    timer.start()
    try:
        outcome = throughput_marker(ctx, min_output_tok_s=1, requests=100, concurrency=2, input_len=8, output_len=4)
    finally:
        timer.cancel()
    message = outcome.message()
    head = message.splitlines()[0]
    assert head.startswith("sglang throughput gate failed: server refused connections from t=0."), head
    assert " s into the load (" in head and " requests) (required == running); max_error_rate=0.0: measured " in head
    assert message.splitlines()[-1] == (
        "Fix: the server died or restarted during the load: read its log; no figure of this load can be judged; "
        "read the failed requests' reasons above (integrity is always checked)"
    )
    assert "raise server capacity" not in message
    assert outcome.checks[0].metric == "server"


class Launched:
    """The parts of SGLangServer the gate reads, for a simulator this test launched and killed."""

    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log_path = log

    def exit_status(self) -> ExitStatus | None:
        code = self.proc.poll()
        return None if code is None else ExitStatus.from_returncode(code)

    def describe(self) -> str:
        return f"SGLangServer mode=simulator, pid {self.proc.pid}"


def test_launched_server_killed_mid_load(sim_factory: Any) -> None:
    sim = sim_factory("--sim-decode-step-ms", "200", "--sim-decode-step-per-req-ms", "0")
    server = Launched(sim.proc, sim.log_path)
    ctx = GateContext(server=server, load=lambda spec: run_load(sim.url, spec))
    timer = threading.Timer(0.5, os.kill, (sim.proc.pid, signal.SIGKILL))
    timer.start()
    try:
        outcome = throughput_marker(ctx, min_output_tok_s=1, requests=200, concurrency=4, input_len=16,
                                    output_len=16)
    finally:
        timer.cancel()
    sim.proc.wait(10)
    lines = outcome.message().splitlines()
    assert lines[0].startswith("sglang throughput gate failed: server died during the load (killed by SIGKILL: "
                               "most likely the out-of-memory killer"), lines[0]
    assert lines[1].startswith(f"  server: measured died during the load (killed by SIGKILL: most likely the "
                               f"out-of-memory killer (check `dmesg -T | grep -i oom`)), required == running "
                               f"[SGLangServer mode=simulator, pid {sim.proc.pid}]: FAILED")
    assert "raise server capacity" not in outcome.message()
    assert lines[-1].startswith("Fix: read the server log, ") or lines[-1].startswith("Fix: ")
    assert str(sim.log_path) in outcome.message() or "dmesg" in outcome.message()
    result_kinds = outcome.context["integrity"]
    assert "'refused'" in result_kinds or "'truncated'" in result_kinds
