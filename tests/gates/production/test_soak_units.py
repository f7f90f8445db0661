"""The soak gate's judgement on recorded series (no server): checks, early stops, notes, report data."""

from __future__ import annotations

from pytest_sglang.gates.production.soak import DATA_KEY, Limits, judge, min_window_s, stop_reason
from pytest_sglang.loadgen.soak.run import SoakRun, SoakSpec
from pytest_sglang.loadgen.soak.series import MAX_POINTS, SoakSample, Stall
from pytest_sglang.report import html
from pytest_sglang.report.html_soak import completion_rate
from pytest_sglang.report.json_report import build_report, validation_errors
from pytest_sglang.report.records import TestRecord as Record

SPEC = SoakSpec(600.0, concurrency=8, sample_interval_s=5.0)


def _run(rss_per_min: float, *, n: int = 121, kv_loss_per_min: float = 0.0, stall: Stall | None = None,
         rss_source: str = "psutil: pid 1") -> SoakRun:
    samples = [SoakSample(t=i * 5.0, rss_mb=500 + rss_per_min * i * 5 / 60 + (0.3 if i % 2 else 0.0),
                          kv_free=1000 - kv_loss_per_min * i * 5 / 60, kv_total=1000.0, running=8.0, queued=0.0,
                          completed=10 * i, in_flight=8) for i in range(n)]
    return SoakRun(SPEC, "http://sim", samples=samples, completed=10 * (n - 1), rss_source=rss_source,
                   duration_s=(n - 1) * 5.0, stall=stall)


def test_a_flat_series_passes_and_keeps_its_series_bounded_for_the_reports() -> None:
    run = _run(0.0, n=1000)
    outcome = judge(run, Limits(max_rss_growth_mb_per_min=5, max_kv_free_drift=0.001, max_stall_s=10), 60.0)
    assert outcome.passed, outcome.message()
    data = outcome.context[DATA_KEY]
    assert len(data["series"]) == MAX_POINTS and data["samples"] == 1000
    assert DATA_KEY not in outcome.message()  # the series is for the reports, not the message


def test_a_leak_fails_with_its_lower_bound_and_the_slope_in_the_message() -> None:
    outcome = judge(_run(10.0), Limits(max_rss_growth_mb_per_min=5), 60.0)
    check = outcome.checks[0]
    assert not check.passed and isinstance(check.measured, float) and 9.5 < check.measured < 10.0
    assert check.keyword == "max_rss_growth_mb_per_min" and check.source == "psutil: pid 1"
    assert "max_rss_growth_mb_per_min: slope 10 MB/min, 95% interval [" in outcome.message()
    assert "(warm-up 60 s left out)" in outcome.message()


def test_free_kv_lost_over_time_fails_the_drift_limit() -> None:
    outcome = judge(_run(0.0, kv_loss_per_min=5.0), Limits(max_kv_free_drift=0.001), 60.0)
    check = outcome.checks[0]
    assert not check.passed and check.keyword == "max_kv_free_drift"
    assert isinstance(check.measured, float) and 0.004 < check.measured <= 0.005


def test_an_unreadable_rss_fails_as_unavailable_instead_of_passing() -> None:
    run = _run(0.0, rss_source="")
    run.samples = [SoakSample(t=s.t, kv_free=s.kv_free, kv_total=s.kv_total) for s in run.samples]
    check = judge(run, Limits(max_rss_growth_mb_per_min=5), 60.0).checks[0]
    assert not check.passed and check.measured is None and check.source.startswith("unavailable:")
    assert stop_reason(run, Limits(max_rss_growth_mb_per_min=5), 60.0) == (
        "nothing it judges can be measured (see the failed checks)")


def test_early_stops_need_a_proven_failure_over_the_minimum_window() -> None:
    leak = _run(10.0)
    assert min_window_s(600.0, 60.0) == 60.0
    short = SoakRun(SPEC, "x", samples=leak.samples[:20])  # 95 s: 35 s after the warm-up, under a minute
    assert stop_reason(short, Limits(max_rss_growth_mb_per_min=5), 60.0) is None
    assert stop_reason(leak, Limits(max_rss_growth_mb_per_min=5), 60.0) == (
        "RSS growth proven beyond max_rss_growth_mb_per_min=5")
    assert stop_reason(_run(0.0), Limits(max_rss_growth_mb_per_min=5), 60.0) is None
    stalled = _run(0.0, stall=Stall(30.0, 12.0, 40, True))
    assert stop_reason(stalled, Limits(max_stall_s=10), 60.0) == "a stall longer than max_stall_s=10 s"


def test_a_stall_fails_naming_when_and_how_long() -> None:
    outcome = judge(_run(0.0, stall=Stall(30.0, 12.5, 40, True)), Limits(max_stall_s=10), 60.0)
    assert outcome.message().startswith("sglang soak gate failed: max_stall_s=10: measured 12.5 s (longest_stall_s)")
    assert "completions stopped at 30.0 s into the soak (after 40 completed) and none came for 12.5 s" in \
        outcome.message()


def test_a_soak_that_completed_nothing_fails_its_integrity() -> None:
    run = SoakRun(SPEC, "x", samples=[SoakSample(t=0.0)], errors={"timeout": 8})
    check = judge(run, Limits(max_stall_s=10), 60.0).checks[-1]
    assert not check.passed and check.detail.startswith("no request completed")


def test_a_soak_that_stopped_before_any_request_finished_reports_no_error_rate() -> None:
    """An attached server's unreadable RSS stops the soak at once: 0 failed is not an error rate of 1."""
    run = SoakRun(SPEC, "x", samples=[SoakSample(t=0.0)], cut=8, duration_s=0.3,
                  stopped_early="nothing it judges can be measured (see the failed checks)")
    outcome = judge(run, Limits(max_rss_growth_mb_per_min=5), 60.0)
    assert [c.metric for c in outcome.checks] == ["rss_growth_mb_per_min"]
    assert "error_rate measured 1" not in outcome.message()
    assert ("max_error_rate: not judged: no request finished before the soak stopped early after 0.3 s (nothing it "
            "judges can be measured (see the failed checks))") in outcome.notes
    ran = judge(SoakRun(SPEC, "x", samples=[SoakSample(t=0.0)], cut=8, duration_s=600.0), Limits(max_stall_s=10), 60)
    errors = ran.checks[-1]
    assert errors.metric == "error_rate" and errors.measured is None and not errors.passed
    assert errors.detail.startswith("no request completed or failed in 600.0 s")


def test_the_json_report_keeps_the_series_and_the_html_report_draws_it() -> None:
    outcome = judge(_run(10.0), Limits(max_rss_growth_mb_per_min=5), 60.0)
    report = build_report([Record("t.py::test_soak", outcome="failed", gates=[outcome])], None)
    assert not validation_errors(report)
    assert len(report["tests"][0]["gates"][0]["context"][DATA_KEY]["series"]) == 121
    page = html.render(report)
    for chart in ("soak-rss-0", "soak-kv-0", "soak-requests-0"):
        assert f'data-chart="{chart}"' in page
    assert "Soak series" in page and "Soak series" not in html.render(build_report([], None))
    rows = [{"t": 0, "completed": 0}, {"t": 5, "completed": 10}, {"t": 5, "completed": 11},
            {"t": 10, "completed": 30}, {"t": 10.01, "completed": 30}]
    assert completion_rate(rows) == [(5.0, 2.0), (10.0, 3.8)]  # the 10 ms gap of an early stop is left out
