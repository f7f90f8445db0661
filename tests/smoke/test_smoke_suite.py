"""``pytest --pyargs pytest_sglang.smoke``: the zero-code first look, run as a newcomer runs it."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SimFactory

SUITE = ("--pyargs", "pytest_sglang.smoke", "-p", "no:cacheprovider", "-rs")
BASELINE = "sglang-smoke-baseline.json"
#: ready, identity, capacity, load, 4 API shapes (chat/completions x batch/stream), native /generate
ALL_TESTS = 9
CAPACITY_ONLY = "max_running_requests:0%,concurrent_requests:0%"


def test_a_newcomer_run_passes_and_writes_a_baseline_the_next_run_compares_with(
        pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory()
    first = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}")
    first.assert_outcomes(passed=ALL_TESTS)
    baseline = pytester.path / BASELINE
    first.stdout.fnmatch_lines_random([f"sglang JSON report: {baseline}",
                                       f"sglang smoke: next time, compare with this run: pytest --pyargs "
                                       f"pytest_sglang.smoke ... --sglang-baseline {baseline}"])
    written = baseline.read_bytes()
    report = json.loads(written)
    by_id = {t["nodeid"]: t for t in report["tests"]}
    load_test = next(t for nodeid, t in by_id.items() if nodeid.endswith("test_load"))
    assert len(load_test["loads"]) == 2  # one request at a time, then the smoke load
    # The floor is what this server delivered one request at a time (halved), not a number of ours.
    first.stdout.fnmatch_lines(["*throughput output_throughput * tok/s *>= * tok/s ok"])

    # The capacity figures are the server's own and do not vary between runs: compared at 0 %. (The
    # short load's latencies vary on a shared 2-core machine; judging them against their noise is
    # the baseline statistics' job, not this test's.)
    second = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", f"--sglang-baseline={baseline}",
                                           "--sglang-max-regression", CAPACITY_ONLY)
    second.assert_outcomes(passed=ALL_TESTS)
    second.stdout.fnmatch_lines(["*baseline max_running_requests*ok", "*baseline concurrent_requests*ok"])
    assert baseline.read_bytes() == written  # a baseline the user gives is never overwritten


def test_a_run_that_fails_writes_no_baseline(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "error-rate:0.5")
    result = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", "-k", "load")
    result.assert_outcomes(failed=1, deselected=ALL_TESTS - 1)
    result.stdout.fnmatch_lines([f"sglang smoke: no baseline written ({BASELINE}): this run did not pass"])
    assert not (pytester.path / BASELINE).exists()


def test_a_report_path_given_is_the_baseline(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory()
    result = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", "--sglang-report=out/r.json",
                                           "-k", "ready or capacity")
    result.assert_outcomes(passed=2, deselected=ALL_TESTS - 2)
    assert (pytester.path / "out" / "r.json").is_file()
    assert not (pytester.path / BASELINE).exists()


def test_the_suite_runs_against_a_launched_simulator(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*SUITE, "--sglang-simulate", "-k", "load or identity")
    result.assert_outcomes(passed=2, deselected=ALL_TESTS - 2)
