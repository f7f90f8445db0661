"""Bounded records: exact up to the cap, a uniform sample beyond, exact totals and moments throughout."""

from __future__ import annotations

import random

import pytest

from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.loadgen.measure import collect as collect_module
from pytest_sglang.loadgen.measure.collect import Collector
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.measure.stats import calculate_metrics

EXACT_KEYS = (
    "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
    "output_throughput", "mean_ttft_ms", "std_ttft_ms", "mean_itl_ms", "std_itl_ms", "mean_tpot_ms",
    "mean_e2e_latency_ms", "std_e2e_latency_ms", "max_itl_ms", "concurrency",
)


def records(n: int, seed: int = 1, fail_every: int = 10) -> list[RequestRecord]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        itl = [rng.uniform(0.005, 0.02) for _ in range(4)]
        ttft = rng.uniform(0.05, 0.5)
        rec = RequestRecord(index=i, start=i * 0.01, ttft=ttft, itl=itl, e2e=ttft + sum(itl), output_len=5,
                            prompt_len=16, expected_output_len=5)
        if i % fail_every == 3:
            rec.fail("http_503" if i % 20 == 3 else "timeout", f"reason {i}")
        out.append(rec)
    return out


def test_below_the_cap_every_record_counts_exactly() -> None:
    recs = records(50)
    c = Collector(cap=50)
    for r in reversed(recs):  # completion order differs from index order
        c.add(r)
    assert not c.sampled and len(c.records) == 50
    assert c.metrics(2.0) == calculate_metrics(recs, 2.0)
    assert c.errors == {"http_503": 3, "timeout": 2}
    assert c.failure_examples() == {
        "http_503": "request 3: http_503: reason 3",
        "timeout": "request 13: timeout: reason 13",
    }


def test_beyond_the_cap_a_sample_with_exact_totals_and_moments() -> None:
    recs = records(5000)
    c = Collector(cap=200, seed=7)
    for r in recs:
        c.add(r)
    assert c.sampled and len(c.records) == 200 and c.seen == 5000
    assert len({r.index for r in c.records}) == 200
    assert min(r.index for r in c.records) < 500 and max(r.index for r in c.records) > 4500  # spread over all
    full, got = calculate_metrics(recs, 60.0), c.metrics(60.0)
    for key in EXACT_KEYS:
        assert got[key] == pytest.approx(full[key], rel=1e-9), key
    for key in ("median_ttft_ms", "p90_ttft_ms", "median_itl_ms", "p99_e2e_latency_ms"):
        assert got[key] == pytest.approx(full[key], rel=0.15), key  # from 200 of 5000 requests
    assert c.errors == {"http_503": 250, "timeout": 250}
    assert c.failure_examples()["http_503"] == "request 3: http_503: reason 3"


def test_token_times_budget_starts_sampling_early(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collect_module, "VALUE_BUDGET", 100)  # 4 ITL values per record: 25 records
    c = Collector(cap=1000)
    for r in records(300):
        c.add(r)
    assert c.sampled and len(c.records) == 25


def test_merging_client_processes_keeps_totals_and_the_cap() -> None:
    recs = records(3000)
    parts = [Collector(cap=100, seed=k) for k in range(2)]
    for r in recs:
        parts[r.index % 2].add(r)
    merged = Collector(cap=200)
    merged.merge(parts[0], 0.0)
    merged.merge(parts[1], 0.0)
    assert merged.seen == 3000 and len(merged.records) <= 200
    full, got = calculate_metrics(recs, 30.0), merged.metrics(30.0)
    for key in EXACT_KEYS:
        assert got[key] == pytest.approx(full[key], rel=1e-9), key
    small = [Collector(cap=100) for _ in range(2)]
    for r in records(60):
        small[r.index % 2].add(r)
    exact = Collector(cap=200)
    for part in small:
        exact.merge(part, 0.0)
    assert not exact.sampled and exact.metrics(1.0) == calculate_metrics(records(60), 1.0)


def test_the_result_says_its_percentiles_come_from_a_sample() -> None:
    c = Collector(cap=100)
    for r in records(1000):
        c.add(r)
    result = LoadResult.from_collector(LoadSpec(requests=1000, concurrency=8, max_records=100), c, 10.0)
    assert result.percentile_sample == 100 and len(result.records) == 100
    assert result.sampling_note() == (
        "latency percentiles (median, p90, p95, p99) from a uniform sample of 100 of 1,000 requests "
        "(LoadSpec.max_records); counts, means, std, max ITL and throughput from every request"
    )
    assert [r.index for r in result.records] == sorted(r.index for r in result.records)
    back = LoadResult.from_dict(result.to_dict())
    assert back.percentile_sample == 100 and back.first_failures == result.first_failures
    assert back.sampling_note() == result.sampling_note()
    exact = Collector(cap=100)
    for r in records(10):
        exact.add(r)
    assert LoadResult.from_collector(LoadSpec(), exact, 1.0).sampling_note() is None
