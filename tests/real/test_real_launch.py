"""The plugin launches real SGLang 0.5.23 itself (process runner), shows its phases, stops it fully."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from realsgl import RealSetup, launch_options

pytestmark = pytest.mark.real_sglang


def test_plugin_launches_real_sglang(
    pytester: pytest.Pytester, inner_file: Callable[[str], Path], real_setup: RealSetup,
    leftover_check: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REAL_EXPECT_MODEL", str(real_setup.model))
    inner_file("launch")
    log_dir = pytester.path / "logs"
    result = pytester.runpytest_subprocess(*launch_options(real_setup, log_dir), "-v", timeout=300)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        # report header: mode, runner and where the log goes
        "sglang: mode=launch runner=process*",
        f"sglang: server logs in {log_dir}*",
        # the ready summary, with the KV pool read from SGLang's own log lines (Appendix B)
        "SGLang ready in *s (max_total_num_tokens=4,096*",
    ])
    # The phases: live lines in a log only for a phase that lasted 1 s or more (CI logs stay short),
    # and every phase in the summary's startup line.
    result.stdout.fnmatch_lines(["startup *ready in *loading weights *"])
    logs = list(log_dir.glob("sglang-*.log"))
    assert len(logs) == 1, logs
    log = logs[0].read_text(errors="replace")
    assert "The server is fired up and ready to roll!" in log
    assert "Uvicorn running on" in log


def test_xdist_run_launches_one_real_server(
    pytester: pytest.Pytester, inner_file: Callable[[str], Path], real_setup: RealSetup,
    leftover_check: None,
) -> None:
    inner_file("xdist")
    log_dir = pytester.path / "logs"
    result = pytester.runpytest_subprocess(*launch_options(real_setup, log_dir), "-n", "2", timeout=300)
    result.assert_outcomes(passed=4)
    assert len(list(log_dir.glob("sglang-*.log"))) == 1, list(log_dir.iterdir())  # the controller's only
