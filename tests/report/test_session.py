"""ReportSession end to end through pytest (pytester): terminal section, -n 2, JSON, Markdown, baselines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sglang.report.json_report import validation_errors


def _run(p: pytest.Pytester, *args: str) -> pytest.RunResult:
    return p.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_terminal_section_rows_identity_and_80_columns(synthetic: pytest.Pytester) -> None:
    result = _run(synthetic)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*= sglang gates =*",
            "server   SGLang 0.5.23 | simulator | tiny (tp=1,dp=1)",
            "hardware GPU 1 x H100; host *",
            "url      http://127.0.0.1:1",
            "launch   --model-path tiny --tp 1 --api-key ***",
            "startup  ready in 2.5 s: load weights 1.4 s, warmup 1.0 s",
            "  check * measured * required verdict",
            "sglang server start * PASSED",
            "  startup ready_s * 2.5 s * <= 60 s ok",
            "test_synthetic_gates.py::test_capacity * PASSED",
            "  capacity max_total_num_tokens * 4,096 tok * >= 2,000 tok ok",
            "  capacity max_running_requests * 48 req * >= 16 req ok",
            "test_synthetic_gates.py::test_throughput * PASSED",
            "  throughput output_throughput * 1,000.0 tok/s * >= 100.0 tok/s ok",
            "test_synthetic_gates.py::test_hicache_fails * FAILED",
            "  hicache enable_hierarchical_cache * True * == True ok",
            "  hicache host_pool_tokens * 8,192 tok * >= 12,000 tok FAILED",
            "FAILED: 5/6 checks ok in 3 tests (2 passed, 1 failed, 0 errors, 0 skipped)",
        ],
        consecutive=True,
    )
    # our section only: pytest's own short summary (not truncated when CI is set) follows it
    section = result.stdout.str().split("sglang gates", 1)[1].split("short test summary info")[0].splitlines()[1:]
    assert all(len(line) <= 80 for line in section), [ln for ln in section if len(ln) > 80]
    assert "sk-secret-123456" not in result.stdout.str()


def test_terminal_section_under_xdist_collects_worker_records(synthetic: pytest.Pytester) -> None:
    result = _run(synthetic, "-n", "2")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*= sglang gates =*",
            "server   SGLang 0.5.23 | simulator | tiny (tp=1,dp=1)",
            "test_synthetic_gates.py::test_capacity * PASSED",
            "  capacity max_total_num_tokens * 4,096 tok * >= 2,000 tok ok",
            "FAILED: 5/6 checks ok in 3 tests (2 passed, 1 failed, 0 errors, 0 skipped)",
        ]
    )


def test_json_report_validates_and_holds_records(synthetic: pytest.Pytester, tmp_path: Path) -> None:
    path = tmp_path / "out" / "report.json"
    _run(synthetic, f"--sglang-report={path}").stdout.fnmatch_lines([f"sglang JSON report: {path}"])
    report = json.loads(path.read_text())
    assert validation_errors(report) == []
    fingerprint = report["fingerprint"]
    assert "CPUs" in fingerprint.pop("host")  # this machine's class (CPUs, memory), not its name
    assert fingerprint == {
        "sglang_version": "0.5.23",
        "model": "tiny",
        "runner": "simulator",
        "image": None,
        "gpu_model": "H100",
        "gpu_count": 1,
        "launch_args": ["--tp 1"],
    }
    assert [t["outcome"] for t in report["tests"]] == ["passed", "passed", "passed", "failed"]
    assert report["tests"][0]["nodeid"] == "sglang server start"  # a row of the table, not a test:
    assert {k: report["summary"][k] for k in ("tests", "passed", "failed", "server_start", "checks_failed")} == {
        "tests": 3, "passed": 2, "failed": 1, "server_start": "passed", "checks_failed": 1}
    load = report["tests"][2]["loads"][0]
    assert load["output_throughput"] == 1000.0 and "records" not in load  # only with --sglang-report-requests
    assert "sk-secret-123456" not in path.read_text()


def test_json_report_requests_keeps_per_request_records(synthetic: pytest.Pytester, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    _run(synthetic, f"--sglang-report={path}", "--sglang-report-requests")
    report = json.loads(path.read_text())
    assert validation_errors(report) == []
    assert len(report["tests"][2]["loads"][0]["records"]) == 32


def test_markdown_file_and_github_step_summary(
    synthetic: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    _run(synthetic)
    text = summary.read_text()
    assert text.startswith("earlier step\n## pytest-sglang gates")  # appended, never replaced
    assert (
        "| `test_synthetic_gates.py::test_hicache_fails` | hicache | host_pool_tokens | 8,192 tok "
        "| >= 12,000 tok | ❌ FAILED |  |"
    ) in text
    explicit = tmp_path / "gates.md"
    _run(synthetic, f"--sglang-markdown={explicit}")
    assert (
        "| `test_synthetic_gates.py::test_capacity` | capacity | max_total_num_tokens" in explicit.read_text()
    )


def _baseline(synthetic: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tput: str) -> Path:
    path = tmp_path / "baseline.json"
    monkeypatch.setenv("SYNTH_TPUT", tput)
    _run(synthetic, f"--sglang-report={path}")
    return path


def test_slower_run_fails_exactly_the_throughput_test(
    synthetic: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _baseline(synthetic, tmp_path, monkeypatch, "1000")
    monkeypatch.setenv("SYNTH_TPUT", "800")
    result = _run(synthetic, f"--sglang-baseline={base}", "--sglang-max-regression=output_throughput:5%")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "E * AssertionError: sglang baseline gate failed: "
            "output_throughput 800.0 tok/s (required >= 950.0)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "FAILED test_synthetic_gates.py::test_throughput - *",
            "FAILED test_synthetic_gates.py::test_hicache_fails - *",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*output_throughput: measured 800.0 tok/s, required >= 950.0 tok/s*FAILED",
            "*output_throughput: baseline 1,000.0, this run 800.0 (-20.0%), *allowed regression 5%: regressed when "
            "the change is beyond it and beyond the noise; load *",
        ]
    )


def test_smaller_kv_pool_fails_exactly_the_capacity_test(
    synthetic: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _baseline(synthetic, tmp_path, monkeypatch, "1000")
    monkeypatch.setenv("SYNTH_TOKENS", "3000")  # still above the marker's floor of 2,000
    result = _run(synthetic, f"--sglang-baseline={base}")  # default limits: 5% also on capacity figures
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "FAILED test_synthetic_gates.py::test_capacity - *",
            "FAILED test_synthetic_gates.py::test_hicache_fails - *",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "E * AssertionError: sglang baseline gate failed: max_total_num_tokens 3,000 tok "
            "(required >= 3,891.2)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "test_synthetic_gates.py::test_capacity * FAILED",
            "  capacity max_total_num_tokens * 3,000 tok * >= 2,000 tok ok",
            "  capacity max_running_requests * 48 req * >= 16 req ok",
            "  baseline max_total_num_tokens * 3,000 tok * >= 3,891.2 tok FAILED",
            "  baseline max_running_requests * 48 req * >= 45.6 req ok",
        ],
        consecutive=True,
    )


def test_faster_run_passes_against_baseline(
    synthetic: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _baseline(synthetic, tmp_path, monkeypatch, "1000")
    monkeypatch.setenv("SYNTH_TPUT", "1100")
    result = _run(synthetic, f"--sglang-baseline={base}", "--sglang-max-regression=5%")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["  baseline output_throughput * 1,100.0 tok/s * >= 950.0 tok/s ok"])


def test_different_fingerprint_warns_by_default(
    synthetic: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _baseline(synthetic, tmp_path, monkeypatch, "1000")
    monkeypatch.setenv("SYNTH_GPU", "A100")
    result = _run(synthetic, f"--sglang-baseline={base}")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "baseline NOT COMPARED: measured on another setup (warning)",
            "  - gpu_model: 'H100' (baseline) != 'A100' (this run)",
            "  check * measured * required verdict",
        ]
    )
    assert "  baseline output_throughput" not in result.stdout.str()  # nothing compared


def test_different_fingerprint_fails_with_strict(
    synthetic: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _baseline(synthetic, tmp_path, monkeypatch, "1000")
    monkeypatch.setenv("SYNTH_GPU", "A100")
    result = _run(synthetic, f"--sglang-baseline={base}", "--sglang-baseline-strict")
    result.assert_outcomes(passed=0, failed=3)  # capacity figures are compared too (default limits)
    result.stdout.fnmatch_lines(
        [
            "E * AssertionError: sglang baseline gate failed: fingerprint differs (required == equal)",
        ]
    )
    result.stdout.fnmatch_lines(
        ["FAILED test_synthetic_gates.py::test_capacity - *", "FAILED test_synthetic_gates.py::test_throughput - *"]
    )
    result.stdout.fnmatch_lines(
        ["*not compared with *baseline.json: the figures were measured on another setup:",
         "*gpu_model: 'H100' (baseline) != 'A100' (this run)"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--sglang-max-regression=fast"],
            "ERROR: --sglang-max-regression='fast': cannot read 'fast'. Fix: write a "
            "percentage like 5% or metric:percent pairs like output_throughput:5%,p99_ttft_ms:10%",
        ),
        (
            ["--sglang-baseline=missing.json"],
            "ERROR: --sglang-baseline='missing.json': file not found. Fix: point "
            "it to a JSON report written with --sglang-report",
        ),
    ],
)
def test_bad_baseline_options_are_usage_errors(
    synthetic: pytest.Pytester, args: list[str], message: str
) -> None:
    result = _run(synthetic, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
