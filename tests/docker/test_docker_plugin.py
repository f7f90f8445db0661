"""The plugin with ``--sglang-runner docker``: the process runner's pytester suites, signals, leftovers."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from dockerhelp import run_containers, sim_pytest_options

pytestmark = pytest.mark.docker_engine

Spawn = Callable[[str], "subprocess.Popen[bytes]"]
SIM = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.2"


def _wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def test_server_fixtures_and_phases(pytester: pytest.Pytester, docker_client: Any) -> None:
    pytester.copy_example("test_server_basic.py")
    result = pytester.runpytest_subprocess(*sim_pytest_options(), f"--sglang-launch={SIM}", "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "sglang: mode=launch runner=docker*",
        "*SGLang ready in *s*",
        "*SGLANG_URL=http://127.0.0.1:* MODE=docker*",
    ])
    # The phases, read from the server's log: every one in the summary's startup line (live lines only
    # for a phase that lasted 1 s or more when the output is not a terminal).
    result.stdout.fnmatch_lines(["startup *ready in *loading weights *"])


def test_capacity_gate_passes_and_fails(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_capacity_marker.py")
    result = pytester.runpytest_subprocess(*sim_pytest_options(), f"--sglang-launch={SIM}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*sglang capacity gate failed: min_total_tokens=1000000000000: measured *"])


def test_schema_mismatch_is_reported(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_server_basic.py")
    result = pytester.runpytest_subprocess(*sim_pytest_options(),
                                           f"--sglang-launch={SIM} --sim-fault server-info:wrong-type")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*SchemaMismatch*"])


@pytest.fixture
def spawn(pytester: pytest.Pytester) -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
    """pytest in a child (``-X faulthandler``: a SIGABRT dumps its threads), output to ``child.out``.

    A child still running at teardown (a failed wait) is killed, so no test leaks a process.
    """
    children: list[subprocess.Popen[bytes]] = []

    def start(launch: str) -> subprocess.Popen[bytes]:
        pytester.copy_example("test_sleepy.py")
        with (pytester.path / "child.out").open("wb") as out:
            proc: subprocess.Popen[bytes] = pytester.popen(
                [sys.executable, "-X", "faulthandler", "-m", "pytest", "-p", "no:cacheprovider",
                 *sim_pytest_options(), f"--sglang-launch={launch}"], stdout=out.fileno(), stderr=subprocess.STDOUT)
        children.append(proc)
        return proc

    yield start
    for proc in children:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _exit_code(pytester: pytest.Pytester, proc: subprocess.Popen[bytes], timeout_s: float = 90) -> int:
    """The child's exit code; a child still running at ``timeout_s`` fails the test with its stacks."""
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack, then it dies
        try:
            proc.wait(timeout=10)
        finally:
            proc.kill()
            proc.wait()
        tail = (pytester.path / "child.out").read_text(errors="replace")[-8000:]
        raise AssertionError(f"pytest did not exit {timeout_s}s after the signal; its output:\n{tail}") from None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_startup_leaves_no_container(pytester: pytest.Pytester, docker_client: Any,
                                                   spawn: Spawn, sig: signal.Signals) -> None:
    proc = spawn(f"{SIM} --sim-fault hang-at:weights")
    _wait_for(lambda: any(c.status == "running" for c in run_containers(docker_client, owner_pid=proc.pid)),
              60, "the container to run")
    proc.send_signal(sig)
    assert _exit_code(pytester, proc) != 0
    assert run_containers(docker_client, owner_pid=proc.pid) == []


def test_ctrl_c_during_tests_leaves_no_container(pytester: pytest.Pytester, docker_client: Any,
                                                 spawn: Spawn) -> None:
    proc = spawn(SIM)
    _wait_for(lambda: (pytester.path / "server-ready.txt").exists(), 60, "the test to hold the server")
    assert run_containers(docker_client, owner_pid=proc.pid)
    proc.send_signal(signal.SIGINT)
    assert _exit_code(pytester, proc) != 0
    assert run_containers(docker_client, owner_pid=proc.pid) == []


def test_leftovers_of_a_killed_pytest_are_reaped(pytester: pytest.Pytester, docker_client: Any,
                                                 spawn: Spawn) -> None:
    from pytest_sglang.server.docker.engine import find_docker_leftovers

    proc = spawn(SIM)
    _wait_for(lambda: (pytester.path / "server-ready.txt").exists(), 60, "the test to hold the server")
    proc.kill()  # SIGKILL: no cleanup can run, the container stays
    proc.wait(timeout=30)
    (left,) = run_containers(docker_client, owner_pid=proc.pid)
    assert left.status == "running"
    assert [x.name for x in find_docker_leftovers() if x.owner_pid == proc.pid] == [left.name]
    result = pytester.runpytest_subprocess("--sglang-kill")
    result.stdout.fnmatch_lines([f"*removed container {left.name} (*) of run *, owner pid {proc.pid} gone*"])
    assert run_containers(docker_client, owner_pid=proc.pid) == []


def test_env_secret_reaches_the_container_but_no_output(pytester: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "hf_docker_tier_secret_0123"
    monkeypatch.setenv("EXPECTED_CONTAINER_ENV", f"HF_TOKEN={secret}")
    pytester.makepyfile(test_env="""
        import os

        import docker

        def test_env(sglang_server):
            client = docker.from_env(version="auto")
            try:
                mine = {"label": f"io.pytest-sglang.owner-pid={os.getpid()}"}
                (container,) = client.containers.list(filters=mine)
                assert os.environ["EXPECTED_CONTAINER_ENV"] in container.attrs["Config"]["Env"]
            finally:
                client.close()
            print("log tail:", sglang_server.log_tail(200))
    """)
    logs = pytester.path / "logs"
    result = pytester.runpytest_subprocess(*sim_pytest_options(), f"--sglang-launch={SIM}", "-s", "-v",
                                           f"--sglang-env=HF_TOKEN={secret}", f"--sglang-log-dir={logs}",
                                           "--junitxml=junit.xml")
    result.assert_outcomes(passed=1)
    assert secret not in result.stdout.str() + result.stderr.str()
    assert secret not in (pytester.path / "junit.xml").read_text()
    written = [log for log in logs.rglob("*") if log.is_file()]
    assert written, "no server log was written"
    for log in written:
        assert secret not in log.read_text(errors="replace"), log
