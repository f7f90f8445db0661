"""``--sglang-run-label``: a real run's JSON report carries its label, and ``trend`` reads such reports."""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_sglang.report.json_report import validation_errors

LAUNCH = "--sglang-launch=--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05"


def test_the_label_is_in_the_report_and_trend_names_runs_by_it(real: pytest.Pytester, tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    result = real.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate", LAUNCH,
                                       f"--sglang-report={path}", "--sglang-run-label=3f4192f", timeout=180)
    result.assert_outcomes(passed=2)
    report = json.loads(path.read_text())
    assert report["run_label"] == "3f4192f" and validation_errors(report) == []
    # Eight nights of that report (a day apart, each with its own label): trend reads the real shape.
    written = _dt.datetime.fromisoformat(report["generated_at"])
    history = tmp_path / "history"
    history.mkdir()
    for night in range(8):
        load = report["tests"][2]["loads"][0]
        load["output_throughput"] *= 1.0 + 0.001 * (night % 3)  # a little noise, no step
        night_report = {**report, "run_label": f"n{night}",
                        "generated_at": (written + _dt.timedelta(days=night)).isoformat()}
        (history / f"{7 - night}.json").write_text(json.dumps(night_report))  # names not in time order
    done = subprocess.run([sys.executable, "-m", "pytest_sglang", "trend", str(history), "--metric",
                           "output_throughput"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "trend: 8 runs, n0 .. n7" in done.stdout and "in 1 series judged" in done.stdout


def test_without_a_label_the_report_says_null(real: pytest.Pytester, tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    real.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate", LAUNCH, f"--sglang-report={path}",
                              "-k", "capacity", timeout=180).assert_outcomes(passed=1, deselected=1)
    assert json.loads(path.read_text())["run_label"] is None
