"""``--sglang-baseline`` is read under a cap: an oversized file is a usage error, never an INTERNALERROR."""

from __future__ import annotations

import pytest


def test_an_oversized_baseline_is_a_usage_error_naming_size_and_cap(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="def test_x():\n    pass\n")
    with (pytester.path / "big.json").open("wb") as fh:
        fh.truncate(70 * 2**20)  # sparse: nothing is written
    result = pytester.runpytest_subprocess("--sglang-baseline=big.json")
    # Before: the whole file was read and parsed (MemoryError at ~2.7 GB under a 3 GB limit: INTERNALERROR).
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --sglang-baseline='big.json': is 70.0 MiB, larger than the 64.0 MiB cap "
                                 "of a file read whole. Fix: point it to a JSON report written with --sglang-report"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
