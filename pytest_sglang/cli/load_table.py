"""What ``python -m pytest_sglang load`` prints: bench_serving's result table and the progress lines."""

from __future__ import annotations

import time
from typing import TextIO

from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.loadgen.shape.spec import dataset_parts
from pytest_sglang.loadgen.workloads.forms import TRACE_KINDS


class ProgressBar:
    """A one-line progress bar on a terminal; silent otherwise (logs stay clean)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self.started = time.monotonic()
        self.last = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or done == self.last:
            return
        self.last = done
        width = 30
        filled = width * done // max(total, 1)
        elapsed = time.monotonic() - self.started
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} requests, {elapsed:.1f} s"
        )
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


class CheckProgress:
    """Rows read while a trace is checked, on stderr: a trace of millions of rows takes a while.

    On a terminal one line, updated every :data:`~pytest_sglang.loadgen.workloads.traces.PROGRESS_ROWS` rows;
    otherwise (a log) a line at the first update and every 16th: visible, without flooding the log.
    """

    def __init__(self, stream: TextIO, dataset: str) -> None:
        self.stream, self.dataset = stream, dataset
        self.tty = stream.isatty()
        self.started = time.monotonic()
        self.calls = 0

    def __call__(self, rows: int) -> None:
        self.calls += 1
        if not self.tty and self.calls % 16 != 1:
            return
        line = f"checking {self.dataset}: {rows:,} rows read, {time.monotonic() - self.started:.1f} s"
        self.stream.write(f"\r{line}" if self.tty else f"{line}\n")
        self.stream.flush()

    def done(self, rows: int) -> None:
        if self.calls:
            start = "\r\033[K" if self.tty else ""  # over the progress line, cleared to its end
            self.stream.write(f"{start}checked {self.dataset}: {rows:,} rows in "
                              f"{time.monotonic() - self.started:.1f} s\n")
            self.stream.flush()


def _row(label: str, value: object) -> str:
    return f"{label:<40} {value:<10}"


def summary(result: LoadResult) -> str:
    """bench_serving's result table (same headings), plus the failures by kind."""
    spec = result.spec
    r = result
    lines = [
        "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
        _row(
            "Backend:", {"native": "sglang", "completions": "sglang-oai", "chat": "sglang-oai-chat"}[spec.api]
        ),
        *_pace(spec),
        _row("Successful requests:", r.completed),
        _row("Failed requests:", r.failed),
    ]
    lines += [_row(f"  {kind}:", n) for kind, n in r.errors.items()]
    if r.not_sent:
        lines.append(_row("Requests not sent:", r.not_sent))
    if r.cancelled:  # gone on purpose: in no figure below
        lines.append(_row("Cancelled requests:", r.cancelled))
    lines += [
        _row("Benchmark duration (s):", f"{r.duration:.2f}"),
        _row("Total input tokens:", r.total_input_tokens),
        _row("Total generated tokens:", r.total_output_tokens),
        _row("Request throughput (req/s):", f"{r.request_throughput:.2f}"),
        _row("Input token throughput (tok/s):", f"{r.input_throughput:.2f}"),
        _row("Output token throughput (tok/s):", f"{r.output_throughput:.2f}"),
        _row("Peak output token throughput (tok/s):", f"{r.max_output_tokens_per_s:.2f}"),
        _row("Peak concurrent requests:", r.max_concurrent_requests),
        _row("Total token throughput (tok/s):", f"{r.total_throughput:.2f}"),
        _row("Concurrency:", f"{r.concurrency:.2f}"),
    ]
    sections = (
        ("End-to-End Latency", "E2E Latency", "e2e_latency", ("mean", "median", "p90", "p95", "p99")),
        ("Time to First Token", "TTFT", "ttft", ("mean", "median", "p99")),
        ("Time per Output Token (excl. 1st token)", "TPOT", "tpot", ("mean", "median", "p99")),
        ("Inter-Token Latency", "ITL", "itl", ("mean", "median", "p95", "p99")),
    )
    for title, label, key, stats in sections:
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        for stat in stats:
            name = stat.capitalize() if stat in ("mean", "median") else stat.upper()
            lines.append(_row(f"{name} {label} (ms):", f"{getattr(r, f'{stat}_{key}_ms'):.2f}"))
        if key == "itl":
            lines.append(_row("Max ITL (ms):", f"{r.max_itl_ms:.2f}"))
    lines += _cache_section(r) + _images_section(r) + _replay_section(r)
    lines.append("=" * 50)
    return "\n".join(lines + _explanations(r))


def _pace(spec: LoadSpec) -> list[str]:
    """bench_serving's rate and concurrency rows; a trace and multi-turn sessions say how they are paced."""
    kind = dataset_parts(spec.dataset)[0]
    cap = spec.concurrency if spec.concurrency is not None else "not set"
    if kind in TRACE_KINDS:  # not "inf": each request goes out at its trace time
        return [_row("Traffic request rate:", f"request times from the trace, scaled by {spec.trace_time_scale:g}"),
                _row("Max request concurrency:", f"{spec.in_flight()} (in-flight cap)")]
    if kind == "multiturn":  # closed loop: a session's next turn follows its answer
        return [_row("Traffic request rate:", "each session's next turn follows its answer"),
                _row("Max request concurrency:", f"{spec.concurrency or 'every'} session(s) at once")]
    return [_row("Traffic request rate:", spec.request_rate if spec.request_rate is not None else "inf"),
            _row("Max request concurrency:", cap)]


def _cache_section(r: LoadResult) -> list[str]:
    """bench_serving's ``Cache Hit Details`` (``--cache-report``), plus the server's own /metrics figures."""
    cache = r.cache_report
    if not cache:
        return []
    lines = ["{s:{c}^{n}}".format(s="Cache Hit Details", n=50, c="-")]
    if cache.get("requests_reporting"):
        lines += [_row("Total prompt tokens:", cache["total_prompt_tokens"]),
                  _row("Total cached tokens:", cache["total_cached_tokens"]),
                  _row("Cache hit rate:", f"{cache['cache_hit_rate_pct']:.1f}%")]
    else:
        lines.append(_row("Cache hit rate:", "not reported (chat/completions: server --enable-cache-report)"))
    if cache.get("server_cache_hit_rate_pct") is not None:
        lines.append(_row("Server cache hit rate (/metrics):", f"{cache['server_cache_hit_rate_pct']:.1f}%"))
    if cache.get("server_mean_cache_hit_rate_pct") is not None:
        lines.append(_row("Mean sglang:cache_hit_rate:", f"{cache['server_mean_cache_hit_rate_pct']:.1f}%"))
    return lines


def _images_section(r: LoadResult) -> list[str]:
    """An image load's figures: images and image tokens per request, TTFT with images."""
    facts = r.images
    if not facts:
        return []
    tokens = facts["image_tokens_per_request"]
    return ["{s:{c}^{n}}".format(s="Images", n=50, c="-"),
            _row("Images per request:", f"{facts['images_per_request']:g}"),
            _row("Image tokens per request:", "not reported (no prompt_tokens in the answers)" if tokens is None
                 else f"{tokens:,.1f} ({facts['image_tokens_basis']})"),
            _row("Mean TTFT with images (ms):", f"{facts['mean_ttft_ms']:.2f}"),
            _row("P99 TTFT with images (ms):", f"{facts['p99_ttft_ms']:.2f}")]


def _replay_section(r: LoadResult) -> list[str]:
    facts = r.workload
    if "trace" not in facts:
        return []
    err = facts.get("timing_error_ms") or {}
    lines = ["{s:{c}^{n}}".format(s="Trace Replay", n=50, c="-"),
             _row("Trace rows replayed:", f"{facts['rows']} ({facts['trace']})"),
             _row("Time scale:", f"{facts['time_scale']:g}"),
             _row("Replay span (s):", f"{facts['span_s']:.2f}")]
    lines += [_row(f"{q.upper()} send timing error (ms):", f"{err.get(q, 0.0):.2f}") for q in ("p50", "p99", "max")]
    lines.append(_row("Sent late by the in-flight cap:", f"{facts['cap_waits']} (cap {facts['in_flight_cap']})"))
    if facts.get("skipped_rows"):
        lines.append(_row("Rows skipped (0 tokens):", facts["skipped_rows"]))
    return lines


def _explanations(r: LoadResult) -> list[str]:
    """Below the table: the first failure of each kind, why the load stopped, how figures were sampled."""
    lines = [f"failed: {example}" for example in r.failure_examples()]
    if r.stopped:
        lines.append(f"stopped early: {r.stopped}")
    note = r.sampling_note()
    if note:
        lines.append(f"note: {note}")
    return lines
