"""What users see before any server work: marker validation, the no-server error, header, --collect-only."""

from __future__ import annotations

import pytest

from pytest_sglang.gates.registry import GATES_BY_MARKER


@pytest.fixture(autouse=True)
def _no_sglang_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("URL", "LAUNCH", "SIMULATE", "RUNNER"):
        monkeypatch.delenv(f"PYTEST_SGLANG_{name}", raising=False)


def test_marker_typo_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_marker_typo.py")
    result = pytester.runpytest("--sglang-url=http://127.0.0.1:9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: invalid pytest-sglang marker:",
        "test_marker_typo.py::test_capacity: @pytest.mark.sglang_capacity has no keyword 'min_total_token' "
        "(did you mean 'min_total_tokens'?); valid keywords: min_total_tokens, min_running_requests, *",
        "See https://*#markers",
    ], consecutive=True)


def test_marker_positional_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_marker_positional.py")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "test_marker_positional.py::test_throughput: @pytest.mark.sglang_throughput takes keyword arguments "
        "only, got positional (100,); write e.g. @pytest.mark.sglang_throughput(min_output_tok_s=...); *",
    ])


def test_no_server_configured_is_an_error_naming_both_options(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_needs_server_twice.py")
    result = pytester.runpytest("-rE")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines([
        "*NoServerConfigured: no SGLang server configured: give --sglang-url URL to attach to a running "
        "server (e.g. --sglang-url http://127.0.0.1:30000) or --sglang-launch ARGS to launch one*",
        "*SGLang server unavailable (full diagnosis in the first error of this run): NoServerConfigured*",
    ])
    result.stdout.fnmatch_lines(["ERROR test_needs_server_twice.py::test_first - ServerStartFailed: *"])
    assert "hidden" not in result.stdout.str()
    assert "skipped" not in result.parseoutcomes()


def test_collect_only_starts_nothing(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_needs_server_twice.py")
    # A launch that could never start: --collect-only must not try.
    result = pytester.runpytest("--collect-only", "-q", "--sglang-launch=--model-path x",
                                "--sglang-command=/nonexistent/sglang")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*3 tests collected*"])


def test_header_attach(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--sglang-url=http://10.0.0.5:30000")
    result.stdout.fnmatch_lines(["sglang: mode=attach url=http://10.0.0.5:30000"])


def test_header_launch_scrubs_the_api_key(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--sglang-simulate", "--sglang-log-dir=logs-here",
                                "--sglang-launch=--model-path sim/tiny-llama --api-key sk-header-secret-1")
    result.stdout.fnmatch_lines([
        "sglang: mode=launch runner=simulator url=(free port picked at start)",
        "sglang: launch args: --model-path sim/tiny-llama --api-key ***",
        "sglang: server logs in logs-here",
    ], consecutive=True)
    assert "sk-header-secret-1" not in result.stdout.str()


def test_header_nothing_configured(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["sglang: no server configured (--sglang-url URL or --sglang-launch ARGS)"])
    result.assert_outcomes(passed=1)


def test_missing_server_command_names_the_option(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_needs_server_twice.py")
    result = pytester.runpytest("--sglang-launch=--model-path x", "--sglang-command=/nonexistent/sglang")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines([
        "ServerStartError: could not run the server command: *No such file or directory*/nonexistent/sglang*",
        "Fix: check --sglang-command and --sglang-python (ini sglang_command / sglang_python), or install "
        "SGLang in that interpreter.",
    ], consecutive=True)


def test_bad_marker_keywords_are_usage_errors_before_any_server_work(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_marker_bad_keywords.py")
    # A launch that could never start: the usage error must come first (nothing is launched). pytest's
    # own unknown-marker warning is ignored, as in a project that does not turn warnings into errors.
    result = pytester.runpytest_subprocess("--sglang-launch=--model-path x", "--sglang-command=/nonexistent/sglang",
                                           "-W", "ignore::pytest.PytestUnknownMarkWarning")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    prefix = "test_marker_bad_keywords.py::"
    result.stderr.fnmatch_lines([
        "ERROR: invalid pytest-sglang marker:",
        f"{prefix}test_rate_as_text: @pytest.mark.sglang_throughput(max_error_rate='1%'): must be a number "
        "from 0 to 1 (a fraction: 0.01 = 1%), not the string '1%'. Fix: write max_error_rate=0.01",
        f"{prefix}test_rate_as_percent: @pytest.mark.sglang_throughput(max_error_rate=5): must be a number "
        "from 0 to 1 (a fraction: 0.01 = 1%). Fix: write max_error_rate=0.05",
        f"{prefix}test_negative_floor: @pytest.mark.sglang_throughput(min_output_tok_s=-100): must be a "
        "number > 0. Fix: give min_output_tok_s a number > 0, or leave it out",
        f"{prefix}test_nan_ceiling: @pytest.mark.sglang_throughput(max_ttft_ms_p99=nan): must be a number > 0, "
        "not nan. Fix: *",
        f"{prefix}test_bool_as_number: @pytest.mark.sglang_capacity(min_total_tokens=True): must be a whole "
        "number >= 1, not a bool. Fix: *",
        f"{prefix}test_no_threshold: @pytest.mark.sglang_capacity(): checks nothing, so it would always pass. "
        "Fix: give at least one of min_total_tokens, min_running_requests, min_context_length, "
        "min_concurrent_requests, min_fleet_total_tokens",
        f"{prefix}test_unknown_choice: @pytest.mark.sglang_hicache(write_policy='write_thru'): must be one of "
        "write_back, write_through, write_through_selective (SGLang 0.5.23's --hicache-write-policy "
        "choices). Fix: write write_policy='write_through' (the closest choice)",
        f"{prefix}test_gain_without_workload: @pytest.mark.sglang_hicache(min_gain=1.5, effective=False): "
        "needs effective=True *",
        f"{prefix}test_misspelt_marker: @pytest.mark.sglang_throughtput is not a pytest-sglang marker "
        "(did you mean @pytest.mark.sglang_throughput?); the markers are "
        f"{', '.join([*GATES_BY_MARKER, 'sglang_baseline'])}",
        "See https://*#markers",
    ], consecutive=True)
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_bad_marker_in_an_xdist_worker_errors_that_test_only(pytester: pytest.Pytester) -> None:
    # A worker cannot raise a usage error (it would crash): the test errors with the same message.
    pytester.copy_example("test_marker_bad_keywords.py")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1", "-k",
                                           "misspelt_marker or rate_as_text or unmarked",
                                           "-W", "ignore::pytest.PytestUnknownMarkWarning")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines([
        "*invalid pytest-sglang marker: @pytest.mark.sglang_throughtput is not a pytest-sglang marker*"])
