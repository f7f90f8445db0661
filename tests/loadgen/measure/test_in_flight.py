"""``max_concurrent_requests`` is the most requests in flight at once, not per touched second.

bench_serving counts every request that touches a one-second bucket: a load held at 16 in flight
showed "Peak concurrent requests: 32". Both paths (all records kept, and the running totals of a
large load) count requests actually in flight.
"""

from __future__ import annotations

from loadgen.measure.test_stats import rec
from pytest_sglang.loadgen.measure.collect import Running
from pytest_sglang.loadgen.measure.stats import in_flight_peak, peaks


def _closed_loop(concurrency: int, rounds: int, e2e: float = 0.3) -> list:
    """``concurrency`` slots, each sending the next request as the previous one is answered (1 ms later)."""
    return [rec(slot * rounds + r, r * (e2e + 0.001) + slot * 0.01, 0.05, [0.05] * 4, e2e, 5)
            for slot in range(concurrency) for r in range(rounds)]


def test_a_closed_loop_at_16_peaks_at_16() -> None:
    records = _closed_loop(16, 10)
    assert peaks(records)[1] == 16


def test_the_running_totals_agree() -> None:
    running = Running()
    for r in _closed_loop(16, 10):
        running.add(r)
    assert running.metrics(3.0, [])["max_concurrent_requests"] == 16


def test_merged_client_processes_add_up() -> None:
    a, b = Running(), Running()
    for r in _closed_loop(4, 5):
        a.add(r)
    for r in _closed_loop(4, 5):
        b.add(r)
    a.merge(b, shift_s=0.0)
    assert a.metrics(2.0, [])["max_concurrent_requests"] == 8


def test_one_ending_as_another_starts_is_not_two() -> None:
    assert in_flight_peak([(0.0, 1.0), (1.0, 2.0)]) == 1
    assert in_flight_peak([(0.0, 1.0), (0.5, 2.0), (0.9, 1.5)]) == 3
    assert in_flight_peak([]) == 0
