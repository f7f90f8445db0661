"""What a marker needs from the launch is checked before anything starts (launch) or before its load (attach)."""

from __future__ import annotations

import pytest

from tests.conftest import SimFactory

PD = """
import pytest


@pytest.mark.sglang_pd(requests=4)
def test_pd():
    pass
"""

HICACHE = """
import pytest


@pytest.mark.sglang_hicache()
def test_hicache():
    pass


@pytest.mark.sglang_hicache(enabled=False)
def test_no_hicache():
    pass
"""


def test_a_pd_launch_without_metrics_is_refused_before_any_worker_starts(pytester: pytest.Pytester) -> None:
    # Before: the whole fleet started, the load ran, and only then "metrics are disabled".
    pytester.makepyfile(test_inner=PD)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-prefill", "1", "--sglang-decode", "1",
                                           "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["test_inner.py::test_pd: @pytest.mark.sglang_pd needs --enable-metrics in the "
                                 "prefill and decode launch args: *Fix: add --enable-metrics to --sglang-launch "
                                 "(or pass load=False in the marker)"])
    assert "serving at" not in result.stdout.str()


def test_a_role_flag_given_to_one_role_only_is_named_with_the_other_role(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=PD.replace("requests=4", "kv_checksum=True, load=False"))
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-prefill", "1", "--sglang-decode", "1",
        "--sglang-prefill-launch=--disaggregation-enable-kv-checksum", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*sglang_pd needs --disaggregation-enable-kv-checksum in the decode launch args:*"
                                 "(or drop kv_checksum in the marker)"])


def test_attached_the_needs_are_read_from_server_info_before_the_gate(pytester: pytest.Pytester,
                                                                       sim_factory: SimFactory) -> None:
    sim = sim_factory()  # no --enable-hierarchical-cache
    pytester.makepyfile(test_inner=HICACHE)
    result = pytester.runpytest_subprocess("--sglang-url", sim.url, "-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "sglang hicache gate failed: enabled=True: measured False (enable_hierarchical_cache)",
        "  enabled=True: enable_hierarchical_cache measured False, required == True ?SGLangServer http://* "
        "mode=attach /server_info?: FAILED",
        "Fix: launch the server with --enable-hierarchical-cache: the hierarchical cache is what it judges",
    ], consecutive=True)
