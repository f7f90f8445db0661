"""The suite's deadlines (issue 22): against a stream that never ends, each check sent its 8 samples one after
another, each waiting the full request timeout (about 96 minutes for the stream checks at the defaults).

Now a check stops at its first stalled request with that finding, every check has a deadline, and so has the
suite. The simulator's ``stall-stream-after:N`` fault is the stream that never ends."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_sglang.correctness import AcceptanceSettings
from pytest_sglang.correctness.deadline import Budget, CheckStalled
from pytest_sglang.errors import ConfigError
from tests.conftest import SimFactory

SUITE = ("--pyargs", "pytest_sglang.acceptance", "-p", "no:cacheprovider", "-rf")
STREAM_CHECKS = "stream and (response_shape or usage or max_tokens_exact)"


def test_a_never_ending_stream_stops_each_check_at_its_first_stalled_sample(
        pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "stall-stream-after:2")
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", "-k", STREAM_CHECKS,
                                           "--sglang-acceptance-request-timeout=2")
    elapsed = time.monotonic() - t0
    result.assert_outcomes(failed=6)
    out = result.stdout.str()
    # one stalled request per check, not 8: 6 checks x 8 samples x 2 s would be 96 s
    assert elapsed < 60, out
    # Once per check in its failure (and again in the short summary under CI=true, which does not cut it).
    assert out.count("stalled after ") in (6, 12)
    result.stdout.fnmatch_lines_random([
        "shape (chat, stream): 1 problem",
        "  - POST /v1/chat/completions (stream) stalled after * events without [[]DONE[]]: no complete answer "
        "within 2 s (ReadTimeout)",
        "  - POST /v1/completions (stream) stalled after * events without [[]DONE[]]: no complete answer within 2 s*",
    ])


def test_the_suite_ends_within_its_deadline_and_says_so(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "stall-stream-after:0")
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", "-k", "stream",
                                           "--sglang-acceptance-request-timeout=60",
                                           "--sglang-acceptance-timeout=4")
    elapsed = time.monotonic() - t0
    assert elapsed < 40, result.stdout.str()  # 4 s of suite, plus pytest's and the plugin's own start
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 10 and "passed" not in outcomes  # no check passed unchecked
    result.stdout.fnmatch_lines_random([
        "*stalled after 0 events without [[]DONE[]]: no complete answer within *s (ReadTimeout), cut short by the "
        "suite's deadline (4 s, --sglang-acceptance-timeout)",
        "  - the suite's deadline (4 s, --sglang-acceptance-timeout) had passed before the check's next request "
        "(not sent)",
    ])


def test_a_check_deadline_cuts_a_slow_check(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "stall-stream-after:0")
    result = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", "-k", "response_shape and chat-stream",
                                           "--sglang-acceptance-request-timeout=60",
                                           "--sglang-acceptance-check-timeout=1.5")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no complete answer within 1.* s (ReadTimeout), cut short by the check's "
                                 "deadline (1.5 s, --sglang-acceptance-check-timeout)"])


def test_the_fault_free_stream_checks_still_pass(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory()
    result = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", "-k", STREAM_CHECKS,
                                           "--sglang-acceptance-check-timeout=60")
    result.assert_outcomes(passed=6)


@pytest.mark.parametrize("option", ["--sglang-acceptance-check-timeout", "--sglang-acceptance-timeout"])
@pytest.mark.parametrize("value", ["0", "-5", "abc", "nan", "inf"])
def test_bad_deadlines_are_usage_errors(pytester: pytest.Pytester, option: str, value: str) -> None:
    result = pytester.runpytest_subprocess(*SUITE, f"{option}={value}", "--sglang-url=http://127.0.0.1:9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option}='{value}': *Fix: give {option} a valid value*"])


@given(st.sampled_from(["check_timeout_s", "suite_timeout_s"]),
       st.one_of(st.floats(max_value=0), st.just(float("inf")), st.just(float("nan"))))
def test_settings_refuse_deadlines_that_never_end_or_never_start(name: str, value: float) -> None:
    with pytest.raises(ConfigError, match=name):
        AcceptanceSettings(**{name: value})  # type: ignore[arg-type]


@given(check_s=st.floats(min_value=0.001, max_value=1e6), suite_s=st.floats(min_value=0.001, max_value=1e6))
def test_a_check_never_outlives_the_suite(check_s: float, suite_s: float) -> None:
    suite = Budget.for_suite(suite_s)
    check = suite.for_check(check_s)
    assert check.ends_at <= suite.ends_at
    assert check.timeout(1e9) <= min(check_s, suite_s)


def test_after_a_stall_no_further_request_is_sent() -> None:
    budget = Budget.for_suite(60).for_check(30)
    with pytest.raises(CheckStalled, match="first"):
        budget.stall("first")
    with pytest.raises(CheckStalled, match="first"):
        budget.stall("second")  # the first stall is the finding
    with pytest.raises(CheckStalled, match="first"):
        budget.timeout(5)
