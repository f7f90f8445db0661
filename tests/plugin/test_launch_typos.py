"""Typos in launch and gateway args are usage errors before anything starts; the header shows the parsed argv."""

from __future__ import annotations

import pytest

TEST = "def test_needs_server(sglang_server):\n    pass\n"


def test_a_launch_typo_is_a_usage_error_naming_the_flag_meant(pytester: pytest.Pytester) -> None:
    # Before: the simulator started and the run ended with "connection refused".
    pytester.makepyfile(TEST)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch",
                                           "--model-path sim-tiny --tp-szie 1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tp-szie is not a known flag, did you mean --tp-size?*"])
    assert "serving at" not in result.stdout.str()


def test_a_gateway_typo_is_a_usage_error_before_any_worker_starts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TEST)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-workers", "2", "--sglang-gateway",
                                           "--polcy cache_aware --oracle-password PASS-9999-X")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--polcy is not a known flag, did you mean --policy?*"])
    assert "PASS-9999-X" not in result.stdout.str() + result.stderr.str()


def test_a_quoted_ini_launch_is_refused_with_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makeini('[pytest]\nsglang_launch = "--model-path sim-tiny"\n')
    pytester.makepyfile(TEST)
    result = pytester.runpytest_subprocess("--sglang-simulate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option sglang_launch*'--model-path sim-tiny' is one argument*"
                                 "Fix: drop the quotes around the whole value*"])


def test_the_header_shows_the_parsed_argv_and_flags_of_a_newer_sglang(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TEST)
    result = pytester.runpytest_subprocess(
        "--collect-only", "--sglang-simulate", "--sglang-launch",
        "--model-path sim-tiny --enable-brand-new-thing --api-ke KEY-7777-Y \"--chat-template=a b\"",
        "--sglang-workers", "2", "--sglang-gateway", "--policy cache_aware --oracle-pass PASS-7777-Z")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "sglang: launch args (each worker): --model-path sim-tiny --enable-brand-new-thing --api-ke *** "
        "'--chat-template=a b'",
        "sglang: gateway args: --policy cache_aware --oracle-pass ***",
        "sglang: warning: --enable-brand-new-thing is not a flag of SGLang 0.5.23 (the recorded table)*",
    ])
    assert "KEY-7777-Y" not in result.stdout.str() and "PASS-7777-Z" not in result.stdout.str()
