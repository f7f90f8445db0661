"""The soak engine without pytest's plugin: pacing, sampling, early stops, and bad specs named."""

from __future__ import annotations

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.loadgen.soak.run import SoakSpec, process_tree_rss_mb, run_soak
from tests.conftest import SimFactory


def test_a_rate_paced_soak_samples_the_server_and_counts_completions(sim_factory: SimFactory) -> None:
    sim = sim_factory("--enable-metrics")
    assert sim.proc is not None
    pid = sim.proc.pid
    run = run_soak(sim.url, SoakSpec(3.0, request_rate=20.0, input_len=32, output_len=8, sample_interval_s=0.25),
                   rss=lambda: process_tree_rss_mb(pid), rss_source="psutil")
    assert 30 <= run.completed <= 90 and not run.errors and not run.stopped_early
    assert 10 <= len(run.samples) <= 16 and 3.0 <= run.duration_s < 3.0 + 2.0
    last = run.samples[-1]
    assert last.rss_mb is not None and last.rss_mb > 10 and last.kv_total == last.kv_free  # idle at the end
    assert run.samples[0].completed == 0 and last.completed == run.completed and run.rss_source == "psutil"


def test_stop_when_ends_the_soak_early_and_cuts_the_requests_in_flight(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "stall-after:10")
    run = run_soak(sim.url, SoakSpec(60.0, concurrency=4, input_len=32, output_len=8, sample_interval_s=0.2),
                   stop_when=lambda r: "stalled" if r.stall is not None and r.stall.length_s > 1.0 else None)
    assert run.stopped_early == "stalled" and run.duration_s < 10
    assert run.completed == 10 and run.cut == 4 and not run.errors
    assert run.stall is not None and run.stall.ongoing and run.stall.completed_before == 10
    assert run.metrics_missing.startswith("GET /metrics answered 404")  # no --enable-metrics: said, not guessed
    assert all(s.rss_mb is None for s in run.samples) and run.rss_source == ""


@pytest.mark.parametrize(("changes", "field"), [
    ({"duration_s": 0}, "duration_s"), ({"duration_s": float("inf")}, "duration_s"),
    ({"concurrency": None}, "concurrency=..., request_rate"),
    ({"request_rate": 2.0}, "concurrency=..., request_rate"),
    ({"sample_interval_s": -1}, "sample_interval_s"), ({"input_len": 0}, "input_len"),
])
def test_bad_specs_name_the_field_and_the_fix(changes: dict[str, object], field: str) -> None:
    values: dict[str, object] = {"duration_s": 10.0, "concurrency": 4, **changes}
    with pytest.raises(ConfigError, match="Fix: ") as info:
        SoakSpec(**values)  # type: ignore[arg-type]
    assert field in str(info.value)


def test_a_long_soak_samples_less_often_to_stay_bounded() -> None:
    assert SoakSpec(7 * 24 * 3600.0, concurrency=1, sample_interval_s=1.0).interval() == 302.4
