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
    return fixed(metrics_text.parse(text))


def fixed(answer: drain.Metrics | str) -> drain.Reader:
    """A reader that always answers ``answer`` (whatever time it is given)."""
    def read(timeout_s: float | None = None) -> drain.Metrics | str:
        return answer
    return read


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
    outcome = judged(fixed("GET /metrics answered 404: metrics are disabled."), page(0, 0))
    assert not outcome.passed
    assert "--enable-metrics" in outcome.failed[0].remedy


def test_token_usage_is_read_where_kv_used_tokens_is_missing() -> None:
    gauges = drain.read_gauges(fixed(metrics_text.parse("sglang:num_running_reqs 0\nsglang:token_usage 0.25\n")))
    assert (gauges.running, gauges.kv, gauges.kv_name, gauges.why) == (0, 0.25, drain.USAGE, "")


def test_nothing_cancelled_checks_nothing_and_fails() -> None:
    outcome = judged(page(0, 0), page(0, 0), cancelled=0)
    assert [c.metric for c in outcome.failed] == ["requests cancelled (cancel_rate)"]


def test_every_poll_reads_within_what_is_left_of_the_one_deadline() -> None:
    # A leak: polled until max_drain_s, each read bounded by what is left (at least MIN_READ_S), and the
    # last reading judged as it was, not read once more after the deadline.
    leaked = metrics_text.parse('sglang:num_running_reqs{tp_rank="0"} 3\nsglang:kv_used_tokens{tp_rank="0"} 96\n')
    given: list[float | None] = []

    def reader(timeout_s: float | None = None) -> drain.Metrics:
        given.append(timeout_s)
        return leaked

    before = drain.idle({"w": page(0, 0)})
    after = drain.wait_drained({"w": reader}, before, max_drain_s=1.5)
    assert after["w"][0].running == 3 and 1.5 <= after["w"][1] < 1.5 + drain.POLL_S + drain.MIN_READ_S
    timeouts = [t for t in given if t is not None]
    assert len(timeouts) == len(given) and len(given) <= 1.5 / drain.POLL_S + 2
    assert 1.2 < timeouts[0] <= 1.5 and timeouts == sorted(timeouts, reverse=True)
    assert timeouts[-1] == drain.MIN_READ_S
