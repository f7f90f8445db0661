"""The baseline options through pytest: a misspelt metric and a limit without a baseline are never silent."""

from __future__ import annotations

import pytest


def _run(p: pytest.Pytester, *args: str) -> pytest.RunResult:
    return p.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_a_misspelt_metric_is_a_usage_error_before_anything_starts(synthetic: pytest.Pytester) -> None:
    result = _run(synthetic, "--sglang-max-regression=ouput_throughput:5%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --sglang-max-regression='ouput_throughput:5%': unknown metric "
                                 "'ouput_throughput': it would compare nothing. Fix: did you mean output_throughput?*"])
    assert "passed" not in result.stdout.str()


def test_a_limit_without_a_baseline_says_so(synthetic: pytest.Pytester) -> None:
    result = _run(synthetic, "--sglang-max-regression=5%")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*--sglang-max-regression 5% has no baseline: nothing was compared*"])
