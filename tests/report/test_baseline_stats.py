"""Baseline verdicts with statistics: intervals, unreliable percentiles, metric names, silent no-ops."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.base import Check, GateOutcome
from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.report import baseline, html, json_report, markdown, terminal, text
from pytest_sglang.report.baseline import BaselineContext, parse_limits

SPEC = LoadSpec(requests=200, concurrency=16, input_len=64, output_len=16)


def run(seed: int, *, slow: float = 1.0, requests: int = 200, jitter: float = 0.1) -> dict[str, Any]:
    """A load's report dict with per-request samples: ``slow`` stretches every time."""
    rng = random.Random(seed)
    records = []
    for i in range(requests):
        ttft = slow * 0.05 * (1 + jitter * rng.random())
        itl = [slow * 0.01 * (1 + jitter * rng.random()) for _ in range(15)]
        records.append(RequestRecord(index=i, start=i * 0.01, ttft=ttft, itl=itl, e2e=ttft + sum(itl),
                                     output_len=16, prompt_len=64, expected_output_len=16))
    duration = slow * (requests * 0.01 + 0.2) * (1 + 0.01 * rng.random())
    data = LoadResult.from_records(SPEC.replace(requests=requests), records, duration).to_dict()
    return json.loads(json.dumps(data))  # as read back from a report


def compared(old: list[dict[str, Any]], new: list[dict[str, Any]], limits: str = "5%") -> GateOutcome:
    outcome = baseline.compare_loads("t::a", old, new, parse_limits(limits))
    assert outcome is not None
    return outcome


def test_a_report_load_stores_bounded_samples() -> None:
    data = run(1, requests=1500)
    assert len(data["samples"]["ttft_ms"]) == 1000 and len(data["samples"]["itl_ms"]) == 1000
    assert set(data["samples"]) == {"ttft_ms", "e2e_ms", "output_len", "itl_ms"}


def test_same_configuration_is_not_a_regression() -> None:
    outcome = compared([run(1), run(2), run(3)], [run(4), run(5), run(6)])
    assert outcome.passed, outcome.message()
    assert all("interval of the change" in c.detail for c in outcome.checks)


def test_a_regression_beyond_the_noise_fails_and_shows_the_interval() -> None:
    outcome = compared([run(1), run(2), run(3)], [run(4, slow=1.3), run(5, slow=1.3), run(6, slow=1.3)])
    failed = {c.metric for c in outcome.failed}
    assert {"output_throughput", "p99_ttft_ms", "median_ttft_ms"} <= failed
    message = outcome.message()
    # One interval per metric, all of them holding together at 95% (the test fails on any metric).
    family = len(outcome.checks)
    assert family >= 5
    assert f"{1 - 0.05 / family:.1%} interval of the change [" in message
    assert f"noise from per-request bootstrap and 3 repeats, 95% for the {family} metrics together)" in message
    assert "regressed when the change is beyond it and beyond the noise" in message


def test_one_wild_repeat_of_a_regressed_run_still_fails_and_says_why() -> None:
    outcome = compared([run(1), run(2), run(3)], [run(4, slow=1.25), run(5, slow=1.25), run(6, slow=2.5)])
    failed = {c.metric: c for c in outcome.failed}
    assert "p99_ttft_ms" in failed
    assert "every one of the 3 runs regressed against each of the baseline's 3" in failed["p99_ttft_ms"].detail
    assert compared([run(1), run(2), run(3)], [run(4), run(5), run(6, slow=2.5)]).passed  # one wild repeat alone


def test_one_limited_metric_is_judged_at_95_percent() -> None:
    outcome = compared([run(1), run(2), run(3)], [run(4, slow=1.3), run(5, slow=1.3), run(6, slow=1.3)],
                       "output_throughput:5%")
    (check,) = outcome.checks
    assert not check.passed
    assert "95.0% interval of the change [" in check.detail and "together" not in check.detail


def test_more_metrics_judged_widen_each_interval() -> None:
    # The same 3 vs 3 runs: a metric's interval is wider when all the default metrics are judged together
    # (Bonferroni) than when it is judged alone.
    old, new = [run(1), run(2), run(3)], [run(4, slow=1.06), run(5, slow=1.06), run(6, slow=1.06)]

    def width(limits: str) -> float:
        check = next(c for c in compared(old, new, limits).checks if c.metric == "p99_ttft_ms")
        found = re.search(r"interval of the change \[([-+\d.]+)%, ([-+\d.]+)%\]", check.detail)
        assert found, check.detail
        return float(found.group(2)) - float(found.group(1))

    assert width("5%") > width("p99_ttft_ms:5%") > 0


def test_a_change_within_the_measured_noise_is_not_a_regression() -> None:
    # Throughput 8% lower, but the baseline's own repeats differ by 30%: not proven beyond 5%.
    old = [dict(run(1), output_throughput=1000.0), dict(run(2), output_throughput=1300.0),
           dict(run(3), output_throughput=800.0)]
    new = [dict(run(4), output_throughput=v) for v in (920.0, 1196.0, 736.0)]
    check = next(c for c in compared(old, new, "output_throughput:5%").checks)
    assert check.passed and "(-8.0%)" in check.detail
    # The required value includes the noise: the same verdict as the interval's.
    assert isinstance(check.required, float) and check.required < 0.95 * 1000
    # A pass that could not have failed at the limit is the third verdict, "cannot judge", not a quiet green.
    outcome = compared(old, new, "output_throughput:5%")
    [line] = [n for n in outcome.unchecked if "cannot judge" in n]
    assert not [n for n in outcome.notes if "cannot judge" in n]
    found = re.match(r"cannot judge a 5 % change of output_throughput from this load: its noise is ±([\d.]+) %, "
                     r"so only a change beyond ([\d.]+) % fails; about (\d+) requests= or (\d+) repeats= would "
                     r"\(load ", line)
    assert found and found.group(1) == found.group(2) and float(found.group(1)) > 30, line  # repeats 30% apart
    # The half-width shrinks as 1/sqrt(n): (30+ / 5)^2 = 36+ times the 3 repeats.
    assert int(found.group(4)) >= 3 * 36, line


def test_a_limit_above_the_noise_adds_no_line() -> None:
    outcome = compared([run(1), run(2), run(3)], [run(4), run(5), run(6)], "output_throughput:5%")
    assert outcome.passed and not [n for n in outcome.notes + outcome.unchecked if "cannot judge" in n]


def test_the_verdict_is_deterministic() -> None:
    old, new = [run(1), run(2)], [run(3, slow=1.04), run(4, slow=1.04)]
    assert compared(old, new).to_dict() == compared(old, new).to_dict()


def test_a_p99_from_too_few_requests_is_not_compared_and_said_so() -> None:
    outcome = compared([run(1, requests=40)], [run(2, requests=40, slow=2.0)], "p99_ttft_ms:5%,output_throughput:5%")
    assert [c.metric for c in outcome.checks] == ["output_throughput"]
    assert any(n.startswith("p99_ttft_ms not compared: p99_ttft_ms from 40 requests is unreliable")
               for n in outcome.notes)


def test_an_older_baseline_without_samples_is_compared_with_a_line() -> None:
    old = [{k: v for k, v in run(1).items() if k != "samples"}]
    outcome = compared(old, [run(2)], "output_throughput:5%")
    assert outcome.checks and any("stores no per-request samples (written by an older pytest-sglang)" in n
                                  for n in outcome.notes)


def test_a_misspelt_metric_is_a_usage_error_naming_the_right_one() -> None:
    with pytest.raises(ConfigError) as info:
        parse_limits("ouput_throughput:5%")
    assert "did you mean output_throughput?" in str(info.value) and "--sglang-max-regression" in str(info.value)
    with pytest.raises(ConfigError, match="unknown metric 'zzz'"):
        parse_limits("5%,zzz:3%")


@pytest.mark.parametrize(("given", "meant"), [
    ("max_ttft_ms_p99", "p99_ttft_ms"), ("min_output_tok_s", "output_throughput"),
    ("min_total_tokens", "max_total_num_tokens"), ("min_fleet_total_tokens", "fleet_total_tokens"),
    ("p99_ttft_ms", "p99_ttft_ms"),
])
def test_marker_keywords_name_the_same_figure(given: str, meant: str) -> None:
    assert dict(parse_limits(f"{given}:7%").per_metric) == {meant: 7.0}


def _capacity(tokens: int, metric: str = "max_total_num_tokens") -> GateOutcome:
    check = Check("capacity", metric, tokens, 1000, ">=", unit="tokens", passed=True)
    return GateOutcome("capacity", [check])


def test_fleet_capacity_figures_are_compared_per_worker_and_in_total() -> None:
    old = {"gates": [_capacity(8000, "max_total_num_tokens of worker 0").to_dict(),
                     _capacity(16000, "fleet_total_tokens").to_dict()]}
    new = [_capacity(4000, "max_total_num_tokens of worker 0"), _capacity(12000, "fleet_total_tokens")]
    outcome = baseline.compare_test("t", old, [], new, parse_limits("5%"))
    assert outcome is not None
    assert [(c.metric, c.passed) for c in outcome.checks] == [
        ("max_total_num_tokens of worker 0", False), ("fleet_total_tokens", False)]


def _context(strict: bool = False) -> BaselineContext:
    report = {"fingerprint": {}, "tests": [{"nodeid": "t::old", "loads": [run(1)]}]}
    return BaselineContext("base.json", report, parse_limits("5%"), strict)


def test_a_test_not_in_the_baseline_is_a_visible_line_not_compared() -> None:
    ctx = _context()
    outcome = ctx.outcome("t::new", [run(2)], [], {})
    assert outcome is not None and outcome.passed and outcome.checks == []
    assert outcome.notes == ["not compared: base.json has no test t::new (renamed, or new since the baseline)"]
    summary = ctx.summary({}, [("t::new", None), ("t::old", None)])
    assert summary["not_in_baseline"] == ["t::new"] and not summary["compared_nothing"]
    state = text.baseline_state(dict(summary))
    assert "1 test(s) not in the baseline, not compared: t::new" in state
    strict = _context(strict=True).outcome("t::new", [run(2)], [], {})
    assert strict is not None and not strict.passed and strict.checks[0].metric == "test_in_baseline"


def test_a_test_in_the_baseline_is_compared() -> None:
    ctx = _context()
    outcome = ctx.outcome("t::old", [run(2)], [], {})
    assert outcome is not None and outcome.checks and ctx.summary({}, [("t::old", None)])["not_in_baseline"] == []


def test_what_a_passing_comparison_could_not_judge_is_on_the_terminal() -> None:
    old = [dict(run(1), output_throughput=1000.0), dict(run(2), output_throughput=1300.0),
           dict(run(3), output_throughput=800.0)]
    new = [dict(run(4), output_throughput=v) for v in (920.0, 1196.0, 736.0)]
    outcome = compared(old, new, "output_throughput:5%")
    assert outcome.passed
    report = json_report.build_report([], None)

    def shown(verdict: str) -> str:
        report["tests"] = [{"nodeid": "t::a", "outcome": verdict, "gates": [outcome.to_dict()]}]
        return "\n".join(terminal.render(report))

    line = "baseline: cannot judge a 5 % change of output_throughput from this load: its noise is ±"
    # The third verdict: the plugin skips such a test saying why; every report shows the line.
    assert "    not checked: baseline: cannot judge a 5 % change of output_throughput" in shown("skipped")
    assert f"> `t::a` not checked: {line}" in markdown.render(report)
    assert f"<code>t::a</code> not checked: {line}" in html.render(report)
    # Not twice: the notes of a passing comparison hold no copy.
    assert shown("passed").count("cannot judge") == 1


def _routed(shares: dict[str, float]) -> dict[str, Any]:
    return GateOutcome("throughput", context={"worker_shares": shares}).to_dict()


@pytest.mark.parametrize(("old", "new", "said"), [
    ({"http://a:1": 0.95, "http://b:1": 0.05}, {"http://c:2": 0.49, "http://d:2": 0.51}, True),
    # Other ports at each launch, the same split: the same routing, no line.
    ({"http://a:1": 0.50, "http://b:1": 0.50}, {"http://c:2": 0.45, "http://d:2": 0.55}, False),
])
def test_a_different_routing_split_behind_a_gateway_is_said_next_to_the_verdict(
        old: dict[str, float], new: dict[str, float], said: bool) -> None:
    outcome = baseline.compare_test("t::a", {"loads": [run(1)], "gates": [_routed(old)]}, [run(2)],
                                    [_routed(new)], parse_limits("5%"))
    assert outcome is not None
    lines = [n for n in outcome.notes if "split the requests between its workers differently" in n]
    assert bool(lines) is said, outcome.notes
    if said:
        assert "baseline 95/5 %, this run 51/49 %" in lines[0]
