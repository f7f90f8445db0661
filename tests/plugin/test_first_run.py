"""A first run with a server configured and no tests of one's own says what to run next."""

from __future__ import annotations

import pytest

NEXT = ["sglang: no tests ran. A server is configured; what to run next:",
        "  pytest --pyargs pytest_sglang.smoke {opts}",
        "      readiness, identity, capacity, a short load, API shape; writes a baseline for the next run",
        "  pytest --pyargs pytest_sglang.acceptance {opts}"]


def test_attach_with_no_tests_names_the_smoke_and_acceptance_suites(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--sglang-url=http://user:hunter2@127.0.0.1:9")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines([line.format(opts="--sglang-url http://user:***@127.0.0.1:9") for line in NEXT])
    result.stdout.fnmatch_lines(["*@pytest.mark.sglang_throughput(*", "*--sglang-suggest-floors*"])
    assert "hunter2" not in result.stdout.str()


def test_a_launch_with_no_tests_repeats_the_launch_options(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--sglang-simulate")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines([line.format(opts="--sglang-simulate") for line in NEXT])
    launched = pytester.runpytest("--sglang-launch=--model-path m --api-key sk-secret")
    launched.stdout.fnmatch_lines(
        ["  pytest --pyargs pytest_sglang.smoke --sglang-launch '--model-path m --api-key *'"])
    assert "sk-secret" not in launched.stdout.str()


def test_no_server_configured_or_tests_that_ran_get_no_hint(pytester: pytest.Pytester) -> None:
    assert "what to run next" not in pytester.runpytest().stdout.str()
    pytester.makepyfile("def test_x(): pass")
    assert "what to run next" not in pytester.runpytest("--sglang-simulate").stdout.str()
