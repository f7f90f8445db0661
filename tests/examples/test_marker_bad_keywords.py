"""Inner test file: marker keywords with wrong types, ranges, choices and relations, and a misspelt
marker name. Every one is a usage error at collection, before any server work."""

from __future__ import annotations

import pytest


@pytest.mark.sglang_throughput(max_error_rate="1%", requests=4)
def test_rate_as_text():
    pass


@pytest.mark.sglang_throughput(max_error_rate=5)
def test_rate_as_percent():
    pass


@pytest.mark.sglang_throughput(min_output_tok_s=-100)
def test_negative_floor():
    pass


@pytest.mark.sglang_throughput(max_ttft_ms_p99=float("nan"))
def test_nan_ceiling():
    pass


@pytest.mark.sglang_capacity(min_total_tokens=True)
def test_bool_as_number():
    pass


@pytest.mark.sglang_capacity(verify_live=False)
def test_no_threshold():
    pass


@pytest.mark.sglang_hicache(write_policy="write_thru")
def test_unknown_choice():
    pass


@pytest.mark.sglang_hicache(min_gain=1.5)
def test_gain_without_workload():
    pass


@pytest.mark.sglang_throughtput(min_output_tok_s=100)
def test_misspelt_marker():
    pass


def test_unmarked():
    pass
