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


def test_load_tests_never_overlap_across_workers(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_lock_overlap.py")
    result = pytester.runpytest_subprocess(
        "-n", "2", "--sglang-simulate",
        "--sglang-launch=--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 "
        "--sim-decode-step-ms 200")
    result.assert_outcomes(passed=2)
    runs = [json.loads((pytester.path / f"load-{n}.json").read_text()) for n in range(2)]
    assert min(r["duration"] for r in runs) > 0.2, runs  # long enough for an overlap to show
    # Started together on two workers: the later one waited for the lock, so its call spans both loads.
    total = sum(r["duration"] for r in runs)
    assert max(r["waited_and_ran_s"] for r in runs) >= 0.95 * total, runs


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
