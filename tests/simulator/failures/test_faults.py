"""Each ``--sim-fault`` and the /health semantics (503 while Starting, 1-token generation, env switch)."""

from __future__ import annotations

import signal
import time

import httpx
import pytest

from tests.conftest import SimFactory


def _exit_code(sim_factory: SimFactory, *args: str) -> tuple[int | None, str]:
    sim = sim_factory(*args, wait="none")
    assert sim.proc is not None
    code = sim.proc.wait(20)
    return code, sim.log_text()


def test_crash_at_phase(sim_factory: SimFactory) -> None:
    code, log = _exit_code(sim_factory, "--sim-fault", "crash-at:weights")
    assert code == 1
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert (
        "RuntimeError: simulated crash during startup phase 'weights' (--sim-fault crash-at:weights)" in log
    )
    assert "Received sigquit from a child process" in log and "Uvicorn running" not in log


def test_oom_kill_at_phase(sim_factory: SimFactory) -> None:
    code, log = _exit_code(sim_factory, "--sim-fault", "oom-kill-at:kv_cache")
    assert code == -signal.SIGKILL
    assert "Rank 0 scheduler died during initialization (exit code: -9)" in log


def test_hang_at_warmup_keeps_health_503(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "hang-at:warmup", wait="port")
    time.sleep(0.5)
    assert httpx.get(f"{sim.url}/health").status_code == 503
    assert httpx.get(f"{sim.url}/server_info").status_code == 200  # answers before warmup, like SGLang
    assert "ready to roll" not in sim.log_text()


def test_health_is_503_while_starting_then_waits_one_simulated_second(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-time-scale", "1", "--sim-fault", "hang-at:warmup", wait="port")
    r = httpx.get(f"{sim.url}/health")
    assert (r.status_code, r.content, r.headers["content-length"]) == (503, b"", "0")
    up = sim_factory("--sim-time-scale", "0.5")
    t0 = time.perf_counter()
    assert httpx.get(f"{up.url}/health").status_code == 200
    assert time.perf_counter() - t0 >= 0.45  # SGLang polls every 1 s; x time scale 0.5


def test_health_without_generation(sim_factory: SimFactory) -> None:
    sim = sim_factory(
        "--sim-time-scale",
        "1",
        "--sim-fault",
        "never-healthy",
        env={"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "false", "SGLANG_HEALTH_CHECK_TIMEOUT": "2"},
        wait="port",
    )
    deadline = time.monotonic() + 10
    while httpx.get(f"{sim.url}/ready").status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    # never-healthy makes every generating probe end 503: a 200 proves /health did not generate.
    # (No timing assertion: "answered at once" cannot be told from load on a busy 2-core machine.)
    assert httpx.get(f"{sim.url}/health").status_code == 200
    assert httpx.get(f"{sim.url}/health_generate", timeout=30).status_code == 503


def test_never_healthy(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "never-healthy", env={"SGLANG_HEALTH_CHECK_TIMEOUT": "4"}, wait="port")
    time.sleep(0.5)
    assert httpx.get(f"{sim.url}/health", timeout=10).status_code == 503
    assert "Health check failed. Server couldn't get a response from detokenizer" in sim.log_text()
    assert httpx.get(f"{sim.url}/ready").status_code == 503  # UnHealthy now


def test_unhealthy_after(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "unhealthy-after:20", env={"SGLANG_HEALTH_CHECK_TIMEOUT": "2"})
    assert httpx.get(f"{sim.url}/health").status_code == 200
    time.sleep(1.1)  # 20 simulated s x 0.05
    assert httpx.get(f"{sim.url}/health", timeout=10).status_code == 503


def test_slow_health(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "slow-health:20")
    t0 = time.perf_counter()
    assert httpx.get(f"{sim.url}/health", timeout=10).status_code == 200
    assert time.perf_counter() - t0 >= 0.9  # 20 simulated s x 0.05


@pytest.mark.parametrize(
    ("mode", "check"),
    [
        ("missing-field", lambda r: "max_total_num_tokens" not in r.json()),
        ("wrong-type", lambda r: isinstance(r.json()["max_total_num_tokens"], str)),
        ("not-json", lambda r: r.headers["content-type"].startswith("text/html")),
    ],
)
def test_server_info_faults(sim_factory: SimFactory, mode: str, check: object) -> None:
    sim = sim_factory("--sim-fault", f"server-info:{mode}")
    r = httpx.get(f"{sim.url}/server_info")
    assert r.status_code == 200 and check(r)  # type: ignore[operator]


def test_drop_stream_and_error_rate(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "drop-stream-after:3")
    body = {"text": "hi", "stream": True, "sampling_params": {"max_new_tokens": 10}}
    with pytest.raises(httpx.RemoteProtocolError):
        with httpx.stream("POST", f"{sim.url}/generate", json=body) as r:
            for _line in r.iter_lines():
                pass
    failing = sim_factory("--sim-fault", "error-rate:1")
    r = httpx.post(f"{failing.url}/v1/completions", json={"prompt": "hi"})
    assert r.status_code == 500 and r.json()["type"] == "InternalServerError"
    assert "--sim-fault error-rate:1" in r.json()["message"]
