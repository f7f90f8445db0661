"""``sglang_throughput(cancel_rate=...)`` (issue 33 item 4): a pytest session against the simulator.

Half the requests' clients go away after 4 tokens. The healthy simulator aborts them and frees their slot
and KV, so ``/metrics`` is back at idle within ``max_drain_s``; with ``--sim-fault slot-leak`` it never
frees them and the marker fails naming the gauges, the idle value and the fix. Bad keywords are usage
errors naming the keyword.
"""

from __future__ import annotations

import pytest

LAUNCH = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --enable-metrics"
INNER = """
import pytest


@pytest.mark.sglang_throughput(requests=8, concurrency=4, input_len=32, output_len=32, cancel_rate=0.5,
                               cancel_after_tokens=4, max_drain_s=5)
def test_storm(sglang_gate):
    assert (sglang_gate.load.cancelled, sglang_gate.load.failed, sglang_gate.load.completed) == (4, 0, 4)
"""


@pytest.mark.parametrize("fault", [True, False])
def test_cancelled_requests_must_give_back_their_slots(pytester: pytest.Pytester, fault: bool) -> None:
    pytester.makepyfile(test_inner=INNER)
    launch = LAUNCH + (" --sim-fault slot-leak" if fault else "")
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", launch, "-p", "no:cacheprovider",
                                           "-rfE", "-v", "--sglang-report=report.json")
    if not fault:  # the healthy twin: back at idle, the storm's line beside the load's figures
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*sglang:num_running_reqs within max_drain_s=5*"])
        report = (pytester.path / "report.json").read_text()
        assert "4 requests cancelled after 4 tokens (cancel_rate=0.5; counted apart" in report
        assert " back at idle after " in report and "NOT back" not in report
        assert "4/4 completed; failed by kind: none; 4 more cancelled on purpose" in report
        return
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*sglang throughput gate failed: sglang:num_running_reqs within max_drain_s=5 (http://127.0.0.1:*) 4 "
        "(required <= 0)*",
    ])
    out = result.stdout.str()
    assert "sglang:kv_used_tokens within max_drain_s=5" in out and "abort it on the disconnect" in out
    result.stdout.fnmatch_lines(["*drain: http://127.0.0.1:* NOT back at idle after 5.* s (running 4, idle 0; "
                                 "sglang:kv_used_tokens *, idle 0)*"])


@pytest.mark.parametrize(("keywords", "named"), [
    ("cancel_rate=1.5", "cancel_rate"),
    ("cancel_rate=-0.1", "cancel_rate"),
    ("cancel_rate=0.5, cancel_after_tokens=0", "cancel_after_tokens"),
    ("cancel_rate=0.5, max_drain_s=0", "max_drain_s"),
    ("max_drain_s=10", "max_drain_s"),
])
def test_bad_keywords_are_usage_errors(pytester: pytest.Pytester, keywords: str, named: str) -> None:
    pytester.makepyfile(test_inner=f"""
import pytest

@pytest.mark.sglang_throughput({keywords})
def test_load():
    pass
""")
    result = pytester.runpytest_subprocess("--sglang-launch=--model-path x", "--sglang-command=/nonexistent/sglang")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{named}*"])


def test_a_cancel_that_never_fires_is_refused_before_any_load(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="""
import pytest

@pytest.mark.sglang_throughput(output_len=16, cancel_rate=0.5, cancel_after_tokens=16)
def test_load():
    pass
""")
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", LAUNCH, "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*cancel_after_tokens=16*is not below output_len=16*checks nothing*"])
