"""Real SGLang 0.5.23 on CPU placed by Ray (--sglang-ray auto: a local Ray for the run)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from realsgl import RealSetup, launch_options

pytestmark = pytest.mark.real_sglang


def test_real_sglang_on_a_ray_node(pytester: pytest.Pytester, inner_file: Callable[[str], Path],
                                   real_setup: RealSetup, leftover_check: None) -> None:
    inner_file("ray")
    log_dir = pytester.path / "logs"
    result = pytester.runpytest_subprocess(*launch_options(real_setup, log_dir), "--sglang-ray=auto", "-s",
                                           timeout=420)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["sglang: ray=auto: launched servers placed on Ray*", "NODE * (node *)"])
    log = next(log_dir.glob("sglang-ray*.log")).read_text(errors="replace")
    assert "on Ray node" in log and "--device cpu" in log  # --device cpu: the bundle asked for no GPU
    assert "The server is fired up and ready to roll!" in log
