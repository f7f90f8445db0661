"""Floors judged with the noise measured in the same run: which bound is judged, and unreliable percentiles."""

from __future__ import annotations

import random

from pytest_sglang.gates.load import slo
from pytest_sglang.gates.load.throughput import evaluate_throughput, judge
from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.loadgen.measure.record import RequestRecord


def result(requests: int = 200, seed: int = 1, slow: float = 1.0) -> LoadResult:
    rng = random.Random(seed)
    records = []
    for i in range(requests):
        ttft = slow * 0.05 * (1 + 0.5 * rng.random())
        itl = [slow * 0.01 * (1 + 0.2 * rng.random()) for _ in range(15)]
        records.append(RequestRecord(index=i, start=i * 0.01, ttft=ttft, itl=itl, e2e=ttft + sum(itl),
                                     output_len=16, prompt_len=64, expected_output_len=16))
    spec = LoadSpec(requests=requests, concurrency=16, input_len=64, output_len=16)
    return LoadResult.from_records(spec, records, slow * requests * 0.01)


def test_the_favourable_bound_is_judged_by_default_and_the_other_with_proven() -> None:
    r = result()
    p99 = r.p99_ttft_ms
    check = evaluate_throughput(r, max_ttft_ms_p99=p99 * 0.998).checks[0]
    assert check.passed and isinstance(check.measured, float) and check.measured < p99 * 0.998
    assert "judged: the lower bound of the 95% interval [" in check.detail
    assert "fails only when the whole interval misses the floor" in check.detail
    strict = evaluate_throughput(r, max_ttft_ms_p99=p99 * 1.002, proven=True).checks[0]
    assert not strict.passed and isinstance(strict.measured, float) and strict.measured > p99 * 1.002
    assert "judged: the upper bound" in strict.detail and "(proven=True)" in strict.detail
    tput = evaluate_throughput(r, min_output_tok_s=r.output_throughput * 1.001).checks[0]
    assert tput.passed and "judged: the upper bound of the 95% interval" in tput.detail


def test_a_floor_far_beyond_the_noise_still_fails() -> None:
    r = result()
    outcome = evaluate_throughput(r, min_output_tok_s=r.output_throughput * 1.5, max_ttft_ms_p99=r.p99_ttft_ms / 2)
    assert [c.passed for c in outcome.checks[:2]] == [False, False]


def test_the_point_reading_judges_the_figure_itself() -> None:
    r = result()
    check = evaluate_throughput(r, max_ttft_ms_p99=r.p99_ttft_ms * 0.995, reading="point").checks[0]
    assert not check.passed and check.measured == r.p99_ttft_ms


def test_repeats_widen_the_interval() -> None:
    runs = [result(seed=1), result(seed=2, slow=1.3), result(seed=3, slow=0.8)]
    one = judge(runs[0], {"min_output_tok_s": 1.0}, 0.0, runs=runs[:1]).checks[0].detail
    three = judge(runs[0], {"min_output_tok_s": 1.0}, 0.0, runs=runs).checks[0].detail
    assert "noise from per-request bootstrap)" in one and "noise from per-request bootstrap and 3 repeats" in three


def test_a_p99_from_few_requests_gets_a_warning_line() -> None:
    outcome = evaluate_throughput(result(requests=12), max_ttft_ms_p99=10_000)
    assert outcome.passed
    assert ("WARNING: max_ttft_ms_p99: p99_ttft_ms from 12 requests is unreliable: a p99 needs at least 100 "
            "(from 12 it is about their maximum); raise requests=") in outcome.notes
    assert not [n for n in evaluate_throughput(result(requests=120), max_ttft_ms_p99=10_000).notes
                if "unreliable" in n]


def test_slo_levels_below_the_counts_are_warned() -> None:
    curve = {4: {"requests": 16}, 64: {"requests": 128}}
    lines = slo.unreliable_levels({"max_ttft_ms_p99": 100.0, "max_tpot_ms_median": 20.0}, curve)
    assert lines == ["WARNING: max_ttft_ms_p99: at concurrency 4 (16 requests): p99_ttft_ms from 16 requests is "
                     "unreliable: a p99 needs at least 100 (from 16 it is about their maximum); raise requests="]
