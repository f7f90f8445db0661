"""Every metric against hand-computed timelines (bench_serving definitions)."""

from __future__ import annotations

import math

import pytest

from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.measure.stats import calculate_metrics, mean, peaks, percentile, std, tpot


def rec(
    index: int,
    start: float,
    ttft: float,
    itl: list[float],
    e2e: float,
    out: int,
    prompt: int = 10,
    kind: str | None = None,
) -> RequestRecord:
    return RequestRecord(
        index=index,
        start=start,
        ttft=ttft,
        itl=itl,
        e2e=e2e,
        output_len=out,
        prompt_len=prompt,
        expected_output_len=out,
        error_kind=kind,
        error=kind and "boom",
    )


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),  # numpy: 2.5
        ([1.0, 2.0, 3.0, 4.0], 99, 3.97),  # pos = 3*0.99 = 2.97 -> 3 + 0.97*1
        ([1.0, 2.0, 3.0, 4.0], 90, 3.7),
        ([10.0, 0.0, 5.0], 95, 9.5),  # sorted [0,5,10], pos 1.9 -> 5 + 0.9*5
        ([7.0], 99, 7.0),
        ([], 50, 0.0),
    ],
)
def test_percentile_linear_like_numpy(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_mean_and_population_std() -> None:
    assert mean([2, 4, 4, 4, 5, 5, 7, 9]) == 5
    assert std([2, 4, 4, 4, 5, 5, 7, 9]) == 2.0  # population std (numpy ddof=0); sample std is 2.138
    assert std([]) == 0.0 and mean([]) == 0.0


def test_tpot_excludes_first_token_and_needs_two_tokens() -> None:
    assert tpot(rec(0, 0, 0.1, [], 1.1, 11)) == pytest.approx(0.1)
    assert tpot(rec(0, 0, 0.1, [], 1.1, 1)) is None


def test_calculate_metrics_hand_timeline() -> None:
    # Two successes and one failure over a 2.0 s run.
    a = rec(0, 0.0, 0.2, [0.1, 0.1, 0.2], 0.7, 4, prompt=100)
    b = rec(1, 0.5, 0.4, [0.3], 1.0, 2, prompt=50)
    c = rec(2, 0.1, 0.0, [], 0.3, 0, prompt=70, kind="truncated")
    m = calculate_metrics([a, b, c], 2.0)
    assert (m["completed"], m["failed"]) == (2, 1)
    assert m["total_input_tokens"] == 150 and m["total_output_tokens"] == 6
    assert m["request_throughput"] == pytest.approx(1.0)
    assert m["input_throughput"] == pytest.approx(75.0)
    assert m["output_throughput"] == pytest.approx(3.0)
    assert m["total_throughput"] == pytest.approx(78.0)
    assert m["mean_ttft_ms"] == pytest.approx(300.0)
    assert m["median_ttft_ms"] == pytest.approx(300.0)
    assert m["std_ttft_ms"] == pytest.approx(100.0)
    assert m["p99_ttft_ms"] == pytest.approx(398.0)
    # TPOT: a = (0.7-0.2)/3, b = (1.0-0.4)/1
    assert m["mean_tpot_ms"] == pytest.approx(((0.5 / 3) + 0.6) / 2 * 1000)
    # ITL pooled over requests: [0.1, 0.1, 0.2, 0.3]
    assert m["mean_itl_ms"] == pytest.approx(175.0)
    assert m["median_itl_ms"] == pytest.approx(150.0)
    assert m["p90_itl_ms"] == pytest.approx(270.0)  # pos 2.7 -> 0.2 + 0.7*0.1
    assert m["max_itl_ms"] == pytest.approx(300.0)
    assert m["median_e2e_latency_ms"] == pytest.approx(850.0)
    # concurrency = sum(e2e of successes) / duration
    assert m["concurrency"] == pytest.approx((0.7 + 1.0) / 2.0)


def test_peaks_bucket_tokens_and_requests_per_second() -> None:
    # a: tokens at 0.2, 0.3, 0.4, 0.6 (bucket 0); b: tokens at 0.9 (0) and 1.2 (1); active a:0, b:0-1
    a = rec(0, 0.0, 0.2, [0.1, 0.1, 0.2], 0.7, 4)
    b = rec(1, 0.5, 0.4, [0.3], 1.0, 2)
    assert peaks([a, b]) == (5.0, 2)
    assert peaks([]) == (0.0, 0)


def test_all_failed_gives_zeros_not_nan() -> None:
    m = calculate_metrics([rec(0, 0, 0, [], 0.1, 0, kind="http_500")], 1.0)
    assert m["completed"] == 0 and m["failed"] == 1
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in m.values())
    assert m["p99_ttft_ms"] == 0.0


def test_zero_duration_does_not_divide_by_zero() -> None:
    assert calculate_metrics([], 0.0)["request_throughput"] == 0.0
