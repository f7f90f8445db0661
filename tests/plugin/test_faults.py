"""Every simulator fault, as the user sees it in pytest's output: an ERROR of each test needing the
server, the full diagnosis once (headline, evidence, Fix line), then a one-line reference."""

from __future__ import annotations

import re

import pytest
from plugin_helpers import SIM_LAUNCH

ONE_LINE = "SGLang server unavailable (full diagnosis in the first error of this run): {}*"

CASES = {
    "crash": ([f"--sglang-launch={SIM_LAUNCH} --sim-fault crash-at:weights"], [
        "ServerExited: SGLang server http://127.0.0.1:* (mode=simulator, pid *) exited before it was ready: "
        "exited with code *",
        "Last * lines of *sglang-*.log:",  # the log tail quotes the server's own error
        "*RuntimeError: simulated crash during startup phase 'weights'*",
    ], "ServerExited"),
    "oom-kill": ([f"--sglang-launch={SIM_LAUNCH} --sim-fault oom-kill-at:kv_cache"], [
        "ServerExited: SGLang server * exited before it was ready: killed by SIGKILL: most likely the "
        "out-of-memory killer*",
    ], "ServerExited"),
    "hang": ([f"--sglang-launch={SIM_LAUNCH} --sim-fault hang-at:weights", "--sglang-startup-timeout=3"], [
        "ServerNotReady: SGLang server * not ready after *",
        "Phase reached: loading weights (for *)",
    ], "ServerNotReady"),
    "never-healthy": ([f"--sglang-launch={SIM_LAUNCH} --sim-fault never-healthy",
                       "--sglang-startup-timeout=3"], [
        "ServerNotReady: SGLang server * not ready after *",
        "Last probe: GET /health -> *",
    ], "ServerNotReady"),
    "schema": ([f"--sglang-launch={SIM_LAUNCH} --sim-fault server-info:missing-field"], [
        "SchemaMismatch: /server_info does not match schema *",
    ], "SchemaMismatch"),
    "preflight": (["--sglang-launch=--model-path sim/kimi --sim-profile kimi-k2.5-rtx6000x8 --tp 8 "
                   "--enable-hierarchical-cache --hicache-size 300"], [
        "PreflightError: *--hicache-size 300 is GB per TP rank: 300 GB x 8 ranks = 2400 GB, "
        "but only * GB are available*",
    ], "PreflightError"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fault_is_an_error_with_its_diagnosis(pytester: pytest.Pytester, case: str) -> None:
    args, lines, kind = CASES[case]
    pytester.copy_example("test_needs_server_twice.py")
    result = pytester.runpytest_subprocess("--sglang-simulate", *args)
    result.assert_outcomes(passed=1, errors=2)
    out = result.stdout
    out.fnmatch_lines(["*ERROR at setup of test_first*", *lines])
    out.fnmatch_lines(["*ERROR at setup of test_second*", ONE_LINE.format(kind)], consecutive=True)
    if kind not in ("SchemaMismatch",):
        out.fnmatch_lines(["Fix: *"])
    assert out.str().count(lines[0].split(":")[0] + ":") >= 1


def test_failing_requests_fail_the_throughput_gate(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_error_rate.py")
    result = pytester.runpytest_subprocess("--sglang-simulate",
                                           f"--sglang-launch={SIM_LAUNCH} --sim-fault error-rate:1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["sglang throughput gate failed: max_error_rate=0.0: measured 1 (error_rate)*",
                                 "  integrity: 0/6 completed; failed by kind: *http_500*"])


@pytest.mark.parametrize("ci", ["", "true"])
def test_diagnosis_is_shown_once_also_in_ci(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                            ci: str) -> None:
    # With CI set, pytest does not truncate its short summary: it must not repeat the whole diagnosis.
    monkeypatch.setenv("CI", ci)
    pytester.copy_example("test_needs_server_twice.py")
    result = pytester.runpytest_subprocess(
        "-rE", "--sglang-simulate", f"--sglang-launch={SIM_LAUNCH} --sim-fault crash-at:weights")
    result.assert_outcomes(passed=1, errors=2)
    assert len(re.findall(r"^Last \d+ lines of ", result.stdout.str(), re.M)) == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["ERROR *test_first* - ServerStartFailed: ServerExite*"])
