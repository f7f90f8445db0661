"""``sglang_fleet`` and the load gates on a launched fleet: health, request shares, cache-aware routing.

Real pytest sessions (pytester) launching simulator workers behind the real gateway (smg 1.13) with
``--sglang-simulate --sglang-workers N``; the gateway's policy decides what the gates must see.
"""

from __future__ import annotations

import pytest

from gates.fleetkit import SIM_LAUNCH

ROUND_ROBIN = """
import pytest

LOAD = dict(requests=29, concurrency=3, input_len=32, output_len=4)


@pytest.mark.sglang_fleet(min_healthy=3, max_imbalance=0.1, **LOAD)
def test_healthy_alike_and_even(sglang_gate, sglang_fleet):
    outcome = sglang_gate["fleet"]
    assert [c.metric for c in outcome.checks] == ["healthy_workers", "differing_fields", "registration_mismatches",
                                                    "request_imbalance"]
    assert outcome.checks[3].measured == 0  # round robin: 29 requests + 1 warmup = 10 each
    assert set(outcome.context["worker_requests"]) == {w.url for w in sglang_fleet.workers}


@pytest.mark.sglang_fleet(cache_aware=True)
def test_cache_aware_fails_under_round_robin():
    pass


@pytest.mark.sglang_throughput(requests=29, concurrency=3, input_len=32, output_len=4)
def test_throughput_records_worker_shares(sglang_gate, sglang_fleet):
    from pytest_sglang.gates.load.shares import worker_shares

    outcome = sglang_gate["throughput"]
    shares = worker_shares(outcome.to_dict())  # as a report reads it back
    assert set(shares) == {w.url for w in sglang_fleet.workers}
    assert abs(sum(shares.values()) - 1) < 1e-3
    assert sorted(outcome.context["worker_requests"].values()) == [10, 10, 10]  # 29 + 1 warmup, round robin


@pytest.mark.sglang_slo(max_e2e_ms_p99=60000, min_concurrency=1, max_concurrency=2, input_len=32, output_len=4)
def test_slo_records_worker_shares(sglang_gate):
    requests = sglang_gate["slo"].context["worker_requests"]
    assert len(requests) == 3 and sum(requests.values()) >= 32  # two levels of 16 requests (and warmups)
    assert max(requests.values()) - min(requests.values()) <= 1
"""


def test_round_robin_fleet_is_even_but_not_cache_aware(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=ROUND_ROBIN)
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-workers", "3", "--sglang-launch", SIM_LAUNCH,
        "--sglang-gateway", "--policy round_robin", "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines([
        "sglang fleet gate failed: cached_tokens_via_gateway * tokens (required >= *)",
        "  healthy_workers: measured 3 workers, required >= 3 workers [[]the gateway's GET /workers is_healthy "
        "and each worker's own GET /health (200); required: every listed worker (3)[]]: ok",
        "  differing_fields: measured none, required == none [[]each worker's own /server_info: 51 launch fields "
        "compared[]]: ok",
        "  registration_mismatches: measured none, required == none [[]*: 3 worker(s)[]]: ok",
        "  cached_tokens_via_gateway: measured * tokens, required >= * tokens [[]sum of meta_info.cached_tokens "
        "over 65 requests per pass; required: random routing's * + half of the * reusable tokens it missed "
        "(ideal routing caches 3,328)[]]: FAILED",
        "  gateway: gateway=smg 1.13.0 workers=3; GET /readiness -> 200 (3/3 workers healthy)",
        "  cache-aware routing: 13 prefixes x 64 tokens, each sent 5 times *",
        "  worker 0 (http://127.0.0.1:*): gateway says healthy, own /health 200",
        "  worker 1 (http://127.0.0.1:*): gateway says healthy, own /health 200",
        "  worker 2 (http://127.0.0.1:*): gateway says healthy, own /health 200",
        "Fix: run the gateway with --policy cache_aware (--sglang-gateway \"--policy cache_aware\"); *",
    ], consecutive=True)


CACHE_AWARE = """
import pytest


@pytest.mark.sglang_fleet(cache_aware=True)
def test_cache_aware_routing_works(sglang_gate):
    check = sglang_gate["fleet"].checks[-1]
    assert check.metric == "cached_tokens_via_gateway" and check.passed
    assert check.measured == 2496  # ideal: 13 prefixes x 3 repeats x 64 tokens all cached


@pytest.mark.sglang_fleet(max_imbalance=0.05, requests=16, concurrency=4, input_len=64, output_len=4)
def test_imbalance_failure_names_each_share():
    pass
"""


def test_cache_aware_gateway_passes_the_cache_check(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=CACHE_AWARE)
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-workers", "2", "--sglang-launch", SIM_LAUNCH,
        "--sglang-gateway", "--policy cache_aware", "-p", "no:cacheprovider", "-rfE")
    # 16 requests + 1 warmup cannot split evenly over 2 workers: at best 9/8, an imbalance of 0.0588 > 0.05.
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "sglang fleet gate failed: max_imbalance=0.05: measured * (request_imbalance)",
        "*  max_imbalance=0.05: request_imbalance measured *, required <= 0.05 [[]each worker's own /metrics "
        "sglang:num_requests_total during the load; fair share 50.0% each of 2 regular workers; shares: "
        "worker 0 (http://127.0.0.1:*) *% (* requests), worker 1 (http://127.0.0.1:*) *% (* requests)[]]: FAILED",
    ])
    result.stdout.fnmatch_lines(["  worker_shares: {'http://127.0.0.1:*': *, 'http://127.0.0.1:*': *}"])


def test_on_a_single_server_the_marker_says_it_needs_a_gateway(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_single="""
import pytest

@pytest.mark.sglang_fleet()
def test_fleet():
    pass
""")
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", SIM_LAUNCH, "-p",
                                           "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "sglang fleet gate failed: gateway a single SGLang server (no gateway in front) (required == SGLang's "
        "gateway with its workers)",
        "  gateway: measured a single SGLang server (no gateway in front), required == SGLang's gateway with its "
        "workers [[]http://127.0.0.1:*: GET /workers is not a worker list[]]: FAILED",
        "Fix: point --sglang-url at SGLang's gateway (smg or sglang-router), or launch a fleet with "
        "--sglang-workers N (and --sglang-gateway \"ARGS\")",
    ], consecutive=True)


BAD = """
import pytest

@pytest.mark.sglang_fleet(ignore=["tp_sise", "model_path"])
def test_typo():
    pass

@pytest.mark.sglang_fleet(ignore="tp_size")
def test_not_a_list():
    pass

@pytest.mark.sglang_fleet(ignore=[3])
def test_not_names():
    pass

@pytest.mark.sglang_fleet(max_imbalance=-0.1)
def test_negative():
    pass

@pytest.mark.sglang_fleet(min_healthy=0)
def test_zero_healthy():
    pass

@pytest.mark.sglang_fleet(cache_aware="yes")
def test_not_a_bool():
    pass

@pytest.mark.sglang_fleet(consistant=True)
def test_unknown_keyword():
    pass
"""


def test_bad_keyword_values_are_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad=BAD)
    result = pytester.runpytest_subprocess("--sglang-url", "http://127.0.0.1:9", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: invalid pytest-sglang marker:",
        "test_bad.py::test_typo: @pytest.mark.sglang_fleet(ignore=['tp_sise', 'model_path']): has an unknown name "
        "'tp_sise': not one of the fields sglang_fleet compares (see docs/fleet.md). Fix: write "
        "ignore=['tp_size', 'model_path']",
        "test_bad.py::test_not_a_list: @pytest.mark.sglang_fleet(ignore='tp_size'): must be a list of strings naming "
        "fields sglang_fleet compares (see docs/fleet.md), not the string 'tp_size'. Fix: write ignore=['tp_size']",
        "test_bad.py::test_not_names: @pytest.mark.sglang_fleet(ignore=[[]3[]]): must be a list of strings *. Fix: *",
        "test_bad.py::test_negative: @pytest.mark.sglang_fleet(max_imbalance=-0.1): must be a number >= 0. Fix: *",
        "test_bad.py::test_zero_healthy: @pytest.mark.sglang_fleet(min_healthy=0): must be a whole number >= 1. *",
        "test_bad.py::test_not_a_bool: @pytest.mark.sglang_fleet(cache_aware='yes'): must be True or False, *",
        "test_bad.py::test_unknown_keyword: @pytest.mark.sglang_fleet has no keyword 'consistant' (did you mean "
        "'consistent'?); valid keywords: min_healthy, consistent, ignore, *",
    ], consecutive=True)
