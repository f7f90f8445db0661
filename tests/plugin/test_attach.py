"""Attach mode: a running server (the simulator, started here) is used and never stopped."""

from __future__ import annotations

import socket
import time

import pytest

from pytest_sglang.simulator import Simulator


@pytest.fixture(scope="module")
def sim() -> Simulator:
    argv = ["--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05",
            "--api-key", "sk-attach-7c1d"]
    with Simulator(argv, wait="healthy") as running:
        yield running


def test_attach_uses_the_server_and_leaves_it_running(pytester: pytest.Pytester, sim: Simulator) -> None:
    pytester.copy_example("test_server_basic.py")
    result = pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "--sglang-api-key=sk-attach-7c1d", "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"sglang: mode=attach url={sim.url}", "*MODE=attach*"])
    assert sim.proc.poll() is None  # never stopped or signalled


def test_attach_with_wrong_key_is_an_error(pytester: pytest.Pytester, sim: Simulator) -> None:
    pytester.copy_example("test_needs_server_twice.py")
    result = pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "--sglang-api-key=wrong-key-000")
    result.assert_outcomes(passed=1, errors=2)
    assert "wrong-key-000" not in result.stdout.str()


def test_attach_to_nothing_names_the_url(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_needs_server_twice.py")
    result = pytester.runpytest_subprocess("--sglang-url=http://127.0.0.1:9")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["ServerUnavailable: *http://127.0.0.1:9*", "Fix: *--sglang-url*"])


def test_credentials_in_the_url_are_masked_everywhere_and_the_load_runs(
    pytester: pytest.Pytester, sim: Simulator
) -> None:
    pytester.copy_example("test_load_fixture.py")
    url = sim.url.replace("http://", "http://ci-user:pw-Zq81xv@")
    report, junit = pytester.path / "report.json", pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(f"--sglang-url={url}", "--sglang-api-key=sk-attach-7c1d", "-rA",
                                           f"--sglang-report={report}", f"--junitxml={junit}")
    result.assert_outcomes(passed=1)
    masked = sim.url.replace("http://", "http://ci-user:***@")
    result.stdout.fnmatch_lines([f"sglang: mode=attach url={masked}",
                                 "sglang: auth: the API key wins (Authorization: Bearer); *"])
    for text in (result.stdout.str(), result.stderr.str(), report.read_text(), junit.read_text()):
        assert "pw-Zq81xv" not in text


def test_a_bad_url_is_a_usage_error_at_once(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_needs_server_twice.py")
    result = pytester.runpytest_subprocess("--sglang-url=127.0.0.1:30000")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --sglang-url='127.0.0.1:30000': the URL has no scheme://. "
                                 "Fix: write http://127.0.0.1:30000 (or https:// for a TLS endpoint)"])


def test_attach_honours_the_startup_timeout(pytester: pytest.Pytester) -> None:
    with socket.socket() as hang:  # accepts connections (backlog) and never answers
        hang.bind(("127.0.0.1", 0))
        hang.listen(8)
        url = f"http://127.0.0.1:{hang.getsockname()[1]}"
        pytester.copy_example("test_needs_server_twice.py")
        t0 = time.monotonic()
        result = pytester.runpytest_subprocess(f"--sglang-url={url}", "--sglang-startup-timeout=2")
        took = time.monotonic() - t0
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*ServerUnavailable: SGLang server * accepts connections but never answered "
                                 "GET /health (the last probe waited *"])
    assert took < 15, f"the run took {took:.1f}s with --sglang-startup-timeout=2"
