"""``sglang_probes``: Kubernetes probes during a load, against the simulator launched by pytest.

Healthy: the probes hold. ``health-under-load`` (``/health`` 1 s late while requests run, as a health
generation waits behind long prefills): a 0.5 s timeout fails 3 times in a row and the message names the
probe, the moment, the latencies and a timeout that would have held. ``stalled-dp-rank``: every probe
passes, but one DP rank produces nothing.
"""

from __future__ import annotations

import pytest

from pytest_sglang.gates.production.probes import first_failure, suggestion
from pytest_sglang.loadgen.client.probing import ProbeResult, ProbeSpec

# 8 ms per decode step (160 ms x 0.05): the load below lasts several seconds
LAUNCH = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --sim-decode-step-ms 160"
PROBES = ("readiness_timeout_seconds=0.5, readiness_period_seconds=0.25, liveness_path=None, requests=48, "
          "concurrency=8, input_len=256, output_len=128")
INNER = f"""
import pytest


@pytest.mark.sglang_probes({PROBES})
def test_pod_survives():
    pass
"""


def _run(pytester: pytest.Pytester, launch: str, inner: str = INNER) -> pytest.RunResult:
    pytester.makepyfile(test_inner=inner)
    return pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", launch, "-p", "no:cacheprovider",
                                         "-rfE")


def test_probes_hold_on_a_healthy_server(pytester: pytest.Pytester) -> None:
    _run(pytester, LAUNCH).assert_outcomes(passed=1)


def test_slow_health_under_load_fails_the_readiness_probe_with_when_and_a_fix(pytester: pytest.Pytester) -> None:
    result = _run(pytester, LAUNCH + " --sim-fault health-under-load:20")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "  readiness probe GET /health (timeoutSeconds 0.5, periodSeconds 0.25, failureThreshold 3): measured failed "
        "3 times in a row, required == held [[]http://127.0.0.1:*: * probes during the * s load; from * s to * s "
        "into the load, latencies 1.* s (200), 1.* s (200), 1.* s (200): Kubernetes would have marked the pod "
        "unready (removed from the Service)[]]: FAILED",
    ])
    result.stdout.fnmatch_lines(["Fix: timeoutSeconds: 2 would have held (the slowest answer took 1.* s); or start "
                                 "SGLang with SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false in its environment: "
                                 "/health then answers at once *"])


# Kubernetes' own probe settings, as the user of issue 34 wrote them: 3 failures 10 s apart take 31 s of load.
K8S = ("readiness_timeout_seconds=1, readiness_period_seconds=10, readiness_failure_threshold=3, liveness_path=None, "
       "check_dp_ranks=False, concurrency=8, input_len=256, output_len=128")


def test_kubernetes_settings_on_a_short_load_still_catch_a_slow_health(pytester: pytest.Pytester) -> None:
    """48 requests last a few seconds: 1 probe. The gate runs the load again, sized to last 31 s, and judges that."""
    inner = INNER.replace(PROBES, K8S + ", requests=48")
    result = _run(pytester, LAUNCH + " --sim-fault health-under-load:40", inner)  # /health 2 s late under load
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "  readiness probe GET /health (timeoutSeconds 1, periodSeconds 10, failureThreshold 3): measured failed 3 "
        "times in a row, required == held [[]*: * probes during the * s load; from * s to * s into the load, *",
        "  load: *: * completed, 0 failed; the probes of this load, * s long, are judged: the 1 load(s) before it (48 "
        "requests) were too short for a probe to fail (the first probe and failureThreshold more, periodSeconds "
        "apart, need 31 s)",
    ])


CUT = K8S + ", requests=4096, load_timeout_s=3"


def test_a_load_too_short_to_fail_a_probe_is_not_judged_and_says_so(pytester: pytest.Pytester) -> None:
    """The load's own deadline cuts it at 3 s: too few probes for 3 failures in a row. Skipped, never 'held'."""
    pytester.makepyfile(test_inner=INNER.replace(PROBES, CUT))
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", LAUNCH, "-p", "no:cacheprovider",
                                           "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] *@pytest.mark.sglang_probes could not judge: readiness probe GET "
                                 "/health (timeoutSeconds 1, periodSeconds 10, failureThreshold 3): * probe(s) during "
                                 "the * s load, too few for the 3 failures in a row a failure needs (after the first: "
                                 "31 s of load) (the load was cut: *). Fix: give the load more time *"])


def test_under_strict_a_probe_that_could_not_be_judged_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER.replace(PROBES, CUT))
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", LAUNCH, "-p", "no:cacheprovider",
                                           "-rfE", "--sglang-strict")
    result.assert_outcomes(errors=1)  # failed in setup, where the gate measures, as a consent refusal does
    result.stdout.fnmatch_lines(["*@pytest.mark.sglang_probes could not judge: readiness probe GET /health *: 1 "
                                 "probe(s) during the * s load, too few for the 3 failures in a row a failure needs*"])
    result.stdout.fnmatch_lines(["*(--sglang-strict: a check that cannot judge fails)*"])
    assert "During handling" not in result.stdout.str()  # the message once, not again as its cause


def test_no_probe_on_one_dp_rank_checks_nothing_and_sends_no_load(pytester: pytest.Pytester) -> None:
    """Issue 34: both paths None on a server with one DP rank ran 64 requests and passed, with no probe."""
    inner = INNER.replace(PROBES, "readiness_path=None, liveness_path=None")
    result = _run(pytester, LAUNCH, inner)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "*@pytest.mark.sglang_probes could not measure: KeywordError: @pytest.mark.sglang_probes(readiness_path=None, "
        "liveness_path=None, check_dp_ranks=True): checks nothing on *: no probe, and the DP-rank check needs "
        "dp_size > 1 (every server here has one DP rank), so it would always pass. Fix: give readiness_path='/health' "
        "or liveness_path='/health'*"])


def test_no_probe_and_no_rank_check_is_refused_at_collection(pytester: pytest.Pytester) -> None:
    result = _run(pytester, LAUNCH, INNER.replace(PROBES, "readiness_path=None, liveness_path=None, "
                                                          "check_dp_ranks=False"))
    assert result.ret != 0 and "SGLang ready" not in result.stdout.str()  # nothing started
    lines = "\n".join(result.stdout.lines + result.stderr.lines)
    assert ("@pytest.mark.sglang_probes(readiness_path=None, liveness_path=None, check_dp_ranks=False): checks "
            "nothing, so it would always pass. Fix: give readiness_path='/health' or liveness_path='/health' (a probe "
            "to judge), or leave check_dp_ranks=True on a server with dp_size > 1") in lines, lines


def test_a_stalled_dp_rank_is_caught_while_every_probe_holds(pytester: pytest.Pytester) -> None:
    inner = """
import pytest


@pytest.mark.sglang_probes(readiness_timeout_seconds=2, readiness_period_seconds=0.5, liveness_timeout_seconds=2,
                           liveness_period_seconds=0.5, rank_timeout_s=2, requests=8, concurrency=4, input_len=64,
                           output_len=16, request_timeout_s=3)
def test_pod_survives():
    pass
"""
    result = _run(pytester, LAUNCH + " --dp-size 2 --sim-fault stalled-dp-rank:1", inner)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["sglang probes gate failed: DP ranks producing tokens 1 ranks (required == 2)"])
    result.stdout.fnmatch_lines(["  readiness probe GET /health *: measured held, required == held *: ok",
                                 "  liveness probe GET /health *: measured held, required == held *: ok",
                                 "  DP ranks producing tokens: measured 1 ranks, required == 2 ranks [[]*; rank(s) 1 "
                                 "answered nothing[]]: FAILED"])


def test_a_path_without_a_slash_is_named_with_the_fix(pytester: pytest.Pytester) -> None:
    result = _run(pytester, LAUNCH, INNER.replace("liveness_path=None", "liveness_path='health'"))
    assert result.ret != 0 and "SGLang ready" not in result.stdout.str()  # refused at collection
    lines = result.stdout.lines + result.stderr.lines
    assert any("@pytest.mark.sglang_probes(liveness_path='health'): must be a string starting with /. Fix: give "
               "liveness_path a string starting with /, or leave it out" in line for line in lines), lines


def _r(at: float, latency: float, status: int | None = 200) -> ProbeResult:
    return ProbeResult(at, status, latency)


def test_a_failure_needs_threshold_failures_in_a_row_and_503s_suggest_a_threshold() -> None:
    spec = ProbeSpec("liveness", "/health", 1.0, 10.0, 3)
    slow = [_r(0, 0.2), _r(10, 1.5), _r(20, 1.6), _r(30, 0.3), _r(40, 1.2)]
    assert first_failure(slow, spec) is None
    failing = [_r(0, 0.2), _r(10, 0.3, 503), _r(20, 0.2, 503), _r(30, 1.5), _r(40, 0.2)]
    run = first_failure(failing, spec)
    assert run is not None and [r.at_s for r in run] == [10, 20, 30]
    assert suggestion(failing, spec).startswith("failureThreshold: 4 would have held")
    assert suggestion(slow, spec).startswith("timeoutSeconds: 3 would have held (the slowest answer took 1.60 s); or "
                                             "start SGLang with SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false")
    assert "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION" not in suggestion(slow, ProbeSpec("liveness", "/ready", 1, 10, 3))


def test_on_a_fleet_each_probe_row_names_its_worker_in_every_report(pytester: pytest.Pytester) -> None:
    """Issue 34: two workers gave two identical rows; the terminal, Markdown and JUnit now say which is which."""
    pytester.makepyfile(test_inner=INNER.replace(PROBES, "readiness_timeout_seconds=2, readiness_period_seconds=0.25, "
                                                 "readiness_failure_threshold=2, liveness_path=None, requests=16, "
                                                 "concurrency=4, input_len=64, output_len=16"))
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-workers", "2", "--sglang-launch", LAUNCH,
                                           "-p", "no:cacheprovider", "--sglang-markdown", "summary.md",
                                           "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1)
    stdout = result.stdout.str()
    markdown = (pytester.path / "summary.md").read_text()
    junit = (pytester.path / "junit.xml").read_text()
    for index in (0, 1):
        row = (f"readiness probe GET /health (timeoutSeconds 2, periodSeconds 0.25, failureThreshold 2) on worker "
               f"{index} (")
        assert row in " ".join(line.strip() for line in stdout.splitlines()), stdout
        assert row in markdown, markdown
        assert f"sglang.probes.{row}" in junit, junit
