"""End to end through pytest: each marker passes at its threshold and fails one unit above."""

from __future__ import annotations

import pytest

LAUNCH = ("--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.1 --max-total-tokens 8192 "
          "--enable-hierarchical-cache --hicache-size 1")
# tiny: 8 KV heads x 64 x 2 x 4 layers x 2 bytes = 8,192 bytes per token; 1e9 // 8,192 + 1 page = 122,071.
INNER = """
import pytest

@pytest.mark.sglang_capacity(min_total_tokens=8192, min_running_requests=2048, min_context_length=8192,
                             min_concurrent_requests=8, avg_request_tokens=1024)
def test_capacity_at_threshold():
    pass

@pytest.mark.sglang_capacity(min_total_tokens=8193)
def test_capacity_one_above():
    pass

@pytest.mark.sglang_hicache(min_host_tokens=122071, min_host_gb_per_rank=1, min_ratio=14.9,
                            write_policy="write_through")
def test_hicache_at_threshold(sglang_server):
    pass

@pytest.mark.sglang_hicache(min_host_tokens=122072)
def test_hicache_one_above():
    pass

@pytest.mark.sglang_hicache(min_host_gb_per_rank=2)
def test_hicache_gb_above():
    pass

@pytest.mark.sglang_capacity(min_concurrent_requests=8, avg_request_tokens=1024, verify_live=True)
@pytest.mark.sglang_hicache(effective=True)
def test_live(sglang_gate):
    pass
"""


def test_markers_pass_at_threshold_and_fail_one_unit_above(pytester: pytest.Pytester) -> None:
    # One inner run checks every marker: a simulator launch per case would be slow.
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("--sglang-runner", "simulator", "--sglang-launch", LAUNCH,
                                           "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=3, failed=3)
    # Each failure names the keyword as the user wrote it, then the measured figure and its source.
    result.stdout.fnmatch_lines([
        "sglang capacity gate failed: min_total_tokens=8193: measured 8,192 tokens (max_total_num_tokens)",
        "  min_total_tokens=8193: max_total_num_tokens measured 8,192 tokens, required >= 8,193 tokens "
        "[[]/server_info internal_states[[]i[]].memory_usage.token_capacity[]]: FAILED",
        "  server args: mem_fraction_static=0.719, max_total_tokens=8192, *",
        "Fix: raise --mem-fraction-static (now 0.719: the GPU share for weights + KV pool); raise or "
        "drop --max-total-tokens (now 8192: it caps the pool); *",
    ], consecutive=True)
    result.stdout.fnmatch_lines([
        "sglang hicache gate failed: min_host_tokens=122072: measured 122,071 tokens (host_pool_tokens)",
    ])
    result.stdout.fnmatch_lines([
        "sglang hicache gate failed: min_host_gb_per_rank=2: measured 1 GB (host_pool_gb_per_rank)",
        "*min_host_gb_per_rank=2: host_pool_gb_per_rank measured 1 GB, required >= 2 GB [[]startup log: 1 "
        "'Allocating kv hierarchical KV host pool' line(s)[]]: FAILED",
    ])
    result.stdout.fnmatch_lines(["*capacity live_concurrent_requests * >= 8 requests ok"])
    result.stdout.fnmatch_lines(["*hicache host_hit_tokens * tokens ok"])


def test_a_gate_that_recorded_no_check_fails_instead_of_passing(pytester: pytest.Pytester) -> None:
    """No green that checked nothing, whatever the gate: an outcome without a check is the test's failure."""
    pytester.makeconftest('''
from pytest_sglang.gates import registry
from pytest_sglang.gates.base import GateOutcome
from pytest_sglang.gates.keywords import Always, rules


@rules(Always("nothing, for this test"))
def empty(ctx, *, floor: int = 1):
    return GateOutcome("empty")


registry.GATES_BY_MARKER["sglang_capacity"] = registry.MarkerGate("sglang_capacity", "conftest:empty", "a test gate")
''')
    pytester.makepyfile(test_inner='''
import pytest


@pytest.mark.sglang_capacity(floor=2)
def test_gate():
    pass
''')
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", "--model-path sim/tiny-llama",
                                           "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.sglang_capacity checked nothing on this server, so it cannot pass: "
                                 "sglang empty gate passed*"])
