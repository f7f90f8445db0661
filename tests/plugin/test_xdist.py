"""pytest-xdist: the controller launches exactly one server, workers attach, the controller stops it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from plugin_helpers import SIM_LAUNCH, owned_by


def test_three_workers_share_one_launch(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_many_for_xdist.py")
    counter = pytester.path / "launches.txt"
    result = pytester.runpytest_subprocess(
        "-n", "3", "--sglang-simulate", f"--sglang-launch={SIM_LAUNCH} --sim-launch-counter {counter}")
    result.assert_outcomes(passed=6)
    assert len(counter.read_text().splitlines()) == 1
    result.stdout.fnmatch_lines(["*SGLang ready in *"])


def test_failed_start_reaches_every_worker(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_needs_server_twice.py")
    result = pytester.runpytest_subprocess("-n", "2", "--sglang-simulate",
                                           f"--sglang-launch={SIM_LAUNCH} --sim-fault crash-at:weights")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*ServerExited: SGLang server * exited before it was ready*"])


def test_no_process_left_after_xdist_run(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_many_for_xdist.py")
    with open(pytester.path / "out.txt", "wb") as out:
        proc = pytester.popen([sys.executable, "-m", "pytest", "-n", "2", "--sglang-simulate",
                               f"--sglang-launch={SIM_LAUNCH}", "-p", "no:cacheprovider"],
                              stdout=out, stderr=subprocess.STDOUT)
        assert proc.wait(timeout=120) == 0, (pytester.path / "out.txt").read_text()
    assert owned_by(proc.pid) == []


def test_factory_in_a_worker_says_why_not(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.copy_example("test_factory_reuse.py")
    monkeypatch.setenv("LAUNCH_COUNTER", str(pytester.path / "launches.txt"))
    result = pytester.runpytest_subprocess("-n", "1", "--sglang-url=http://127.0.0.1:9")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*sglang_server_factory cannot launch in an xdist worker*"])
    assert not (pytester.path / "launches.txt").exists()


def test_load_tests_never_overlap_across_workers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both workers ask for a load at once (a barrier in the inner test); the server's own trace shows
    the requests one at a time. The timing figures (start skew, time waited) are in
    benchmarks/bench_xdist_lock.py: a busy machine may delay a worker, which is not a failure."""
    pytester.copy_example("test_lock_overlap.py")
    trace = pytester.path / "trace.jsonl"
    monkeypatch.setenv("LOCK_DIR", str(pytester.path))
    result = pytester.runpytest_subprocess(
        "-n", "2", "--dist", "each", "--sglang-simulate",
        f"--sglang-launch={SIM_LAUNCH} --sim-decode-step-ms 20 --sim-trace {trace}")
    result.assert_outcomes(passed=2)
    assert len(list(pytester.path.glob("load-gw*.json"))) == 2  # both loads ran
    requests = [r for r in map(json.loads, trace.read_text().splitlines()) if r["event"] == "request"]
    assert len(requests) == 6  # 3 per load, no warmup
    assert max_in_flight(requests) == 1, requests  # concurrency=1 each: any overlap of the loads shows as 2


def max_in_flight(requests: list[dict[str, float]]) -> int:
    """The most requests the server held at once (arrival to last token, its own clock)."""
    edges = sorted([(r["arrival_perf"], 1) for r in requests] + [(r["last_token_perf"], -1) for r in requests],
                   key=lambda edge: (edge[0], edge[1]))  # an end and a start at the same instant: end first
    held = peak = 0
    for _, step in edges:
        held += step
        peak = max(peak, held)
    return peak


def test_marker_typo_under_xdist_is_an_error_not_a_crash(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_marker_typo.py")
    result = pytester.runpytest_subprocess("-n", "2", "--sglang-simulate", f"--sglang-launch={SIM_LAUNCH}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "invalid pytest-sglang marker: @pytest.mark.sglang_capacity has no keyword 'min_total_token' "
        "(did you mean 'min_total_tokens'?); valid keywords: *",
        "See https://*#markers",
    ], consecutive=True)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
