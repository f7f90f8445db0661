"""A cancellation storm through SGLang's gateway (smg): each worker's own /metrics must come back to idle.

Simulator workers behind the real gateway, launched by the plugin (``--sglang-workers 2``). The gateway
must pass the client's disconnect on to the worker; a worker with ``--sim-fault slot-leak`` keeps the
cancelled requests' slots, and the marker names that worker.
"""

from __future__ import annotations

import pytest

from gates.fleetkit import SIM_LAUNCH

INNER = """
import pytest


@pytest.mark.sglang_fleet(max_imbalance=1.0, requests=8, concurrency=4, input_len=32, output_len=32,
                          cancel_rate=0.5, cancel_after_tokens=4, max_drain_s=5)
def test_storm(sglang_gate):
    assert sglang_gate.load.cancelled == 4
"""


@pytest.mark.parametrize("fault", [True, False])
def test_each_worker_gives_back_its_slots(pytester: pytest.Pytester, fault: bool) -> None:
    pytester.makepyfile(test_inner=INNER)
    launch = SIM_LAUNCH + (" --sim-fault slot-leak" if fault else "")
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-workers", "2", "--sglang-launch", launch,
                                           "--sglang-gateway", "--policy round_robin", "-p", "no:cacheprovider",
                                           "-rfE")
    if not fault:
        result.assert_outcomes(passed=1)
        return
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*sglang:num_running_reqs within max_drain_s=5 (worker 0 (http://127.0.0.1:*)): measured *, required <= 0*",
        "*sglang:num_running_reqs within max_drain_s=5 (worker 1 (http://127.0.0.1:*)): measured *, required <= 0*",
    ])


def test_cancel_rate_needs_the_load_of_max_imbalance(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="""
import pytest

@pytest.mark.sglang_fleet(cancel_rate=0.2)
def test_load():
    pass
""")
    result = pytester.runpytest_subprocess("--sglang-launch=--model-path x", "--sglang-command=/nonexistent/sglang")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*cancel_rate*needs max_imbalance*"])


PD_INNER = """
import pytest


@pytest.mark.sglang_pd(requests=8, concurrency=4, input_len=32, output_len=32, cancel_rate=0.5,
                       cancel_after_tokens=4, max_drain_s=5)
def test_storm(sglang_gate):
    drained = [c for c in sglang_gate["pd"].checks if "within max_drain_s=5" in c.metric]
    assert len(drained) == 4 and all(c.passed for c in drained)  # two gauges of each worker
    assert "back at idle" in sglang_gate["pd"].context["cancellation"]
"""


def test_prefill_and_decode_workers_drain(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=PD_INNER)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-prefill", "1", "--sglang-decode", "1",
                                           "--sglang-launch", SIM_LAUNCH, "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=1)
