"""The reports through the real plugin, with the simulator launched as a subprocess.

Each inner run launches a tiny simulator (about 1 s at --sim-time-scale 0.05) and runs a
capacity test and a 16-request throughput test. The candidate runs every simulated duration 3x
slower (--sim-time-scale 0.15), which cuts output throughput by well over a third even when a
loaded machine slows the fast run (HTTP overhead does not scale): far beyond the 5% limit, so the
baseline tests cannot flake.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sglang.report.json_report import validation_errors

SIM = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05"
FAST = f"--sglang-launch={SIM} --sim-decode-step-ms 100"
#: The candidate configuration: the same model on the same machine, every duration 3x longer.
SLOWER = "--sim-profile tiny --sim-time-scale 0.15 --sim-decode-step-ms 100"
CANDIDATE = f"--sglang-launch=--model-path sim/tiny-llama {SLOWER}"
#: Another model (slower too): its figures say nothing about the baseline's.
OTHER_MODEL = f"--sglang-launch=--model-path sim/other-llama {SLOWER}"


def _run(p: pytest.Pytester, *args: str) -> pytest.RunResult:
    return p.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate", *args, timeout=180)


def test_summary_json_and_html_from_a_simulator_run(real: pytest.Pytester, tmp_path: Path) -> None:
    report_path, html_path = tmp_path / "r.json", tmp_path / "r.html"
    result = _run(real, FAST, f"--sglang-report={report_path}", f"--sglang-html={html_path}")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*= sglang gates =*",
            "server   SGLang 0.5.23 | simulator | sim/tiny-llama (tp=1,dp=1)",
            "hardware *",
            "url      http://127.0.0.1:*",
            "launch   --model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05",
            "         --sim-decode-step-ms 100",
            "startup  ready in *",
        ],
        consecutive=True,
    )
    result.stdout.fnmatch_lines(
        [
            "sglang server start * PASSED",
            "  startup ready_s * s * <= 1,800.0 s ok",
            "test_real_gates.py::test_capacity * PASSED",
            "  capacity max_total_num_tokens * >= 1 tokens ok",
            "test_real_gates.py::test_throughput * PASSED",
            "  throughput output_throughput * tok/s * >= 1 tok/s ok",
            "PASSED: 4/4 checks ok in 2 tests (2 passed, 0 failed, 0 errors, 0 skipped)",
        ]
    )
    report = json.loads(report_path.read_text())
    assert validation_errors(report) == []
    assert report["fingerprint"]["runner"] == "simulator"
    assert report["server"]["phases"], "the launch's startup phases are in the report"
    load = report["tests"][2]["loads"][0]
    assert load["completed"] == 16 and load["failed"] == 0 and load["output_throughput"] > 0
    assert 'data-chart="startup"' in html_path.read_text()


def test_summary_under_xdist_has_the_workers_records(real: pytest.Pytester) -> None:
    result = _run(real, FAST, "-n", "2")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "server   SGLang 0.5.23 | simulator | sim/tiny-llama (tp=1,dp=1)",
            "test_real_gates.py::test_capacity * PASSED",
            "  capacity max_total_num_tokens * >= 1 tokens ok",
            "test_real_gates.py::test_throughput * PASSED",
            "  throughput output_throughput * tok/s * >= 1 tok/s ok",
            "  throughput error_rate * 0 * <= 0 ok",
            "PASSED: 4/4 checks ok in 2 tests (2 passed, 0 failed, 0 errors, 0 skipped)",
        ]
    )


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_server_that_cannot_start_is_one_row_and_every_test_an_error(
    real: pytest.Pytester, xdist: list[str]
) -> None:
    # 0.01 GB of simulated GPU memory: the weights leave no room for the KV cache, SGLang exits.
    result = _run(real, f"--sglang-launch={SIM} --sim-gpu-memory-gb 0.01", *xdist)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*= sglang gates =*",
            "server   did not start: the diagnosis is in the first error of this run",
            "  check * measured * required verdict",
            "sglang server start * ERROR",
            "  startup ready * False * == True FAILED",
            "FAILED: the server did not start; 0/1 checks ok in 2 tests (0 passed, 0 failed,",
            "  2 errors, 0 skipped)",
        ],
        consecutive=True,
    )


def test_a_3x_slower_candidate_fails_and_says_what_it_changes(real: pytest.Pytester, tmp_path: Path) -> None:
    base = tmp_path / "prod.json"
    _run(real, FAST, f"--sglang-report={base}").assert_outcomes(passed=2)
    report_path = tmp_path / "candidate.json"
    result = _run(real, CANDIDATE, f"--sglang-baseline={base}", "--sglang-max-regression=5%",
                  f"--sglang-report={report_path}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_real_gates.py::test_throughput - *"])
    result.stdout.fnmatch_lines(
        [
            "*sglang baseline gate failed: output_throughput * tok/s (required >= *)*",
            "*  candidate vs baseline: launch_args: --sim-time-scale 0.05 -> --sim-time-scale 0.15",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "baseline candidate compared (same model, GPU and host)",
            "  candidate vs baseline: launch_args:",
            "    --sim-time-scale 0.05 -> --sim-time-scale 0.15",
            "  check * measured * required verdict",
        ]
    )
    assert "NOT COMPARED" not in result.stdout.str()
    report = json.loads(report_path.read_text())
    assert validation_errors(report) == []
    assert report["baseline"]["candidate_changes"] == [
        {"field": "launch_args", "baseline": "--sim-time-scale 0.05", "candidate": "--sim-time-scale 0.15"}]


def test_a_baseline_of_another_model_is_not_compared(real: pytest.Pytester, tmp_path: Path) -> None:
    base = tmp_path / "prod.json"
    _run(real, FAST, f"--sglang-report={base}").assert_outcomes(passed=2)
    result = _run(real, OTHER_MODEL, f"--sglang-baseline={base}", "--sglang-max-regression=5%")
    result.assert_outcomes(passed=2)  # slower, but nothing to compare it with: a warning
    result.stdout.fnmatch_lines(
        [
            "baseline NOT COMPARED: measured on another setup (warning)",
            "  - model: 'sim/tiny-llama' (baseline) != 'sim/other-llama' (this run)",
            "  check * measured * required verdict",
        ]
    )
    assert "  baseline output_throughput" not in result.stdout.str()
    strict = _run(real, OTHER_MODEL, f"--sglang-baseline={base}", "--sglang-baseline-strict")
    strict.assert_outcomes(failed=2)
    strict.stdout.fnmatch_lines(
        [
            "*sglang baseline gate failed: fingerprint differs (required == equal)*",
            "*model: 'sim/tiny-llama' (baseline) != 'sim/other-llama' (this run)*",
        ]
    )


def test_a_baseline_outside_the_test_dir_still_compares_a_slower_candidate(
    real: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As found: tests in gate/, reports in a CI artifact folder next to it, pytest started in gate/.
    # pytest picks its rootdir before plugin options are parsed: the existing baseline file given as a
    # separate word would move it from gate/ to their common parent (refused, with the fix); a rootdir
    # chosen elsewhere (--rootdir here) gives every id "gate/", and the baseline still matches by key.
    gate = real.mkdir("gate")
    for path in real.path.glob("*.py"):
        path.rename(gate / path.name)
    real.mkdir("artifacts")
    monkeypatch.chdir(gate)
    base = "../artifacts/base.json"
    recorded = _run(real, FAST, "--sglang-report", base)
    recorded.assert_outcomes(passed=2)
    recorded.stdout.fnmatch_lines([f"rootdir: {gate}"])
    refused = _run(real, CANDIDATE, "--sglang-baseline", base, "--sglang-max-regression=5%")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["ERROR: --sglang-baseline='../artifacts/base.json': given as a separate word, an "
                                  f"existing path counts as a test path *the rootdir became {real.path}*. Fix: "
                                  "write --sglang-baseline=../artifacts/base.json"])
    result = _run(real, CANDIDATE, f"--sglang-baseline={base}", f"--rootdir={real.path}", "--sglang-max-regression=5%")
    result.stdout.fnmatch_lines([f"rootdir: {real.path}"])
    # Before: "2 test(s) not in the baseline, not compared", and the 3x slower candidate passed.
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*sglang baseline gate failed: output_throughput * tok/s (required >= *)*"])
    result.stdout.fnmatch_lines(["*matched by its key: ../artifacts/base.json ran this test as "
                                 "test_real_gates.py::test_throughput (pytest's rootdir differed, which the "
                                 "path-like arguments choose)"])
    assert "not in the baseline" not in result.stdout.str()


def test_a_run_whose_tests_are_all_missing_from_the_baseline_fails_under_xdist(
    real: pytest.Pytester, tmp_path: Path
) -> None:
    base = tmp_path / "prod.json"
    _run(real, FAST, f"--sglang-report={base}").assert_outcomes(passed=2)
    renamed = real.path / "test_real_gates.py"
    renamed.write_text(renamed.read_text().replace("def test_", "def test_renamed_"))
    result = _run(real, FAST, f"--sglang-baseline={base}", "-n", "2")
    # Before: both passed, and under xdist the header said "fingerprint matches" (the workers knew which
    # tests were missing, the controller did not): a baseline compared with nothing.
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["baseline COMPARED NOTHING: none of the 2 test(s) that measured figures is in the",
                                 "         baseline (fails): test_real_gates.py::test_renamed_capacity,*"])
    result.stdout.fnmatch_lines(["*compared nothing: none of this run's tests is in the baseline *prod.json (it "
                                 "has 2 test(s) with figures: test_real_gates.py::test_capacity, "
                                 "test_real_gates.py::test_throughput); this test, *"])
    # One renamed test of two: the new one is a note, the other is compared.
    renamed.write_text(renamed.read_text().replace("def test_renamed_capacity", "def test_capacity"))
    some = _run(real, FAST, f"--sglang-baseline={base}", "-n", "2")
    some.assert_outcomes(passed=2)
    some.stdout.fnmatch_lines(["*1 test(s) not in the baseline, not compared:*"])
