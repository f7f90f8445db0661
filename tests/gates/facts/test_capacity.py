"""The capacity gate on recorded (and derived) /server_info payloads: thresholds, sources, messages."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.facts.capacity import (
    assert_capacity,
    evaluate_capacity,
    peak_overlap,
    verify_live_checks,
)
from pytest_sglang.loadgen import LoadResult, LoadSpec, RequestRecord

CAPTURE = Path(__file__).parents[3] / "fixtures" / "captures-0.5.23" / "basic" / "server_info.txt"


@pytest.fixture
def info() -> dict[str, Any]:
    """SGLang 0.5.23's recorded /server_info: 4,096 tokens, 2,048 running, max_req_input_len 2,042."""
    data: dict[str, Any] = json.loads(CAPTURE.read_text().split("\n\n", 1)[1])
    return data


def seed_info(info: dict[str, Any], tokens: int, dp: int = 1) -> dict[str, Any]:
    """The recorded payload with the seed's capacity (derived: one internal_states item per DP rank)."""
    out = copy.deepcopy(info)
    out.update(max_total_num_tokens=tokens, mem_fraction_static=0.93, max_total_tokens=None, dp_size=dp)
    state = out["internal_states"][0]
    state["memory_usage"]["token_capacity"] = tokens
    out["internal_states"] = [copy.deepcopy(state) for _ in range(dp)]
    return out


@pytest.mark.parametrize(("kw", "metric"), [
    ({"min_total_tokens": 4096}, "max_total_num_tokens"),
    ({"min_running_requests": 2048}, "max_running_requests"),
    ({"min_context_length": 2048}, "context_length"),
    ({"min_concurrent_requests": 4, "avg_request_tokens": 1024}, "concurrent_requests"),
])
def test_passes_at_threshold_and_fails_one_above(info: dict[str, Any], kw: dict[str, int],
                                                 metric: str) -> None:
    assert evaluate_capacity(info, **kw).passed
    key = next(k for k in kw if k.startswith("min_"))
    above = {**kw, key: kw[key] + 1}
    outcome = evaluate_capacity(info, **above)
    assert not outcome.passed
    # the headline names the keyword as written, then the figure measured
    assert outcome.message().startswith(f"sglang capacity gate failed: {key}={kw[key] + 1}: measured ")
    assert outcome.message().splitlines()[0].endswith(f"({metric})")
    with pytest.raises(AssertionError) as exc:
        assert_capacity(info, **above)
    assert str(exc.value) == outcome.message()


def test_seed_message_names_measured_required_source_and_flags(info: dict[str, Any]) -> None:
    outcome = evaluate_capacity(seed_info(info, 116_171), min_total_tokens=231_120)
    lines = outcome.message().splitlines()
    assert lines[0] == ("sglang capacity gate failed: min_total_tokens=231120: measured 116,171 tokens "
                        "(max_total_num_tokens)")
    assert lines[1] == ("  min_total_tokens=231120: max_total_num_tokens measured 116,171 tokens, required "
                        ">= 231,120 tokens [/server_info internal_states[i].memory_usage.token_capacity]: FAILED")
    assert lines[-1] == ("Fix: raise --mem-fraction-static (now 0.93: the GPU share for weights + KV pool); "
                         "--max-total-tokens only lowers it; estimate first with: "
                         "python -m pytest_sglang plan -- <launch args>")
    assert evaluate_capacity(seed_info(info, 231_120), min_total_tokens=231_120).passed


def test_capped_pool_names_max_total_tokens(info: dict[str, Any]) -> None:
    message = evaluate_capacity(info, min_total_tokens=8192).message()
    assert "raise or drop --max-total-tokens (now 4096: it caps the pool)" in message


def test_per_dp_rank_uses_the_smallest_rank(info: dict[str, Any]) -> None:
    two = seed_info(info, 231_120, dp=2)
    two["internal_states"][1]["memory_usage"]["token_capacity"] = 200_000
    check = evaluate_capacity(two, min_total_tokens=231_120).checks[0]
    assert (check.measured, check.passed) == (200_000, False)
    assert check.detail == "per DP rank: 231,120, 200,000"


def test_concurrency_is_summed_over_ranks_and_bounded_by_running_requests(info: dict[str, Any]) -> None:
    two = seed_info(info, 231_120, dp=2)
    check = evaluate_capacity(two, min_concurrent_requests=114, avg_request_tokens=4000).checks[0]
    assert (check.measured, check.passed) == (2 * 57, True)
    two["internal_states"][0]["effective_max_running_requests_per_dp"] = 10
    assert evaluate_capacity(two, min_concurrent_requests=1, avg_request_tokens=4000).checks[0].measured == 67


def test_older_layout_falls_back_to_top_level(info: dict[str, Any]) -> None:
    old = {k: v for k, v in info.items() if k != "internal_states"}
    check = evaluate_capacity(old, min_total_tokens=4096).checks[0]
    assert (check.passed, check.source) == (True, "/server_info max_total_num_tokens")


def test_unreported_figure_fails_and_says_why(info: dict[str, Any]) -> None:
    old = {k: v for k, v in info.items() if k != "internal_states"}
    check = evaluate_capacity(old, min_running_requests=1).checks[0]
    assert check.measured is None and not check.passed
    assert "effective_max_running_requests_per_dp is missing" in check.source


def test_context_from_v1_models_is_bounded_by_the_pool(info: dict[str, Any]) -> None:
    check = evaluate_capacity(info, min_context_length=4096, max_model_len=131_072).checks[0]
    assert check.measured == 4096
    assert check.source == "/v1/models max_model_len 131,072, bounded by the KV pool 4,096"


@pytest.mark.parametrize(("kw", "text"), [
    ({"min_total_tokens": -1}, "evaluate_capacity(min_total_tokens=-1): must be a whole number >= 1. "
                               "Fix: give min_total_tokens a whole number >= 1, or leave it out"),
    ({"min_total_tokens": 1.5}, "evaluate_capacity(min_total_tokens=1.5): must be a whole number >= 1, not float"),
    ({"min_total_tokens": "4k"}, "evaluate_capacity(min_total_tokens='4k'): must be a whole number >= 1, not "
                                 "the string '4k'"),
    ({"min_concurrent_requests": 50}, "evaluate_capacity(min_concurrent_requests=50): needs "
                                      "avg_request_tokens"),
    ({}, "evaluate_capacity(): checks nothing, so it would always pass. Fix: give at least one of "
         "min_total_tokens, "),
])
def test_bad_keywords_are_config_errors(info: dict[str, Any], kw: dict[str, Any], text: str) -> None:
    with pytest.raises(ConfigError) as exc:
        evaluate_capacity(info, **kw)
    assert str(exc.value).startswith(text)


def test_peak_overlap() -> None:
    assert peak_overlap([]) == 0
    assert peak_overlap([(0, 2), (1, 3), (2, 4)]) == 2  # touching ends do not overlap
    assert peak_overlap([(0, 10)] * 5) == 5


def _result(intervals: list[tuple[float, float]]) -> LoadResult:
    records = [RequestRecord(index=i, start=0.0, ttft=a, e2e=b, output_len=1, expected_output_len=1)
               for i, (a, b) in enumerate(intervals)]
    return LoadResult.from_records(LoadSpec(requests=len(records), concurrency=len(records)), records, 1.0)


def test_live_checks_pass_when_all_ran_together() -> None:
    checks = verify_live_checks(_result([(0.1, 1.0)] * 4), 4)
    assert all(c.passed for c in checks)
    assert checks[1].source.endswith(
        "/metrics not sampled (start the server with --enable-metrics to see its view)")


def test_live_checks_fail_when_requests_queued() -> None:
    checks = verify_live_checks(_result([(0.1, 1.0), (0.1, 1.0), (1.1, 2.0), (1.1, 2.0)]), 4)
    assert [c.passed for c in checks] == [True, False]
    assert checks[1].measured == 2
    assert "requests queued instead of running together" in checks[1].remedy
