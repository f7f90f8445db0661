"""Attach mode: a running server (the simulator, started here) is used and never stopped."""

from __future__ import annotations

import pytest

from pytest_sglang.simulator import Simulator


@pytest.fixture(scope="module")
def sim() -> Simulator:
    with Simulator(["--sim-profile", "tiny", "--sim-time-scale", "0.05", "--api-key", "sk-attach-7c1d"],
                   wait="healthy") as running:
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
