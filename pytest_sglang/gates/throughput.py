"""Throughput and latency floors for a load result: ``evaluate_throughput`` / ``assert_throughput`` /
the ``sglang_throughput`` marker (same checks, same message)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen import LoadResult, LoadSpec

GATE = "throughput"
_SOURCE = "load generator (client side, bench_serving definitions)"
_THROUGHPUT_FIX = (
    "raise server capacity (--max-running-requests, --mem-fraction-static, --chunked-prefill-size, "
    "--tp/--dp) or lower the floor"
)
_LATENCY_FIX = (
    "lower the load (concurrency/request_rate), or tune --chunked-prefill-size, "
    "--max-running-requests, --schedule-policy"
)

#: keyword -> (LoadResult attribute, op, unit, remedy)
FLOORS: dict[str, tuple[str, str, str, str]] = {
    "min_output_tok_s": ("output_throughput", ">=", "tok/s", _THROUGHPUT_FIX),
    "min_request_s": ("request_throughput", ">=", "req/s", _THROUGHPUT_FIX),
    "max_ttft_ms_median": ("median_ttft_ms", "<=", "ms", _LATENCY_FIX),
    "max_ttft_ms_p99": ("p99_ttft_ms", "<=", "ms", _LATENCY_FIX),
    "max_itl_ms_p99": ("p99_itl_ms", "<=", "ms", _LATENCY_FIX),
    "max_tpot_ms_median": ("median_tpot_ms", "<=", "ms", _LATENCY_FIX),
    "max_e2e_ms_p99": ("p99_e2e_latency_ms", "<=", "ms", _LATENCY_FIX),
}


def evaluate_throughput(
    result: LoadResult,
    *,
    min_output_tok_s: float | None = None,
    min_request_s: float | None = None,
    max_ttft_ms_median: float | None = None,
    max_ttft_ms_p99: float | None = None,
    max_itl_ms_p99: float | None = None,
    max_tpot_ms_median: float | None = None,
    max_e2e_ms_p99: float | None = None,
    max_error_rate: float = 0.0,
) -> GateOutcome:
    """Judge ``result`` against the given floors/ceilings (None = not checked); errors always are."""
    limits = {
        "min_output_tok_s": min_output_tok_s,
        "min_request_s": min_request_s,
        "max_ttft_ms_median": max_ttft_ms_median,
        "max_ttft_ms_p99": max_ttft_ms_p99,
        "max_itl_ms_p99": max_itl_ms_p99,
        "max_tpot_ms_median": max_tpot_ms_median,
        "max_e2e_ms_p99": max_e2e_ms_p99,
    }
    outcome = GateOutcome(gate=GATE)
    for keyword, limit in limits.items():
        if limit is not None:
            outcome.add(_check(result, keyword, limit))
    outcome.add(error_check(result, max_error_rate))
    outcome.context.update(describe(result))
    return outcome


def assert_throughput(result: LoadResult, **limits: Any) -> None:
    """``evaluate_throughput(result, **limits)``, raising ``AssertionError`` with its message on failure."""
    __tracebackhide__ = True
    evaluate_throughput(result, **limits).raise_for_failures()


def _check(result: LoadResult, keyword: str, limit: float | int) -> Check:
    attr, op, unit, remedy = FLOORS[keyword]
    # With no successful request a latency figure is 0.0 (bench_serving's convention): not a pass.
    measured = getattr(result, attr) if result.completed else None
    return compare(
        GATE, attr, measured, op, limit, unit=unit, source=_SOURCE, remedy=remedy, detail=result.spec.shape()
    )


def error_check(result: LoadResult, max_error_rate: float) -> Check:
    kinds = ", ".join(f"{k}={v}" for k, v in result.errors.items()) or "none"
    return compare(
        GATE,
        "error_rate",
        round(result.error_rate, 6),
        "<=",
        max_error_rate,
        source=_SOURCE,
        remedy="read the failed requests' reasons above (integrity is always checked)",
        detail=f"{result.failed} of {result.completed + result.failed} requests failed ({kinds})",
    )


def describe(result: LoadResult) -> dict[str, Any]:
    """Load shape, integrity counts and the server's own view, for the message and the reports."""
    total = result.completed + result.failed
    context: dict[str, Any] = {
        "load": f"{result.spec.shape()} against {result.url}",
        "measured": (
            f"output {result.output_throughput:.1f} tok/s, {result.request_throughput:.2f} req/s, "
            f"TTFT median/p99 {result.median_ttft_ms:.1f}/{result.p99_ttft_ms:.1f} ms, "
            f"ITL p99 {result.p99_itl_ms:.1f} ms, TPOT median {result.median_tpot_ms:.1f} ms, "
            f"e2e p99 {result.p99_e2e_latency_ms:.1f} ms, concurrency {result.concurrency:.1f} "
            f"over {result.duration:.2f} s"
        ),
        "integrity": f"{result.completed}/{total} completed; failed by kind: {dict(result.errors) or 'none'}",
    }
    examples = result.failure_examples()
    if examples:
        context["failures"] = "; ".join(examples)
    if result.warmup_errors:
        context["warmup failures"] = "; ".join(result.warmup_errors[:3])
    view = result.server_view
    if view:
        context["server view (/metrics peaks)"] = (
            f"running {view.get('peak_num_running_reqs', 0):g}, "
            f"queued {view.get('peak_num_queue_reqs', 0):g}, "
            f"token_usage {view.get('peak_token_usage', 0):.2f} ({view.get('samples', 0):g} samples)"
        )
    else:
        context["server view (/metrics peaks)"] = "unavailable (start SGLang with --enable-metrics)"
    return context


def median_result(results: Sequence[LoadResult]) -> LoadResult:
    """One result whose metrics are the per-metric medians of ``results``; counts and records summed."""
    if len(results) == 1:
        return results[0]
    first = results[0]
    counts = {"completed", "failed", "total_input_tokens", "total_output_tokens", "max_concurrent_requests"}
    values: dict[str, Any] = {}
    for name in first.metrics():
        data = [getattr(r, name) for r in results]
        values[name] = sum(data) if name in counts else statistics.median(data)
    errors: dict[str, int] = {}
    for r in results:
        for kind, n in r.errors.items():
            errors[kind] = errors.get(kind, 0) + n
    records = [rec for r in results for rec in r.records]
    view = {k: max(r.server_view.get(k, 0.0) for r in results) for r in results for k in r.server_view}
    names = {f.name for f in fields(LoadResult)}
    assert set(values) <= names
    return LoadResult(
        spec=first.spec,
        url=first.url,
        errors=errors,
        records=records,
        server_view=view,
        warmup_errors=[e for r in results for e in r.warmup_errors],
        **values,
    )


def run_marker(
    ctx: GateContext,
    *,
    min_output_tok_s: float | None = None,
    min_request_s: float | None = None,
    max_ttft_ms_median: float | None = None,
    max_ttft_ms_p99: float | None = None,
    max_itl_ms_p99: float | None = None,
    max_tpot_ms_median: float | None = None,
    max_e2e_ms_p99: float | None = None,
    max_error_rate: float = 0.0,
    concurrency: int | None = None,
    request_rate: float | None = None,
    requests: int = 128,
    input_len: int = 1024,
    output_len: int = 256,
    api: str = "native",
    repeats: int = 1,
) -> GateOutcome:
    """``@pytest.mark.sglang_throughput``: run the load ``repeats`` times and judge the median run."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        from pytest_sglang.errors import ConfigError

        raise ConfigError(
            "sglang_throughput(repeats=...)",
            repeats,
            "must be a whole number >= 1",
            "use repeats=3 to judge the median of three runs",
        )
    spec = LoadSpec(
        requests=requests,
        concurrency=concurrency,
        request_rate=request_rate,
        input_len=input_len,
        output_len=output_len,
        api=api,
    )
    results = [ctx.load(spec) for _ in range(repeats)]
    outcome = evaluate_throughput(
        median_result(results),
        min_output_tok_s=min_output_tok_s,
        min_request_s=min_request_s,
        max_ttft_ms_median=max_ttft_ms_median,
        max_ttft_ms_p99=max_ttft_ms_p99,
        max_itl_ms_p99=max_itl_ms_p99,
        max_tpot_ms_median=max_tpot_ms_median,
        max_e2e_ms_p99=max_e2e_ms_p99,
        max_error_rate=max_error_rate,
    )
    if repeats > 1:
        outcome.context["repeats"] = f"median of {repeats} runs; output tok/s per run: " + ", ".join(
            f"{r.output_throughput:.1f}" for r in results
        )
    return outcome
