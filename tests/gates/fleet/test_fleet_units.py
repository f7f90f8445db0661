"""The pure parts of the fleet gates: imbalance, shares, the consistency diff, the cache-routing workload."""

from __future__ import annotations

import math

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.fleet.discovery import WorkerEntry
from pytest_sglang.fleet.handle import SGLangFleet, WorkerHandle
from pytest_sglang.gates.base import GateOutcome
from pytest_sglang.gates.correctness.consistency import FIELDS, WorkerView, compare_workers, differing, table, views
from pytest_sglang.gates.facts.capacity import evaluate_fleet_capacity
from pytest_sglang.gates.facts.hicache import evaluate_fleet_hicache
from pytest_sglang.gates.facts.workers import NOT_CHECKED, not_checked
from pytest_sglang.gates.fleet.cache_routing import RoutingResult, RoutingWorkload, workload_for
from pytest_sglang.gates.fleet.health import imbalance
from pytest_sglang.gates.load.shares import Counters, WorkerShares, worker_shares
from pytest_sglang.server.handle import SGLangServer


def _worker(index: int, role: str = "regular", **facts: str) -> WorkerHandle:
    entry = WorkerEntry(url=f"http://10.0.0.{index}:30000", role=role, is_healthy=True,  # type: ignore[arg-type]
                        facts=facts)
    return WorkerHandle(index, entry, server=None, unreachable="not reachable from here: no route to host")


@pytest.mark.parametrize(("requests", "expected"), [
    ({"a": 32, "b": 32}, 0.0), ({"a": 40, "b": 24}, 0.25), ({"a": 64, "b": 0}, 1.0),
    ({"a": 10, "b": 10, "c": 40}, 1.0), ({"a": 1}, 0.0), ({}, None), ({"a": 0, "b": 0}, None),
])
def test_imbalance_is_the_largest_relative_distance_from_the_fair_share(requests: dict[str, int],
                                                                        expected: float | None) -> None:
    measured = imbalance(requests)
    assert measured == expected if expected is None else math.isclose(measured or 0.0, expected)


def test_shares_are_the_counter_growth_and_travel_in_the_outcome() -> None:
    workers = [_worker(0), _worker(1)]
    before = Counters({workers[0].url: 5.0, workers[1].url: 2.0})
    after = Counters({workers[0].url: 35.0, workers[1].url: 12.0})
    shares = WorkerShares.between(workers, before, after)
    assert shares.requests == {workers[0].url: 30, workers[1].url: 10} and shares.complete
    outcome = GateOutcome("throughput")
    shares.record(outcome)
    assert outcome.context["worker_requests"] == {workers[0].url: 30, workers[1].url: 10}
    assert worker_shares(outcome) == {workers[0].url: 0.75, workers[1].url: 0.25}
    assert worker_shares(GateOutcome.from_dict(outcome.to_dict()).to_dict()) == worker_shares(outcome)
    assert shares.describe() == (f"worker 0 ({workers[0].url}) 75.0% (30 requests), "
                                 f"worker 1 ({workers[1].url}) 25.0% (10 requests)")


def test_unknown_shares_say_why_and_are_never_recorded_as_numbers() -> None:
    workers = [_worker(0), _worker(1)]
    before = Counters({workers[0].url: 50.0}, {workers[1].url: "GET /metrics failed: 404"})
    after = Counters({workers[0].url: 3.0}, {workers[1].url: "GET /metrics failed: 404"})
    shares = WorkerShares.between(workers, before, after)
    assert not shares.complete and shares.shares() == {}
    text = shares.why_unknown()
    assert "worker 0 (http://10.0.0.0:30000): its request counter went down during the load" in text
    assert "worker 1 (http://10.0.0.1:30000): GET /metrics failed: 404" in text and "--enable-metrics" in text
    outcome = GateOutcome("slo")
    shares.record(outcome)
    assert worker_shares(outcome) is None and outcome.context["worker shares"].startswith("unknown: ")
    same = Counters({w.url: 1.0 for w in workers})
    idle = WorkerShares.between(workers, same, same)
    assert not idle.complete and "did not reach the listed workers" in idle.why_unknown()


def _view(index: int, role: str = "regular", **changed: str) -> WorkerView:
    values = {f: "x" for f in FIELDS}
    values.update(changed)
    return WorkerView(_worker(index, role), values, role=role)


def test_identity_fields_differ_across_roles_serving_fields_only_within_one() -> None:
    prefill, decode = _view(0, "prefill", tp_size="8"), _view(1, "decode", tp_size="4")
    assert differing([prefill, decode], FIELDS) == []  # PD roles may be sized differently
    assert differing([prefill, _view(1, "decode", model_path="other")], FIELDS) == ["model_path"]
    assert differing([_view(0, tp_size="8"), _view(1, tp_size="4")], FIELDS) == ["tp_size"]


def test_the_diff_table_shows_only_differing_fields_with_one_column_per_worker() -> None:
    seen = [_view(0, model_path="meta-llama/Llama-3.1-8B"), _view(1, model_path="a" * 60), _view(2)]
    outcome = compare_workers(seen, ["mem_fraction_static"], "fleet")
    check = outcome.checks[0]
    assert (check.measured, check.passed) == ("model_path", False)
    assert check.source == ("each worker's own /server_info: 50 launch fields compared, 1 ignored "
                            "(mem_fraction_static)")
    assert outcome.notes == [
        "1 field(s) differ between the workers (only those are shown):",
        "  field      | worker 0 (http://10.0.0.0:30000) | " + "worker 1 (http://10.0.0.1:30000)".ljust(40)
        + " | worker 2 (http://10.0.0.2:30000)",
        "  model_path | meta-llama/Llama-3.1-8B          | " + "a" * 37 + "... | x",
    ]
    assert compare_workers(seen, ["model_path"], "fleet").passed


def test_unreachable_workers_are_compared_on_the_gateway_listing_and_named() -> None:
    seen = views([_worker(0, version="0.5.23", model_path="m"), _worker(1, version="0.5.22", model_path="m")])
    assert [v.fallback for v in seen] == ["not reachable from here: no route to host"] * 2
    outcome = compare_workers(seen, [], "fleet")
    assert outcome.checks[0].measured == "version"
    assert "(the gateway's listing for 2 not read directly)" in outcome.checks[0].source
    assert outcome.notes[-1] == (f"worker 1 (http://10.0.0.1:30000): not reachable from here: no route to host; "
                                 f"compared on the gateway's listing only (model_path, version); {len(FIELDS) - 2} "
                                 "field(s) not checked")
    assert table(seen, ["tp_size"])[1].endswith("| ?                                | ?")


def test_a_figure_nobody_could_read_is_a_failing_not_checked_record() -> None:
    check = not_checked("capacity", "max_total_num_tokens", _worker(3), 1000, why="no route",
                        keyword="min_total_tokens")
    assert (check.passed, check.measured) == (False, NOT_CHECKED)
    assert check.headline() == ("min_total_tokens=1000: measured not checked (max_total_num_tokens of worker 3 "
                                "(http://10.0.0.3:30000))")


@pytest.mark.parametrize("workers", [2, 3, 4, 5, 13, 16])
def test_round_robin_cannot_line_a_prefix_up_with_one_worker(workers: int) -> None:
    workload = workload_for(workers, pool_tokens=60_000, max_input=8_000)
    assert math.gcd(workload.prefixes, workers) == 1 and workload.repeats > workers
    # Round robin over the interleaved order sends prefix p of round k to worker (k * P + p) mod N.
    seen = {(k * workload.prefixes) % workers for k in range(workload.repeats)}
    assert len(seen) == workers
    assert len(workload.bodies()) == workload.prefixes * workload.repeats


def test_the_workload_fits_a_small_pool_and_the_floor_is_halfway_to_ideal() -> None:
    workload = workload_for(2, pool_tokens=4096, max_input=2042)
    assert workload == RoutingWorkload(prefixes=13, repeats=4, prefix_len=64)
    assert workload_for(2, pool_tokens=1000, max_input=2042).prefix_len == 19
    result = RoutingResult(workload, gateway_cached=2496, random_cached=1792)
    assert workload.reusable == 2496 and result.required == 1792 + 352


def _fleet(*workers: WorkerHandle) -> SGLangFleet:
    return SGLangFleet(SGLangServer("http://127.0.0.1:9", "attach"), "smg", list(workers))


def test_unreachable_workers_use_the_gateway_labels_or_fail_as_not_checked() -> None:
    fleet = _fleet(_worker(0, max_model_len="8192"), _worker(1))
    outcome = evaluate_fleet_capacity(fleet, min_context_length=4096, min_total_tokens=1000,
                                      min_fleet_total_tokens=1)
    by_metric = {c.metric: c for c in outcome.checks}
    label = by_metric["context_length of worker 0 (http://10.0.0.0:30000)"]
    assert (label.measured, label.passed) == (8192, True) and "labels.max_model_len" in label.source
    assert by_metric["context_length of worker 1 (http://10.0.0.1:30000)"].measured == NOT_CHECKED
    assert by_metric["max_total_num_tokens of worker 1 (http://10.0.0.1:30000)"].passed is False
    total = by_metric["fleet_total_tokens"]
    assert total.measured is None and not total.passed  # no pool known: no lower bound either
    assert "not known (so the sum is a lower bound): worker 0 (http://10.0.0.0:30000), worker 1" in total.source
    hicache = evaluate_fleet_hicache(fleet, enabled=True, write_policy="write_through")
    assert [(c.metric, c.measured, c.passed) for c in hicache.checks][:2] == [
        ("enable_hierarchical_cache of worker 0 (http://10.0.0.0:30000)", NOT_CHECKED, False),
        ("hicache_write_policy of worker 0 (http://10.0.0.0:30000)", NOT_CHECKED, False)]


def test_a_gateway_listing_no_worker_passes_no_floor() -> None:
    for outcome in (evaluate_fleet_capacity(_fleet(), min_total_tokens=1), evaluate_fleet_hicache(_fleet())):
        assert not outcome.passed and outcome.checks[0].metric == "workers"


def test_the_fleet_helpers_refuse_bad_keywords_like_the_marker() -> None:
    with pytest.raises(ConfigError, match=r"evaluate_fleet_capacity\(min_fleet_total_tokens=0\): must be a whole"):
        evaluate_fleet_capacity(_fleet(), min_fleet_total_tokens=0)
    with pytest.raises(ConfigError, match="checks nothing"):
        evaluate_fleet_capacity(_fleet())
