"""Startup phases, SGLang's log lines (Appendix B regexes), the port, and launch-flag parsing."""

from __future__ import annotations

import http.server
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

import pytest_sglang.simulator as simulator_module
from pytest_sglang.simulator import Simulator
from tests.conftest import FAST, SimFactory

APPENDIX_B = {
    "weights_begin": r"Load weight begin\. avail mem=([\d.]+) GB",
    "shards_progress": r"Loading safetensors checkpoint shards:\s+(\d+)% Completed \| (\d+)/(\d+)",
    "weights_end": r"Load weight end\.",
    "kv_alloc": r"KV Cache is allocated\.(?:.*?#tokens: (\d+))?",
    "mem_pool_end": r"Memory pool end\. avail mem=([\d.]+) GB",
    "graph_begin": r"Capture .*?[Gg]raph begin",
    "graph_end": r"Capture .*?[Gg]raph end",
    "max_tokens_full": r"max_total_num_tokens=(\d+)(?:, chunked_prefill_size=(-?\d+))?, "
    r"max_prefill_tokens=(\d+), "
    r"max_running_requests=(\d+), context_len=(\d+)",
    "uvicorn_up": r"Uvicorn running on (\S+)",
    "ready": r"The server is fired up and ready to roll!",
}
HICACHE_ALLOC = (
    r"Allocating (?:(\w+) hierarchical KV host pool: (\d+) tokens, ([\d.]+) GB host memory|([\d.]+) GB "
    r"host memory for hierarchical KV cache)"
)
HICACHE_OOM = r"Not enough host memory available\. Requesting ([\d.]+) GB but only have ([\d.]+) GB free"
CHILD_FAILED = (
    r"Received sigquit from a child process|Scheduler hit an exception|scheduler died during initialization"
)
KIMI = ("--model-path", "moonshotai/Kimi-K2.5", "--sim-profile", "kimi-k2.5-rtx6000x8", "--tp", "8",
        "--sim-time-scale", "0.002")


def _positions(log: str, patterns: dict[str, str]) -> dict[str, int]:
    out = {}
    for name, pattern in patterns.items():
        m = re.search(pattern, log)
        assert m, f"{name} ({pattern}) not in log:\n{log[-3000:]}"
        out[name] = m.start()
    return out


def test_phases_in_order_and_capacity_line(sim_factory: SimFactory) -> None:
    sim = sim_factory("--max-total-tokens", "4096")
    log = sim.log_text()
    pos = _positions(log, APPENDIX_B)
    assert list(pos) == sorted(pos, key=pos.__getitem__), "phase lines out of order"
    m = re.search(APPENDIX_B["max_tokens_full"], log)
    assert m and m.group(1) == "4096" and m.group(4) == "2048"
    # 0.5.23 at tp=1: scheduler lines carry no rank prefix (TP0 appears only when tp > 1)
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] max_total_num_tokens=4096", log, re.M)
    assert " TP0]" not in log
    assert f"Uvicorn running on http://127.0.0.1:{sim.port} (Press CTRL+C to quit)" in log
    assert 'POST /generate HTTP/1.1" 200 OK' in log  # the warmup request
    info = httpx.get(f"{sim.url}/server_info").json()
    assert info["max_total_num_tokens"] == 4096


def test_skip_server_warmup_and_dummy_weights(sim_factory: SimFactory) -> None:
    log = sim_factory("--skip-server-warmup", "--load-format", "dummy").log_text()
    assert "The server is fired up and ready to roll!" in log
    assert "POST /generate" not in log and "Prefill batch" not in log
    assert "Loading safetensors checkpoint shards" not in log


def test_port_stays_closed_during_phases(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "hang-at:cuda_graph", wait="none")
    sim.timeout_s = 1.5
    with pytest.raises(RuntimeError, match="not port"):
        sim._wait_for("port")
    assert "Capture target prefill CUDA graph begin" in sim.log_text()


def test_kimi_hicache_48_starts_with_8_host_pools(sim_factory: SimFactory) -> None:
    sim = sim_factory(
        *KIMI, "--enable-hierarchical-cache", "--hicache-size", "48", "--skip-server-warmup", fast=False
    )
    log = sim.log_text()
    pools = re.findall(HICACHE_ALLOC, log)
    assert len(pools) == 8 and {p[0] for p in pools} == {"kv"} and {p[2] for p in pools} == {"48.00"}
    assert [f"TP{i}]" in log for i in range(8)] == [True] * 8
    m = re.search(APPENDIX_B["max_tokens_full"], log)
    assert m and 115_000 < int(m.group(1)) < 117_500
    assert len(re.findall(r"Loading safetensors checkpoint shards:\s+\d+% Completed \| \d+/64", log)) == 64


def _run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_sglang.simulator", *argv, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_kimi_hicache_300_is_refused_before_the_port_opens() -> None:
    proc = _run(*KIMI, "--enable-hierarchical-cache", "--hicache-size", "300")
    assert proc.returncode == -9  # real 0.5.23: the launcher kills its own tree (reference §9)
    assert re.search(HICACHE_OOM, proc.stderr)
    assert "Scheduler hit an exception: Traceback (most recent call last):" in proc.stderr
    assert (
        "ValueError: Not enough host memory available. Requesting 300.00 GB but only have 50.91 GB free. "
        "Please reduce the size of the hierarchical cache."
    ) in proc.stderr
    assert "Received sigquit from a child process. It usually means the child failed." in proc.stderr
    assert "Uvicorn running" not in proc.stderr and "Allocating" not in proc.stderr


def test_legacy_hicache_check_ends_in_sigkill() -> None:
    proc = _run(*KIMI, "--enable-hierarchical-cache", "--hicache-size", "300", "--sim-legacy-hicache-check")
    assert proc.returncode == -signal.SIGKILL
    assert len(re.findall(HICACHE_ALLOC, proc.stderr)) == 1  # rank 0 pinned 300 GB, rank 1 was killed
    assert "Rank 1 scheduler died during initialization (exit code: -9)" in proc.stderr
    assert re.search(CHILD_FAILED, proc.stderr) and "Uvicorn running" not in proc.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--tp", "abc"), "argument --tp-size/--tensor-parallel-size: invalid int value: 'abc'"),
        (("--pp", "2"), "ambiguous option: --pp could match"),
        (
            ("--sim-fault", "crash-at:nowhere"),
            "--sim-fault 'crash-at:nowhere': phase 'nowhere' is not one of weights",
        ),
    ],
)
def test_malformed_flags_exit_2(argv: tuple[str, ...], message: str) -> None:
    proc = _run(*argv, timeout=20)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_unmodelled_sglang_flags_warn_once(sim_factory: SimFactory) -> None:
    log = sim_factory("--attention-backend", "triton", "--disable-cuda-graph").log_text()
    assert (
        log.count(
            "--attention-backend is an SGLang 0.5.23 flag that the simulator accepts but does not simulate"
        )
        == 1
    )
    assert "--disable-cuda-graph is an SGLang 0.5.23 flag" not in log  # modelled now: no warning
    # A flag that is not SGLang's is rejected as SGLang rejects it: tests/simulator/launch/test_cli.py.


def test_a_foreign_server_on_the_picked_port_is_not_taken_for_the_simulator(tmp_path: Path) -> None:
    # Another process binds the port picked free before the simulator does, and answers /health 200:
    # that answer must not count. The simulator fails to bind, exits, and starts again on another port.
    sim = Simulator(list(FAST), log_path=tmp_path / "sim.log", timeout_s=30)
    taken = sim.port

    class Healthy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    foreign = http.server.HTTPServer((sim.host, taken), Healthy)
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    try:
        with sim:
            assert sim.port != taken and sim.url == f"http://127.0.0.1:{sim.port}"
            assert "address already in use" in sim.log_text().lower()
            info = httpx.get(f"{sim.url}/server_info", timeout=10).json()
            assert info["port"] == sim.port  # the simulator's own answer, not the foreign server's
    finally:
        foreign.shutdown()
        foreign.server_close()


def test_a_port_taken_at_every_attempt_fails_with_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    port = blocker.getsockname()[1]
    monkeypatch.setattr(simulator_module, "free_port", lambda host="127.0.0.1": port)
    try:
        with pytest.raises(RuntimeError, match=r"simulator exited with code \d+ before healthy") as info:
            Simulator(list(FAST), log_path=tmp_path / "sim.log", timeout_s=30).start()
    finally:
        blocker.close()
    assert "address already in use" in str(info.value).lower()
    assert (tmp_path / "sim.log").read_text().lower().count("address already in use") == simulator_module.PORT_ATTEMPTS
