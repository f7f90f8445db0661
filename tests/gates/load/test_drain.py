"""The drain after a cancellation storm, judged from fake /metrics readings (no server)."""

from __future__ import annotations

from pytest_sglang.gates.base import GateOutcome
from pytest_sglang.gates.load import drain
from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.sglang import metrics_text

SPEC = LoadSpec(requests=10, output_len=32, cancel_rate=0.3, cancel_after_tokens=4)


def page(running: float, kv: float | None) -> drain.Reader:
    text = f"sglang:num_running_reqs{{tp_rank=\"0\"}} {running}\n"
    if kv is not None:
        text += f"sglang:kv_used_tokens{{tp_rank=\"0\"}} {kv}\n"
    parsed = metrics_text.parse(text)
    return lambda: parsed


def judged(before: drain.Reader, after: drain.Reader, cancelled: int = 3, max_drain_s: float = 0.3) -> GateOutcome:
    storm = drain.Storm({"w": before}, drain.idle({"w": before}), max_drain_s)
    storm.readers = {"w": after}
    outcome = GateOutcome("throughput")
    storm.judge("throughput", LoadResult(spec=SPEC, cancelled=cancelled), outcome)
    return outcome


def test_back_at_idle_passes() -> None:
    outcome = judged(page(0, 12), page(0, 12))
    assert outcome.passed, outcome.message()
    assert "3 requests cancelled after 4 tokens" in outcome.context["cancellation"]
    assert "not errors, not in latency or throughput figures" in outcome.context["cancellation"]


def test_a_leaked_slot_fails_after_the_deadline_naming_the_gauges() -> None:
    outcome = judged(page(0, 0), page(3, 96))
    assert not outcome.passed
    failed = {c.metric: c for c in outcome.failed}
    assert set(failed) == {"sglang:num_running_reqs within max_drain_s=0.3 (w)",
                           "sglang:kv_used_tokens within max_drain_s=0.3 (w)"}
    running = failed["sglang:num_running_reqs within max_drain_s=0.3 (w)"]
    assert (running.measured, running.required) == (3, 0)
    assert "still above idle after" in running.detail and "abort it on the disconnect" in running.remedy


def test_no_metrics_is_a_failure_not_a_pass() -> None:
    outcome = judged(lambda: "GET /metrics answered 404: metrics are disabled.", page(0, 0))
    assert not outcome.passed
    assert "--enable-metrics" in outcome.failed[0].remedy


def test_token_usage_is_read_where_kv_used_tokens_is_missing() -> None:
    gauges = drain.read_gauges(lambda: metrics_text.parse("sglang:num_running_reqs 0\nsglang:token_usage 0.25\n"))
    assert (gauges.running, gauges.kv, gauges.kv_name, gauges.why) == (0, 0.25, drain.USAGE, "")


def test_nothing_cancelled_checks_nothing_and_fails() -> None:
    outcome = judged(page(0, 0), page(0, 0), cancelled=0)
    assert [c.metric for c in outcome.failed] == ["requests cancelled (cancel_rate)"]
