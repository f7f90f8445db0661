"""The shipped acceptance suite through SGLang's gateway: a launched fleet of simulator workers behind smg."""

from __future__ import annotations

import pytest

from tests.acceptance.test_suite import ALL_TESTS, PARSERS, SUITE

LAUNCH = "--model-path sim/tiny-llama --sim-profile tiny --enable-metrics --enable-deterministic-inference"


def test_the_suite_passes_through_the_gateway(pytester: pytest.Pytester) -> None:
    """Every check runs through the gateway; the features and the slot gauge come from the workers."""
    result = pytester.runpytest_subprocess(*SUITE, "--sglang-simulate", f"--sglang-launch={LAUNCH}",
                                           "--sglang-workers=2", "-v")
    result.assert_outcomes(passed=ALL_TESTS - 11, skipped=11)  # tool calls and reasoning: no parsers; images: no VLM
    result.stdout.fnmatch_lines_random([
        "sglang: fleet serving at http://127.0.0.1:*: gateway=smg * workers=2*",
        "*test_errors.py::test_disconnect_frees_slot PASSED*",
        "*test_errors.py::test_context_length_400 PASSED*",
        "*test_errors.py::test_unknown_model_4xx PASSED*",
        "*test_native_api.py::test_generate_agreement PASSED*",
        "*test_consistency.py::test_cache_logprobs PASSED*",
    ])


def test_parser_checks_pass_through_the_gateway(pytester: pytest.Pytester) -> None:
    launch = " ".join((LAUNCH, *PARSERS))
    result = pytester.runpytest_subprocess(*SUITE, "--sglang-simulate", f"--sglang-launch={launch}",
                                           "--sglang-workers=2", "-k", "tool_calls or reasoning")
    result.assert_outcomes(passed=4)


def test_a_faulty_worker_fails_its_check_through_the_gateway(pytester: pytest.Pytester) -> None:
    """A fault on the workers reaches the client through the gateway and fails the matching check."""
    result = pytester.runpytest_subprocess(*SUITE, "--sglang-simulate", f"--sglang-launch={LAUNCH} --sim-fault "
                                           "empty-finish-reason", "--sglang-workers=2", "-k", "response_shape")
    result.assert_outcomes(failed=4)
    assert 'finish_reason is ""' in result.stdout.str()
