"""The steady-state window of a load: its figures without the ramp-up and the drain.

A load's first requests meet an idle server that is filling its batch, and its last ones a batch
that empties: neither is the state a deployment runs in. AIPerf and genai-bench leave such edges
out of the timed window. Here the window is defined from what the records show, for any load shape
(a concurrency cap, a request rate, a trace): it opens when the first request completes (until then
the server only filled up) and closes when the last request is sent (after that it only empties).
Inside it, throughput counts the output tokens that arrived in the window over its length, and
latencies are those of the requests sent in it. The untrimmed figures stay bench_serving's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.measure.stats import FAMILIES, summarize_ms, tpot


@dataclass(frozen=True)
class Window:
    """Run-relative seconds [start, end] and what the window left out of a load of ``duration`` seconds."""

    start: float
    end: float
    duration: float
    requests: int
    kept_requests: int
    tokens: int
    kept_tokens: int  # output tokens that arrived inside the window

    @property
    def empty(self) -> bool:
        return self.end <= self.start or not self.kept_requests

    def text(self) -> str:
        """What was left out, for every report that shows trimmed figures."""
        if self.empty:
            return (f"no steady state: every request was sent before the first one completed "
                    f"({self.requests} requests); the figures are the whole run's")
        return (f"steady-state window {self.start:.2f}-{self.end:.2f} s of {self.duration:.2f} s: left out "
                f"{self.start:.2f} s of ramp-up and {max(self.duration - self.end, 0.0):.2f} s of drain, "
                f"{self.requests - self.kept_requests} of {self.requests} requests (sent outside it) and "
                f"{self.tokens - self.kept_tokens} of {self.tokens} output tokens (arrived outside it)")


def _token_times(r: RequestRecord) -> list[float]:
    t = r.start + r.ttft
    out = [t]
    for gap in r.itl:
        t += gap
        out.append(t)
    return out


def window(records: Sequence[RequestRecord], duration: float) -> Window:
    """The steady-state window of a run's successful ``records`` (first completion to last send)."""
    ok = [r for r in records if r.success]
    if not ok:
        return Window(0.0, 0.0, duration, 0, 0, 0, 0)
    start = min(r.start + r.e2e for r in ok)
    end = max(r.start for r in ok)
    kept = [r for r in ok if start <= r.start <= end] if end > start else []
    tokens = sum(r.output_len for r in ok)
    inside = round(sum(_share(r, start, end) for r in ok)) if kept else 0
    return Window(start, end, duration, len(ok), len(kept), tokens, inside)


def _share(r: RequestRecord, start: float, end: float) -> float:
    """The output tokens of ``r`` that arrived in [start, end]: a chunk of several tokens counts them all."""
    times = _token_times(r)
    return r.output_len * sum(start <= t <= end for t in times) / len(times)


def steady_metrics(records: Sequence[RequestRecord], duration: float) -> tuple[Window, dict[str, Any]]:
    """The window and bench_serving's throughput and latency keys computed inside it (empty when it is)."""
    win = window(records, duration)
    if win.empty:
        return win, {}
    ok = [r for r in records if r.success and win.start <= r.start <= win.end]
    span = win.end - win.start
    out: dict[str, Any] = {"duration": span, "completed": len(ok),
                           "output_throughput": win.kept_tokens / span,
                           "request_throughput": len(ok) / span}
    values = {"ttft": [r.ttft for r in ok], "tpot": [t for t in (tpot(r) for r in ok) if t is not None],
              "itl": [g for r in ok for g in r.itl], "e2e_latency": [r.e2e for r in ok]}
    for family in FAMILIES:
        out.update(summarize_ms(values[family], family))
    return win, out


def steady_report(records: Sequence[RequestRecord], duration: float, *, sent: int | None = None) -> dict[str, Any]:
    """``LoadResult.steady_state``: the window as data, what it left out in words, and the figures inside it.

    ``sent``: the requests of the load when ``records`` are a uniform sample of them (beyond
    ``LoadSpec.max_records``): the window's edges come from the sample, its throughput is scaled up to
    the load, and the text says so.
    """
    win, figures = steady_metrics(records, duration)
    text = win.text()
    if sent is not None and records and figures:
        scale = sent / len(records)
        figures = {**figures, "output_throughput": figures["output_throughput"] * scale,
                   "request_throughput": figures["request_throughput"] * scale}
        text += f"; from a uniform sample of {len(records):,} of {sent:,} requests (LoadSpec.max_records)"
    return {"window": asdict(win), "left_out": text, "metrics": figures}


def steady_text(report: dict[str, Any]) -> str:
    """One line for reports: what the window left out, and the headline figures inside it."""
    figures = report.get("metrics") or {}
    if not figures:
        return str(report.get("left_out", ""))
    return (f"{report.get('left_out', '')}; inside it: output {figures['output_throughput']:,.1f} tok/s, "
            f"TTFT median {figures['median_ttft_ms']:,.1f} ms, p99 {figures['p99_ttft_ms']:,.1f} ms")
