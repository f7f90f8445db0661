"""A run stopped by Ctrl-C or SIGTERM says so in the gate summary and the JSON report, never PASSED."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

STOP = """
import os
import signal


def test_zz_stop():
    os.kill(os.getpid(), signal.{name})
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupted_run_says_interrupted(synthetic: pytest.Pytester, tmp_path: Path, sig: signal.Signals) -> None:
    synthetic.makepyfile(test_zz_stop=STOP.format(name=sig.name))
    path = tmp_path / "report.json"
    result = synthetic.runpytest_subprocess("-p", "no:cacheprovider", "-k", "capacity or throughput or stop",
                                            f"--sglang-report={path}")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*= sglang gates =*", "test_synthetic_gates.py::test_capacity * PASSED"])
    result.stdout.fnmatch_lines(["INTERRUPTED: the run was stopped before it finished; 4/4 checks ok in 2 tests*"])
    section = result.stdout.str().split("sglang gates", 1)[1]
    assert "PASSED:" not in section
    report = json.loads(path.read_text())
    assert report["summary"]["interrupted"] is True and report["exitstatus"] == 2


def test_a_finished_run_is_not_interrupted(synthetic: pytest.Pytester, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    result = synthetic.runpytest_subprocess("-p", "no:cacheprovider", "-k", "capacity or throughput",
                                            f"--sglang-report={path}")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["PASSED: 4/4 checks ok in 2 tests*"])
    assert json.loads(path.read_text())["summary"]["interrupted"] is False
