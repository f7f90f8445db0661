"""The engine against real simulator subprocesses, without the pytest plugin (plain function calls)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from simlaunch import live, sim_config

from pytest_sglang import redaction
from pytest_sglang.errors import PreflightError, SchemaMismatch, ServerExited, ServerNotReady
from pytest_sglang.server import attach, launch
from pytest_sglang.server.runner import ExitStatus
from pytest_sglang.server.validation import SchemaWarning


@pytest.fixture(autouse=True)
def _nothing_left_behind() -> object:
    yield
    deadline = time.monotonic() + 5
    while live() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live() == [], "a test left a server process running"


def test_launch_ready_validated_and_stopped(tmp_path: Path) -> None:
    lines: list[str] = []

    class Sink:
        def update(self, state: object) -> None:
            lines.append(state.phase)

        def done(self, report: object) -> None:
            lines.append("done")

    with launch(sim_config(tmp_path, "--enable-metrics"), progress=Sink()) as server:
        assert server.mode == "simulator" and re.fullmatch(r"http://127\.0\.0\.1:\d+", server.url)
        info = server.info()
        assert server.startup is not None
        assert server.startup.max_total_num_tokens == info["max_total_num_tokens"] > 0
        assert server.startup.phase == "ready" and server.startup.ready_s is not None
        assert server.health() == 200 and server.exit_status() is None
        assert "sglang:num_running_reqs" in server.metrics()
        assert server.log_tail(5) and server.log_path is not None and server.log_path.parent == tmp_path
        assert server.launch_args is not None and server.launch_args.enable_metrics
        with server.client() as client:
            assert client.get("/v1/models").status_code == 200
        assert len(live()) >= 1
    assert lines[-1] == "done" and "loading weights" in lines
    assert server.exit_status() is not None and live() == []
    assert server.stop() == server.exit_status()


def test_attach_to_a_launched_simulator_never_stops_it(tmp_path: Path) -> None:
    server = launch(sim_config(tmp_path))
    try:
        with attach(server.url) as attached:
            assert attached.mode == "attach" and attached.info()["version"]
            assert attached.stop() is None
        assert server.health() == 200
    finally:
        server.stop()


@pytest.mark.parametrize("phase", ["weights", "kv_cache", "cuda_graph", "uvicorn", "warmup"])
def test_crash_at_phase_is_server_exited(tmp_path: Path, phase: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(ServerExited) as excinfo:
        launch(sim_config(tmp_path, "--sim-fault", f"crash-at:{phase}"))
    assert time.monotonic() - t0 < 30
    message = str(excinfo.value)
    lines = message.splitlines()
    assert re.match(
        r"SGLang server http://127\.0\.0\.1:\d+ \(mode=simulator, pid \d+\) exited before it was ready: "
        r"(exited with code \d+|killed by \w+)",
        lines[0],
    ), lines[0]
    assert lines[1].startswith("Phase reached: ")
    assert f"(--sim-fault crash-at:{phase})" in message  # the simulated traceback's last line is quoted
    assert re.search(r"^Last \d+ lines of .*sglang-\d+\.log:$", message, re.M)
    assert lines[-1].startswith("Fix: ")
    assert excinfo.value.exit_status is not None  # type: ignore[attr-defined]


@pytest.mark.parametrize("phase", ["weights", "hicache"])
def test_oom_kill_is_explained(tmp_path: Path, phase: str) -> None:
    args = ("--enable-hierarchical-cache", "--hicache-size", "1") if phase == "hicache" else ()
    with pytest.raises(ServerExited) as excinfo:
        launch(sim_config(tmp_path, *args, "--sim-fault", f"oom-kill-at:{phase}"))
    message = str(excinfo.value)
    assert (
        "most likely the out-of-memory killer" in message.splitlines()[0]
        or "most likely by the out-of-memory killer" in message
    )
    assert (
        "Known fatal line: " in message and "scheduler died during initialization (exit code: -9)" in message
    )


def test_oom_kill_of_the_launcher_itself_says_sigkill(tmp_path: Path) -> None:
    """A SIGKILLed launcher with no explaining log line: the exit status alone is the evidence."""
    config = sim_config(tmp_path, "--sim-fault", "hang-at:weights", timeout=30)
    started = time.monotonic()
    import threading

    from pytest_sglang.server import runner as runner_module

    real_start = runner_module.SimulatorRunner.start

    def start_then_kill(self: object, *a: object) -> object:
        proc = real_start(self, *a)  # type: ignore[arg-type]
        threading.Timer(1.0, lambda: proc.popen.kill()).start()  # type: ignore[attr-defined]
        return proc

    mp = pytest.MonkeyPatch()
    mp.setattr(runner_module.SimulatorRunner, "start", start_then_kill)
    try:
        with pytest.raises(ServerExited) as excinfo:
            launch(config)
    finally:
        mp.undo()
    assert time.monotonic() - started < 10
    assert excinfo.value.exit_status == ExitStatus(signal=9)  # type: ignore[attr-defined]
    first = str(excinfo.value).splitlines()[0]
    assert "killed by SIGKILL: most likely the out-of-memory killer" in first
    assert str(excinfo.value).splitlines()[-1].startswith("Fix: check `dmesg -T | grep -i oom`")


def test_hang_is_server_not_ready_with_phase_and_fix(tmp_path: Path) -> None:
    with pytest.raises(ServerNotReady) as excinfo:
        launch(sim_config(tmp_path, "--sim-fault", "hang-at:kv_cache", timeout=2.0))
    lines = str(excinfo.value).splitlines()
    assert re.match(
        r"SGLang server http://127\.0\.0\.1:\d+ \(mode=simulator, pid \d+, running\) not ready after "
        r"2\.\ds \(\d+ probes\)$",
        lines[0],
    ), lines[0]
    assert re.match(r"Phase reached: (loading weights|allocating KV cache) \(for \d\.\ds\)$", lines[1]), (
        lines[1]
    )
    assert lines[2].startswith("Last probe: GET /health -> connection refused")
    assert lines[-1] == (
        "Fix: raise --sglang-startup-timeout (ini sglang_startup_timeout, env "
        "PYTEST_SGLANG_STARTUP_TIMEOUT) or read the log above."
    )


def test_never_healthy_is_server_not_ready(tmp_path: Path) -> None:
    with pytest.raises(ServerNotReady) as excinfo:
        launch(sim_config(tmp_path, "--sim-fault", "never-healthy", timeout=3.0))
    message = str(excinfo.value)
    assert re.search(r"^Last probe: GET /health -> (503|no answer within \d+(\.\d+)?s.*)$", message, re.M), message
    assert "Phase reached: " in message


def test_unhealthy_after_is_seen_by_health(tmp_path: Path) -> None:
    with launch(sim_config(tmp_path, "--sim-fault", "unhealthy-after:2")) as server:
        deadline = time.monotonic() + 10
        while server.health() == 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.health() == 503


def test_slow_health_still_becomes_ready(tmp_path: Path) -> None:
    with launch(sim_config(tmp_path, "--sim-fault", "slow-health:10")) as server:
        assert server.startup is not None and server.startup.ready_s is not None


@pytest.mark.parametrize(
    ("mode", "text"),
    [
        ("missing-field", "is a required property"),
        ("wrong-type", "is not of type"),
        ("not-json", "$: the body is not JSON"),
    ],
)
def test_server_info_faults_are_schema_mismatches(tmp_path: Path, mode: str, text: str) -> None:
    with pytest.raises(SchemaMismatch) as excinfo:
        launch(sim_config(tmp_path, "--sim-fault", f"server-info:{mode}"))
    message = str(excinfo.value)
    assert message.startswith("/server_info does not match schema urn:pytest-sglang:schema:server_info:")
    assert text in message and message.endswith("--sglang-validate=warn to continue anyway.")


def test_server_info_fault_in_warn_mode_warns_and_serves(tmp_path: Path) -> None:
    with pytest.warns(SchemaWarning, match="is a required property"):
        server = launch(sim_config(tmp_path, "--sim-fault", "server-info:missing-field", validate="warn"))
    try:
        assert server.health() == 200
    finally:
        server.stop()


def test_preflight_refuses_before_starting(tmp_path: Path) -> None:
    config = sim_config(tmp_path, "--tp-size", "8", "--enable-hierarchical-cache", "--hicache-size", "300")
    with pytest.raises(PreflightError) as excinfo:
        launch(config)
    assert str(excinfo.value).startswith(
        "--hicache-size 300 is GB per TP rank: 300 GB x 8 ranks = 2400 GB, "
        "but only 18 GB are available (reserve 10 GB)"
    )
    assert list(tmp_path.iterdir()) == []  # no log: nothing was started


def test_without_preflight_the_server_dies_with_the_explained_line(tmp_path: Path) -> None:
    config = sim_config(
        tmp_path, "--tp-size", "2", "--enable-hierarchical-cache", "--hicache-size", "300", preflight=False
    )
    with pytest.raises(ServerExited) as excinfo:
        launch(config)
    message = str(excinfo.value)
    assert "Known fatal line: ValueError: Not enough host memory available. Requesting 300.00 GB" in message
    assert "--hicache-size is GB per TP rank" in message


def test_api_key_is_used_and_never_shown(tmp_path: Path) -> None:
    key = "sk-engine-test-0042"
    with launch(sim_config(tmp_path, "--api-key", key)) as server:
        info = server.info()
        assert server.api_key == key and key not in repr(server)
        assert key not in repr(info) and info["api_key"] == "<redacted>"
        assert all(key not in line for line in server.log_tail(200))
        with server.client() as client:
            assert client.get("/v1/models").status_code == 200
    assert redaction.scrub(f"x {key} y") == "x *** y"
    assert server.log_path is not None and "server_args=" in server.log_path.read_text()
    assert key not in server.log_path.read_text()  # the stopped server's log was cleaned
    with pytest.raises(ServerExited) as excinfo:
        launch(sim_config(tmp_path, "--api-key", key, "--sim-fault", "crash-at:weights"))
    assert key not in str(excinfo.value)


def test_bad_launch_args_are_a_config_error_without_secrets(tmp_path: Path) -> None:
    from pytest_sglang.errors import ConfigError

    with pytest.raises(ConfigError) as excinfo:
        launch(sim_config(tmp_path, "--api-key", "sk-never-shown-77", "--tp-size", "abc"))
    message = str(excinfo.value)
    assert message.startswith("LaunchConfig.args='") and "SGLang would reject these launch args" in message
    assert "sk-never-shown-77" not in message and "--api-key ***" in message
    assert list(tmp_path.iterdir()) == []


def test_quiet_log_level_still_reports_ready(tmp_path: Path) -> None:
    """With --log-level warning SGLang prints no phase lines: readiness, not the log, decides."""
    with launch(sim_config(tmp_path, "--log-level", "warning")) as server:
        assert server.startup is not None and server.startup.ready_s is not None
        assert server.startup.phase == "ready" and all(p.end_s is not None for p in server.startup.phases)
        assert server.health() == 200


def test_requests_to_a_stopped_server_say_it_is_gone(tmp_path: Path) -> None:
    from pytest_sglang.errors import ServerUnavailable

    server = launch(sim_config(tmp_path))
    server.stop()
    with pytest.raises(ServerUnavailable) as excinfo:
        server.info()
    message = str(excinfo.value)
    assert "GET /server_info failed: ConnectError" in message
    assert re.search(r"\(the server (killed by SIGTERM|exited with code \d+)\)", message), message
    assert message.splitlines()[-1].startswith("Fix: read the server log (log_tail())")
