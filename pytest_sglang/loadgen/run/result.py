""":class:`LoadResult`: attributes and ``to_dict()`` keys are SGLang bench_serving's JSON keys."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from pytest_sglang.loadgen.client.vocab import vocab_text
from pytest_sglang.loadgen.measure.collect import Collector
from pytest_sglang.loadgen.measure.intervals import MAX_SAMPLES, Samples, thin
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.measure.stats import calculate_metrics, error_counts, percentile
from pytest_sglang.loadgen.measure.steady import steady_report, steady_text
from pytest_sglang.loadgen.prompts.tokencount import token_report, token_text
from pytest_sglang.loadgen.shape.spec import LoadSpec

_BACKENDS = {"native": "sglang", "completions": "sglang-oai", "chat": "sglang-oai-chat"}
#: Fields that are not bench_serving metrics (what explains them, and how they were obtained).
_CONTEXT = frozenset({
    "spec", "url", "errors", "warmup_errors", "server_view", "records", "not_sent", "stopped",
    "percentile_sample", "first_failures", "refused_from_s", "cache_report", "workload",
    "prompt_tokens", "cancelled", "images", "steady_state",
})


@dataclass
class LoadResult:
    """Aggregates of one load run (bench_serving names, ms for latencies) plus what explains them."""

    spec: LoadSpec
    url: str = ""
    duration: float = 0.0
    completed: int = 0
    failed: int = 0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    request_throughput: float = 0.0
    input_throughput: float = 0.0
    output_throughput: float = 0.0
    total_throughput: float = 0.0
    mean_ttft_ms: float = 0.0
    median_ttft_ms: float = 0.0
    std_ttft_ms: float = 0.0
    p90_ttft_ms: float = 0.0
    p95_ttft_ms: float = 0.0
    p99_ttft_ms: float = 0.0
    mean_tpot_ms: float = 0.0
    median_tpot_ms: float = 0.0
    std_tpot_ms: float = 0.0
    p90_tpot_ms: float = 0.0
    p95_tpot_ms: float = 0.0
    p99_tpot_ms: float = 0.0
    mean_itl_ms: float = 0.0
    median_itl_ms: float = 0.0
    std_itl_ms: float = 0.0
    p90_itl_ms: float = 0.0
    p95_itl_ms: float = 0.0
    p99_itl_ms: float = 0.0
    max_itl_ms: float = 0.0
    mean_e2e_latency_ms: float = 0.0
    median_e2e_latency_ms: float = 0.0
    std_e2e_latency_ms: float = 0.0
    p90_e2e_latency_ms: float = 0.0
    p95_e2e_latency_ms: float = 0.0
    p99_e2e_latency_ms: float = 0.0
    concurrency: float = 0.0
    max_output_tokens_per_s: float = 0.0
    max_concurrent_requests: int = 0
    #: Failed requests by kind (see ``record.ERROR_KINDS``).
    errors: dict[str, int] = field(default_factory=dict)
    #: Failures of warmup requests (not part of the timed run).
    warmup_errors: list[str] = field(default_factory=list)
    #: The server's own view sampled from /metrics during the run (empty when /metrics is off).
    server_view: dict[str, float] = field(default_factory=dict)
    #: Requests never sent: the load's deadline (``load_timeout_s``) passed first.
    not_sent: int = 0
    #: Requests whose client went away on purpose mid-answer (``LoadSpec.cancel_rate``): neither completed
    #: nor failed, and in no latency or throughput figure.
    cancelled: int = 0
    #: Why the load stopped before sending every request ("" when it ran to the end).
    stopped: str = ""
    #: Requests the latency percentiles were computed from when they come from a uniform sample
    #: (more requests than ``LoadSpec.max_records``); 0 when every request counted.
    percentile_sample: int = 0
    #: The lowest-numbered failure of each kind ("request N: kind: reason"), kept even when the
    #: records are a sample.
    first_failures: dict[str, str] = field(default_factory=dict)
    #: Seconds from the start of the timed run to the first request whose connection was refused
    #: (the server died or stopped listening), or None.
    refused_from_s: float | None = None
    #: The prefix cache as SGLang counts it: bench_serving's ``cache_report`` keys (from each answer's
    #: ``cached_tokens``) plus the server's own figures from /metrics (see :func:`cache_report`).
    cache_report: dict[str, Any] = field(default_factory=dict)
    #: A trace replay's or multi-turn run's facts, with the replay's timing error (see :func:`timing_error`).
    workload: dict[str, Any] = field(default_factory=dict)
    #: Prompt tokens the server counted against those the client sent (:func:`.tokencount.token_report`).
    prompt_tokens: dict[str, Any] = field(default_factory=dict)
    #: Image loads: images and image tokens per request, TTFT with images (:func:`image_report`); empty for text.
    images: dict[str, Any] = field(default_factory=dict)
    #: With ``LoadSpec.steady_state``: the steady-state window, what it left out, and bench_serving's
    #: throughput and latency keys inside it (:func:`.steady.steady_report`); empty otherwise.
    steady_state: dict[str, Any] = field(default_factory=dict)
    records: list[RequestRecord] = field(default_factory=list, repr=False)

    @classmethod
    def from_records(
        cls,
        spec: LoadSpec,
        records: Sequence[RequestRecord],
        duration: float,
        *,
        url: str = "",
        server_view: dict[str, float] | None = None,
        warmup_errors: Sequence[str] = (),
    ) -> LoadResult:
        """Aggregate the per-request ``records`` of a run that took ``duration`` seconds."""
        cancelled = sum(1 for r in records if r.cancelled)
        records = sorted((r for r in records if not r.cancelled), key=lambda r: r.index)
        return cls(
            cancelled=cancelled,
            spec=spec,
            url=url,
            errors=error_counts(records),
            warmup_errors=list(warmup_errors),
            server_view=dict(server_view or {}),
            records=list(records),
            steady_state=steady_report(records, duration) if spec.steady_state else {},
            **calculate_metrics(records, duration),
        )

    @classmethod
    def from_collector(
        cls,
        spec: LoadSpec,
        collector: Collector,
        duration: float,
        *,
        url: str = "",
        server_view: dict[str, float] | None = None,
        warmup_errors: Sequence[str] = (),
        not_sent: int = 0,
        stopped: str = "",
        workload: dict[str, Any] | None = None,
    ) -> LoadResult:
        """The result of a run whose records went through a :class:`Collector` (bounded memory)."""
        facts = dict(workload or {})
        if "trace" in facts:
            facts["timing_error_ms"] = timing_error(collector)
        result = cls(
            spec=spec,
            url=url,
            errors=dict(sorted(collector.errors.items())),
            warmup_errors=list(warmup_errors),
            server_view=dict(server_view or {}),
            records=sorted(collector.records, key=lambda r: r.index),
            not_sent=not_sent,
            cancelled=collector.cancelled,
            stopped=stopped,
            percentile_sample=len(collector.records) if collector.sampled else 0,
            first_failures=collector.failure_examples(),
            refused_from_s=collector.refused_from,
            cache_report=cache_report(collector.cache, collector.cache_requests, collector.cache_unreported,
                                      server_view or {}),
            workload=facts,
            prompt_tokens=token_report(spec, collector.prompt_counts),
            steady_state=(steady_report(collector.records, duration,
                                        sent=collector.seen if collector.sampled else None)
                          if spec.steady_state else {}),
            **collector.metrics(duration),
        )
        result.images = image_report(collector.image_counts, result)
        return result

    def __repr__(self) -> str:
        """One line with the figures people look at first (the full set is :meth:`to_dict`); no URL."""
        spec = self.spec
        shape = f"{spec.requests} requests c={spec.concurrency if spec.concurrency is not None else 'inf'}"
        if spec.request_rate is not None:
            shape += f" rate={spec.request_rate:g}/s"
        failed = f" failed={self.failed}" if self.failed else ""
        return (f"<LoadResult {shape} {spec.input_len}+{spec.output_len} tok: completed={self.completed}{failed} "
                f"output={self.output_throughput:,.1f} tok/s ttft_p50={self.median_ttft_ms:,.1f} ms "
                f"ttft_p99={self.p99_ttft_ms:,.1f} ms itl_p99={self.p99_itl_ms:,.1f} ms in {self.duration:.2f} s>")

    @property
    def total(self) -> int:
        """Requests the spec asked for that this result accounts for (sent or not)."""
        return self.completed + self.failed + self.not_sent + self.cancelled

    @property
    def error_rate(self) -> float:
        """Failed requests (timeouts included) over the requests sent: 1.0 when none was."""
        sent = self.completed + self.failed
        return self.failed / sent if sent else 1.0

    @property
    def timeouts(self) -> int:
        """How many requests failed by timing out."""
        return self.errors.get("timeout", 0)

    def failure_examples(self, limit: int = 3) -> list[str]:
        """The first failure reason of each kind, for messages."""
        if self.first_failures:
            return list(self.first_failures.values())[:limit]
        seen: dict[str, str] = {}
        for r in self.records:
            if r.error_kind and r.error_kind not in seen:
                seen[r.error_kind] = f"request {r.index}: {r.error_kind}: {r.error}"
        return list(seen.values())[:limit]

    def sampling_note(self) -> str | None:
        """How the figures were obtained when not from every request (None when they were)."""
        if not self.percentile_sample:
            return None
        return (
            f"latency percentiles (median, p90, p95, p99) from a uniform sample of "
            f"{self.percentile_sample:,} of {self.completed + self.failed:,} requests (LoadSpec.max_records); "
            "counts, means, std, max ITL and throughput from every request"
        )

    def samples(self, limit: int = MAX_SAMPLES) -> Samples:
        """Per-request samples for intervals (:mod:`.intervals`): at most ``limit`` of each, deterministic.

        Requests are thinned evenly by index (TTFT, e2e and output length stay paired); ITLs, a
        token-level sample of their own, evenly in sorted order.
        """
        ok = [r for r in self.records if r.success]
        if len(ok) > limit:
            step = (len(ok) - 1) / (limit - 1)
            ok = [ok[round(i * step)] for i in range(limit)]
        itl = thin([gap * 1000 for r in self.records if r.success for gap in r.itl], limit)
        return Samples(tuple(r.ttft * 1000 for r in ok), tuple(r.e2e * 1000 for r in ok),
                       tuple(float(r.output_len) for r in ok), tuple(itl))

    def metrics(self) -> dict[str, Any]:
        """Only the bench_serving metric keys."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _CONTEXT}

    def to_dict(self, *, records: bool = False) -> dict[str, Any]:
        """bench_serving's JSON line keys, plus ``errors``, ``server_view`` and the spec."""
        out: dict[str, Any] = {
            "backend": _BACKENDS[self.spec.api],
            "dataset_name": self.spec.dataset,
            "request_rate": self.spec.request_rate,
            "max_concurrency": self.spec.concurrency,
            "random_input_len": self.spec.input_len,
            "random_output_len": self.spec.output_len,
            "random_range_ratio": self.spec.range_ratio,
            **self.metrics(),
            "errors": dict(self.errors),
            "warmup_errors": list(self.warmup_errors),
            "server_view": dict(self.server_view),
            "not_sent": self.not_sent,
            "cancelled": self.cancelled,
            "stopped": self.stopped,
            "percentile_sample": self.percentile_sample,
            "first_failures": dict(self.first_failures),
            "refused_from_s": self.refused_from_s,
            "cache_report": dict(self.cache_report),
            "workload": dict(self.workload),
            "prompt_tokens": dict(self.prompt_tokens),
            "images": dict(self.images),
            "steady_state": dict(self.steady_state),
            "spec": self.spec.to_dict(),
            # Bounded per-request samples: what a baseline comparison needs for its interval.
            "samples": self.samples().to_dict(),
        }
        if records:
            out["records"] = [r.to_dict() for r in self.records]
        return out

    def workload_lines(self) -> list[str]:
        """``"prefix cache: ..."``, ``"replay: ..."`` lines for summaries and the CLI."""
        return [f"{label}: {text}" for label, text in self.workload_context().items()]

    def workload_context(self) -> dict[str, str]:
        """The prefix cache and the trace replay (or multi-turn) facts, by label (empty when nothing to say)."""
        return workload_context(self.cache_report, self.workload, self.prompt_tokens, self.steady_state)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadResult:
        """A result read back from :meth:`to_dict` data (a report or a baseline)."""
        spec = LoadSpec.from_dict(data["spec"])
        names = {f.name for f in fields(cls)} - {"spec", "records"}
        values = {k: v for k, v in data.items() if k in names}
        recs = [RequestRecord.from_dict(r) for r in data.get("records", [])]
        return cls(spec=spec, records=recs, **values)


def timing_error(collector: Collector) -> dict[str, float]:
    """|actual send - scheduled send| in ms: p50/p99 from the records kept (a sample beyond the cap), max exact."""
    late = [abs(r.start - r.scheduled) * 1000 for r in collector.records if r.scheduled is not None]
    return {"p50": round(percentile(late, 50), 3), "p99": round(percentile(late, 99), 3),
            "max": round(collector.late_max * 1000, 3)}


def cache_report(totals: Sequence[int], reporting: int, unreported: int, view: dict[str, float]) -> dict[str, Any]:
    """bench_serving's ``cache_report`` keys from per-request ``cached_tokens``, plus the server's /metrics view.

    ``server_cache_hit_rate_pct``: growth of ``sglang:cached_tokens_total`` over ``sglang:prompt_tokens_total``
    during the timed run; ``server_mean_cache_hit_rate_pct``: the ``sglang:cache_hit_rate`` gauge averaged
    over the run's samples. None when the server did not report it.
    """
    prompt, cached = totals
    out: dict[str, Any] = {
        "total_prompt_tokens": prompt,
        "total_cached_tokens": cached,
        "cache_hit_rate_pct": round(100 * cached / prompt, 2) if prompt else None,
        "requests_reporting": reporting,
        "requests_not_reporting": unreported,
        "server_cache_hit_rate_pct": None,
        "server_mean_cache_hit_rate_pct": None,
    }
    if view.get("prompt_tokens"):
        out["server_cache_hit_rate_pct"] = round(100 * view.get("cached_tokens", 0.0) / view["prompt_tokens"], 2)
    if "mean_cache_hit_rate" in view:
        out["server_mean_cache_hit_rate_pct"] = round(100 * view["mean_cache_hit_rate"], 2)
    return out


def merge_cache_reports(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The cache report of several runs (repeats): totals summed, rates recomputed; server figures averaged."""
    if not any(reports):
        return {}
    totals = [sum(r.get("total_prompt_tokens", 0) for r in reports),
              sum(r.get("total_cached_tokens", 0) for r in reports)]
    merged = cache_report(totals, sum(r.get("requests_reporting", 0) for r in reports),
                          sum(r.get("requests_not_reporting", 0) for r in reports), {})
    for key in ("server_cache_hit_rate_pct", "server_mean_cache_hit_rate_pct"):
        values = [r[key] for r in reports if r.get(key) is not None]
        merged[key] = round(sum(values) / len(values), 2) if values else None
    return merged


def cache_text(report: dict[str, Any]) -> str:
    """``hit 62.5% (cached_tokens 1,200 of 1,920 prompt tokens); server 61.0% (sglang:cached_tokens_total)...``."""
    if not report:
        return ""
    parts = []
    if report.get("cache_hit_rate_pct") is not None and report.get("requests_reporting"):
        parts.append(f"hit {report['cache_hit_rate_pct']:.1f}% (cached_tokens {report['total_cached_tokens']:,} "
                     f"of {report['total_prompt_tokens']:,} prompt tokens)")
    elif report.get("requests_not_reporting"):
        parts.append("no answer reported cached_tokens (OpenAI APIs: start SGLang with --enable-cache-report)")
    if report.get("server_cache_hit_rate_pct") is not None:
        parts.append(f"server {report['server_cache_hit_rate_pct']:.1f}% "
                     "(sglang:cached_tokens_total / sglang:prompt_tokens_total)")
    if report.get("server_mean_cache_hit_rate_pct") is not None:
        parts.append(f"sglang:cache_hit_rate mean {report['server_mean_cache_hit_rate_pct']:.1f}%")
    return "; ".join(parts)


def workload_context(cache: dict[str, Any], facts: dict[str, Any],
                     prompt_tokens: dict[str, Any] | None = None,
                     steady: dict[str, Any] | None = None) -> dict[str, str]:
    """Labelled lines for a load's ``cache_report``, ``workload`` and ``prompt_tokens`` (plain data: reports too)."""
    lines: dict[str, str] = {}
    text = cache_text(cache)
    if text:
        lines["prefix cache"] = text
    if "trace" in facts:
        err = facts.get("timing_error_ms") or {}
        line = (f"{facts['rows']} {facts['trace']} rows x {facts['time_scale']:g} time scale over "
                f"{facts['span_s']:g} s; send timing error p50/p99/max {err.get('p50', 0):.1f}/"
                f"{err.get('p99', 0):.1f}/{err.get('max', 0):.1f} ms")
        if facts.get("cap_waits"):
            line += (f"; in-flight cap {facts['in_flight_cap']} reached: {facts['cap_waits']} requests "
                     "waited for room and were sent late (raise concurrency=)")
        if facts.get("skipped_rows"):
            line += f"; {facts['skipped_rows']} rows with 0 tokens skipped (failed when recorded)"
        lines["replay"] = line
    elif "sessions" in facts:
        lines["multi-turn"] = f"{facts['sessions']} sessions x {facts['turns']} turns, think {facts['think_s']:g} s"
    if "nodes" in facts:  # a load spread over Ray nodes (loadgen/ray/nodes.py): where its shards ran
        hosts = sorted({f"{s['node_id'][:8]} ({s['address']})" for s in facts["nodes"]})
        lines["load shards"] = f"{len(facts['nodes'])} shards over {len(hosts)} Ray nodes: {', '.join(hosts)}"
    tokens = token_text(prompt_tokens or {})
    if tokens:
        lines["prompt tokens"] = tokens
    if facts.get("vocab"):
        lines["vocabulary"] = vocab_text(facts["vocab"])
    if steady:
        lines["steady state"] = steady_text(steady)
    return lines


def image_report(counts: list[int], result: LoadResult) -> dict[str, Any]:
    """An image load's figures from :attr:`.collect.Collector.image_counts`; empty when no request had images.

    Image tokens are the server's own ``image_tokens`` when its answers report them (SGLang 0.5.23 does);
    else its ``prompt_tokens`` minus the text tokens the client sent (bench_serving's "vision tokens" are
    the processor's count minus the text's), which on the chat API include the chat template's tokens.
    None when no answer reported either.
    """
    with_images, sent, reporting, extra, reporting_images, image_tokens = counts
    if not with_images:
        return {}
    per: float | None
    if reporting_images:
        per, basis, n = image_tokens / reporting_images, "the server's image_tokens", reporting_images
    else:
        per = extra / reporting if reporting else None
        basis, n = "server prompt_tokens minus the text tokens sent", reporting
        if result.spec.api == "chat":
            basis += " (includes the chat template's tokens)"
    return {
        "requests_with_images": with_images,
        "images_per_request": round(sent / with_images, 2),
        "image_tokens_per_request": round(per, 1) if per is not None else None,
        "requests_reporting_tokens": n,
        "image_tokens_basis": basis,
        "mean_ttft_ms": result.mean_ttft_ms,
        "median_ttft_ms": result.median_ttft_ms,
        "p99_ttft_ms": result.p99_ttft_ms,
    }
