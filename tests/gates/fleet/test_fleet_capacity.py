"""Capacity and hicache markers on a launched fleet: every worker is judged, one record per worker.

Real pytest sessions (pytester) launching two simulator workers behind the real gateway (smg 1.13).
"""

from __future__ import annotations

import pytest

# tiny profile: the pool is capped at 8,192 tokens per worker, the host pool is 4 x that (+1 page).
LAUNCH = ("--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.3 --max-total-tokens 8192 "
          "--enable-metrics --enable-hierarchical-cache --hicache-ratio 4")
INNER = """
import pytest
from pytest_sglang import assert_capacity, assert_hicache


def _names(fleet):
    return [f"of {w.name()}" for w in fleet.workers]


@pytest.mark.sglang_capacity(min_total_tokens=8192, min_fleet_total_tokens=16384)
def test_every_worker_and_the_sum(sglang_gate, sglang_fleet):
    metrics = [c.metric for c in sglang_gate["capacity"].checks]
    assert metrics == [f"max_total_num_tokens {n}" for n in _names(sglang_fleet)] + ["fleet_total_tokens"]


@pytest.mark.sglang_capacity(min_fleet_total_tokens=16385)
def test_sum_one_above():
    pass


@pytest.mark.sglang_capacity(min_total_tokens=8193)
def test_each_worker_one_above():
    pass


@pytest.mark.sglang_hicache(effective=True, min_host_tokens=32769)
def test_hicache_works_on_every_worker(sglang_gate, sglang_fleet):
    hits = [c for c in sglang_gate["hicache"].checks if c.metric.startswith("host_hit_tokens of ")]
    assert [c.metric for c in hits] == [f"host_hit_tokens {n}" for n in _names(sglang_fleet)]
    assert all(c.passed and c.measured > 0 for c in hits)


@pytest.mark.sglang_hicache(enabled=False)
def test_hicache_off_fails_on_every_worker():
    pass


def test_helpers_take_the_fleet(sglang_fleet, sglang_server):
    outcome = assert_capacity(sglang_fleet, min_total_tokens=8192, min_fleet_total_tokens=16384)
    assert len(outcome.checks) == 3
    assert_hicache(sglang_server, min_host_tokens=32769)  # the gateway's handle: every worker
    with pytest.raises(AssertionError, match=r"measured 8,192 tokens \\(max_total_num_tokens of worker 1 \\("):
        assert_capacity(sglang_fleet, min_total_tokens=8193)
"""


def test_capacity_and_hicache_judge_every_worker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-workers", "2", "--sglang-launch", LAUNCH,
                                           "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=3, failed=3)
    result.stdout.fnmatch_lines([
        "sglang capacity gate failed: min_fleet_total_tokens=16385: measured 16,384 tokens (fleet_total_tokens)",
        "  min_fleet_total_tokens=16385: fleet_total_tokens measured 16,384 tokens, required >= 16,385 tokens "
        "[[]sum over the 2 workers (and their DP ranks) of each worker's /server_info internal_states[[]i[]]"
        ".memory_usage.token_capacity: worker 0 (http://127.0.0.1:*) 8,192 + worker 1 (http://127.0.0.1:*) "
        "8,192[]]: FAILED",
    ], consecutive=True)
    # The failure names each worker below the floor with its figure.
    result.stdout.fnmatch_lines([
        "sglang capacity gate failed: min_total_tokens=8193: measured 8,192 tokens (max_total_num_tokens of "
        "worker 0 (http://127.0.0.1:*)); min_total_tokens=8193: measured 8,192 tokens (max_total_num_tokens of "
        "worker 1 (http://127.0.0.1:*))",
        "  min_total_tokens=8193: max_total_num_tokens of worker 0 (http://127.0.0.1:*) measured 8,192 tokens, "
        "required >= 8,193 tokens [[]/server_info *[]]: FAILED",
        "  min_total_tokens=8193: max_total_num_tokens of worker 1 (http://127.0.0.1:*) measured 8,192 tokens, "
        "required >= 8,193 tokens [[]/server_info *[]]: FAILED",
        "  server args (every worker): mem_fraction_static=0.719, max_total_tokens=8192, *",
    ], consecutive=True)
    result.stdout.fnmatch_lines([
        "sglang hicache gate failed: enabled=False: measured True (enable_hierarchical_cache of worker 0 "
        "(http://127.0.0.1:*)); enabled=False: measured True (enable_hierarchical_cache of worker 1 *",
    ])


def test_min_fleet_total_tokens_on_a_single_server_sums_its_dp_ranks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_single="""
import pytest

@pytest.mark.sglang_capacity(min_fleet_total_tokens=16384)
def test_two_ranks_together(sglang_gate):
    assert sglang_gate["capacity"].checks[0].measured == 16384

@pytest.mark.sglang_capacity(min_fleet_total_tokens=16385)
def test_one_above():
    pass
""")
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-launch",
        "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --max-total-tokens 8192 --dp-size 2",
        "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "sglang capacity gate failed: min_fleet_total_tokens=16385: measured 16,384 tokens (fleet_total_tokens)",
        "  min_fleet_total_tokens=16385: fleet_total_tokens measured 16,384 tokens, required >= 16,385 tokens "
        "[[]one server (no gateway): sum over its DP ranks of *[]]: FAILED",
    ], consecutive=True)


BAD = """
import pytest

@pytest.mark.sglang_capacity(min_fleet_total_tokens=0)
def test_zero():
    pass

@pytest.mark.sglang_capacity(min_fleet_total_tokens="16k")
def test_text():
    pass

@pytest.mark.sglang_capacity(min_fleet_total_tokens=1.5)
def test_fraction():
    pass
"""


def test_bad_min_fleet_total_tokens_values_are_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad=BAD)
    # Refused at collection: the URL is never contacted.
    result = pytester.runpytest_subprocess("--sglang-url", "http://127.0.0.1:9", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: invalid pytest-sglang marker:",
        "test_bad.py::test_zero: @pytest.mark.sglang_capacity(min_fleet_total_tokens=0): must be a whole number "
        ">= 1. Fix: give min_fleet_total_tokens a whole number >= 1, or leave it out",
        "test_bad.py::test_text: @pytest.mark.sglang_capacity(min_fleet_total_tokens='16k'): must be a whole "
        "number >= 1, not the string '16k'. Fix: *",
        "test_bad.py::test_fraction: @pytest.mark.sglang_capacity(min_fleet_total_tokens=1.5): must be a whole "
        "number >= 1, not float. Fix: *",
    ], consecutive=True)
