# Near 510 lines: the throughput marker's keyword block, its floors and their integrity checks (judge, describe).
"""Throughput and latency floors for a load result.

``evaluate_throughput`` / ``assert_throughput`` / the ``sglang_throughput`` marker (same checks, same
message).

Floors are judged with the noise measured in the same run (:mod:`..loadgen.intervals`: a bootstrap of
the per-request samples, and the spread of ``repeats``): by default a floor fails only when the whole
95% interval of the figure misses it (the interval's favourable bound is judged, and is the check's
``measured``); ``proven=True`` judges the other bound (the floor is proven met). Without per-request
records or repeats no noise is measured and the figure itself is judged. A percentile from too few
requests (a p99 of fewer than 100) is judged with a warning line: it is about their maximum.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast, get_type_hints

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates import keywords
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.keywords import (
    Above,
    AtLeast,
    AtMost,
    Count,
    Fraction,
    KeywordError,
    OneOf,
    OptionalCount,
    Threshold,
)
from pytest_sglang.gates.load import drain
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.loadgen.client.vocab import vocab_text
from pytest_sglang.loadgen.measure.intervals import CONFIDENCE, figure_interval, side, unreliable_note
from pytest_sglang.loadgen.prompts.datasets import PromptSource
from pytest_sglang.loadgen.prompts.tokencount import BASES, merge_token_reports, token_text
from pytest_sglang.loadgen.run.result import merge_cache_reports
from pytest_sglang.loadgen.shape.load import LOAD_SHAPE, LoadShape
from pytest_sglang.loadgen.shape.spec import APIS, MAX_IN_FLIGHT, MAX_LEN, MAX_REQUESTS, MAX_TOLERANCE_PCT

if TYPE_CHECKING:
    from pytest_sglang.server.members import Handle

GATE = "throughput"
#: Which figure a floor judges: the interval's favourable bound (default), its unfavourable bound
#: (``proven=True``), or the point figure (the SLO search's levels).
Reading = Literal["favourable", "proven", "point"]
# Load-shape keyword types: the load generator's own limits, checked at collection.
Requests = Annotated[int, AtLeast(1), AtMost(MAX_REQUESTS)]
Length = Annotated[int, AtLeast(1), AtMost(MAX_LEN)]
InFlight = Annotated[int | None, AtLeast(1), AtMost(MAX_IN_FLIGHT)]
#: Seconds; None = the option (--sglang-request-timeout / --sglang-load-timeout), else derived.
Timeout = Annotated[float | None, Above(0)]
#: ``dataset=``: random-ids, sharegpt:PATH, jsonl:PATH, mooncake:PATH, burstgpt:PATH, multiturn[:K=V,...]
#: (checked by LoadSpec when the load is built, before anything is sent).
Dataset = str
#: ``trace_time_scale=``: a trace's times are multiplied by it (SGLang's --mooncake-slowdown-factor).
TimeScale = Annotated[float, Above(0)]
#: ``prompt_token_tolerance_pct=``: % the server's prompt_tokens may differ from those sent
#: (loadgen/prompts/tokencount.py).
Tolerance = Annotated[float | None, AtLeast(0), AtMost(MAX_TOLERANCE_PCT)]
#: ``cancel_rate=``, ``cancel_after_tokens=``, ``max_drain_s=``: a cancellation storm and its drain (load/drain.py).
CancelRate = Annotated[float | None, Fraction()]
CancelAfter = Annotated[int | None, AtLeast(1), AtMost(MAX_LEN)]
DrainSeconds = Annotated[float | None, Above(0), AtMost(3600)]
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


def floors_given(values: Mapping[str, object]) -> dict[str, float]:
    """The FLOORS keywords given a value in ``values`` (a gate's ``keywords.given()``): declared once, in FLOORS."""
    # Keep the value as written (5000, not 5000.0): messages echo the user's keyword.
    return {k: v for k, v in values.items() if k in FLOORS and isinstance(v, (int, float))}


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
    proven: bool = False,
    reading: Reading | None = None,
) -> GateOutcome:
    """Judge ``result`` against the given floors/ceilings (None = not checked); errors always are.

    The keywords are checked as the ``sglang_throughput`` marker declares them (:func:`run_marker`).
    ``reading`` overrides ``proven`` (``"point"``: judge the figure itself, no interval).
    """
    given = floors_given(keywords.given())
    keywords.check(run_marker, "evaluate_throughput", {**given, "max_error_rate": max_error_rate})
    return judge(result, given, max_error_rate, reading=reading or ("proven" if proven else "favourable"))


def judge(result: LoadResult, limits: dict[str, float], max_error_rate: float,
          server: Check | None = None, *, runs: Sequence[LoadResult] = (),
          reading: Reading = "favourable") -> GateOutcome:
    """The outcome: floors, then integrity, or integrity first (and its remedy alone) when it failed.

    Figures of a load whose requests failed, timed out or met a dead server say nothing about capacity:
    the message then leads with why (``server``: how the server died, from the plugin's handle).
    ``runs``: the repeats ``result`` is the median of (their spread is part of the noise).
    """
    runs = list(runs) or [result]
    floors = [_check(result, keyword, limit, runs, reading) for keyword, limit in limits.items()]
    integrity = [c for c in (server, timeout_check(result, max_error_rate), token_check(result)) if c is not None]
    integrity.append(error_check(result, max_error_rate))
    outcome = GateOutcome(gate=GATE)
    if all(c.passed for c in integrity):
        outcome.checks = [*floors, *integrity]
    else:
        outcome.checks = [*integrity, *(dataclasses.replace(c, remedy="") for c in floors)]
    outcome.context.update(describe(result))
    fewest = min(r.completed for r in runs)
    for keyword in limits:
        warning = unreliable_note(FLOORS[keyword][0], fewest)
        if warning and result.completed:
            outcome.notes.append(f"WARNING: {keyword}: {warning}")
    return outcome


def assert_throughput(
    result: LoadResult, *, min_output_tok_s: float | None = None, min_request_s: float | None = None,
    max_ttft_ms_median: float | None = None, max_ttft_ms_p99: float | None = None,
    max_itl_ms_p99: float | None = None, max_tpot_ms_median: float | None = None,
    max_e2e_ms_p99: float | None = None, max_error_rate: float = 0.0, proven: bool = False,
    reading: Reading | None = None,
) -> None:
    """:func:`evaluate_throughput` (the same keywords), raising ``AssertionError`` with its message on failure."""
    __tracebackhide__ = True
    evaluate_throughput(
        result, min_output_tok_s=min_output_tok_s, min_request_s=min_request_s,
        max_ttft_ms_median=max_ttft_ms_median, max_ttft_ms_p99=max_ttft_ms_p99, max_itl_ms_p99=max_itl_ms_p99,
        max_tpot_ms_median=max_tpot_ms_median, max_e2e_ms_p99=max_e2e_ms_p99, max_error_rate=max_error_rate,
        proven=proven, reading=reading).raise_for_failures()


def _check(result: LoadResult, keyword: str, limit: float | int, runs: Sequence[LoadResult],
           reading: Reading) -> Check:
    attr, op, unit, remedy = FLOORS[keyword]
    # With no successful request a latency figure is 0.0 (bench_serving's convention): not a pass.
    measured = getattr(result, attr) if result.completed else None
    detail = result.spec.shape()
    if measured is not None and reading != "point":
        judged, how = judged_bound(attr, op, runs, reading)
        if judged is not None:
            measured, detail = judged, f"{detail}; {how}"
    return compare(
        GATE, attr, measured, op, limit, unit=unit, source=_SOURCE, remedy=remedy, detail=detail,
        keyword=keyword,
    )


def judged_bound(attr: str, op: str, runs: Sequence[LoadResult], reading: Reading) -> tuple[float | None, str]:
    """The interval bound a floor judges, and a line saying which one (None: no noise was measured)."""
    each = [run.samples() for run in runs]
    interval = figure_interval(side(attr, [getattr(r, attr) for r in runs], [s for s in each if s.requests] or None))
    if not interval.measured:
        return None, ""
    low_is_favourable = op == "<="
    favourable = reading == "favourable"
    use_low = low_is_favourable == favourable
    bound_value = interval.low if use_low else interval.high
    rule = ("fails only when the whole interval misses the floor; proven=True judges the other bound"
            if favourable else "passes only when the whole interval meets the floor (proven=True)")
    how = (f"judged: the {'lower' if use_low else 'upper'} bound of the {CONFIDENCE:.0%} interval "
           f"[{interval.low:,.4g}, {interval.high:,.4g}] of {attr} (point {interval.point:,.4g}; noise from "
           f"{_noise(runs)}): {rule}")
    return round(bound_value, 4), how


def _noise(runs: Sequence[LoadResult]) -> str:
    return "per-request bootstrap" + (f" and {len(runs)} repeats" if len(runs) > 1 else "")


def error_check(result: LoadResult, max_error_rate: float) -> Check:
    """Failed requests other than timeouts (those are :func:`timeout_check`'s) over those sent."""
    errors = {k: v for k, v in result.errors.items() if k != "timeout"}
    failed = sum(errors.values())
    sent = result.completed + result.failed
    kinds = ", ".join(f"{k}={v}" for k, v in errors.items()) or "none"
    return compare(
        GATE,
        "error_rate",
        round(failed / sent, 6) if sent else 1.0,
        "<=",
        max_error_rate,
        source=_SOURCE,
        remedy=_error_remedy(errors),
        detail=f"{failed} of {sent} requests failed ({kinds})",
        keyword="max_error_rate",
    )


def _error_remedy(errors: dict[str, int]) -> str:
    if set(errors) & {"token_mismatch", "protocol"}:
        return ("the server's stream broke its own protocol (see the failures above): check the server "
                "version, or a proxy between it and the client")
    return "read the failed requests' reasons above (integrity is always checked)"


def timeout_check(result: LoadResult, max_error_rate: float) -> Check | None:
    """Requests that timed out or were never sent, over all requests: only when there were any."""
    late = result.timeouts + result.not_sent
    if not late:
        return None
    spec = result.spec
    limits = (f"request_timeout_s={spec.request_timeout():g} s per request, "
              f"load_timeout_s={spec.load_timeout():g} s for the load")
    detail = f"{result.timeouts} of {result.completed + result.failed} requests timed out"
    if result.not_sent:
        detail += f", {result.not_sent} not sent ({result.stopped})"
    return compare(
        GATE, "timeout_rate", round(late / max(1, result.total - result.cancelled), 6), "<=", max_error_rate,
        source=limits,
        detail=detail, keyword="max_error_rate",
        remedy="the server stalled or answers slower than the limits: read its log; raise request_timeout_s / "
               "load_timeout_s (--sglang-request-timeout / --sglang-load-timeout) only if it is merely slow",
    )


def server_check(server: Handle | None, result: LoadResult) -> Check | None:
    """Return how the server ended if it died during the load, else None while it looks alive.

    Launched: its exit status; attached: the first refused connection.
    """
    status = server.exit_status() if server is not None and (result.failed or result.not_sent) else None
    if status is not None and server is not None:
        where = f", log {server.log_path}" if server.log_path else ""
        return compare(GATE, "server", f"died during the load ({status.describe()})", "==", "running",
                       source=server.describe(), remedy=status.fix() or
                       f"read the server log{where} for why it stopped; no figure of this load can be judged")
    if result.refused_from_s is None:
        return None
    refused = result.errors.get("refused", 0)
    return compare(GATE, "server", f"refused connections from t={result.refused_from_s:.2f} s into the load "
                   f"({refused} requests)", "==", "running", source=f"connections to {result.url}",
                   remedy="the server died or restarted during the load: read its log; no figure of this load "
                          "can be judged")


def token_check(result: LoadResult) -> Check | None:
    """A failed check when the server counted more (or fewer) prompt tokens than were sent, beyond the tolerance."""
    report = result.prompt_tokens
    if not report.get("flagged"):
        return None
    return compare(GATE, "prompt tokens (server/sent)", f"{report['difference_pct']:+.1f}%", "==",
                   f"within {report['tolerance_pct']:g}%",
                   source=f"meta_info.prompt_tokens / usage.prompt_tokens of {report['requests_compared']} answers "
                          f"from {result.url}: {report['server_prompt_tokens']:,} counted, "
                          f"{report['sent_prompt_tokens']:,} sent ({BASES[report['basis']]})",
                   remedy="the server computes tokens the client did not send, so input tok/s is not its speed "
                          "on this load: fix the chat template (or the added special tokens), judge output tok/s, "
                          "or raise prompt_token_tolerance_pct=")


def describe(result: LoadResult) -> dict[str, object]:
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
        "integrity": f"{result.completed}/{total} completed; failed by kind: {dict(result.errors) or 'none'}"
                     + (f"; {result.cancelled} more cancelled on purpose (cancel_rate: in no figure)"
                        if result.cancelled else ""),
    }
    if result.not_sent:
        context["stopped"] = result.stopped
    note = result.sampling_note()
    if note:
        context["sampling"] = note
    examples = result.failure_examples()
    if examples:
        context["failures"] = "; ".join(examples)
    if result.warmup_errors:
        context["warmup failures"] = "; ".join(result.warmup_errors[:3])
    view = result.server_view
    tokens = token_text(result.prompt_tokens)
    if tokens:
        context["prompt tokens"] = tokens
    if result.workload.get("vocab"):
        context["vocabulary"] = vocab_text(result.workload["vocab"])
    if result.spec.dataset != "random-ids":  # random ids share no prefix: the figure would say nothing
        context.update(result.workload_context())
    elif result.steady_state:  # what the steady-state window left out is said wherever its figures are
        context["steady state"] = result.workload_context()["steady state"]
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
    first_failures: dict[str, str] = {}
    for r in results:
        for kind, text in r.first_failures.items():
            first_failures.setdefault(kind, text)
    refused = [r.refused_from_s for r in results if r.refused_from_s is not None]
    return LoadResult(
        spec=first.spec,
        url=first.url,
        errors=errors,
        records=records,
        server_view=view,
        warmup_errors=[e for r in results for e in r.warmup_errors],
        not_sent=sum(r.not_sent for r in results),
        cancelled=sum(r.cancelled for r in results),
        stopped="; ".join(r.stopped for r in results if r.stopped),
        percentile_sample=sum(r.percentile_sample for r in results),
        first_failures=first_failures,
        refused_from_s=min(refused) if refused else None,
        cache_report=merge_cache_reports([r.cache_report for r in results]),
        workload=first.workload,
        prompt_tokens=merge_token_reports(first.spec, [r.prompt_tokens for r in results]),
        **values,
    )


def load_spec(shape: LoadShape, *, marker: str = "sglang_throughput", nodes: int | None = None,
              prompt_token_tolerance_pct: float | None = None) -> LoadSpec:
    """The load of the load-shape keywords (``sglang_throughput``, ``sglang_fleet``, ... share them).

    The load's own checks (the dataset's form, a trace file's rows, a multiturn dataset's api) fail as
    the marker's keyword, before anything is sent.
    """
    try:
        spec = shape.spec(nodes=nodes or 1,  # None: the run's --sglang-load-nodes (applied by the plugin's load)
                          prompt_token_tolerance_pct=prompt_token_tolerance_pct)
        if shape.dataset != "random-ids":
            PromptSource(spec)  # the file and the rows the load uses (a trace is read streaming, bounded)
        return spec
    except ConfigError as exc:
        name = {"nodes": "load_nodes"}.get(exc.source.removeprefix("LoadSpec."), exc.source.removeprefix("LoadSpec."))
        raise KeywordError(f"@pytest.mark.{marker}", {name: exc.value}, exc.problem, exc.fix) from None


#: The markers' type of each load-shape keyword (:data:`~pytest_sglang.loadgen.shape.load.LOAD_SHAPE`, one each).
LOAD_TYPES: dict[str, object] = {
    "concurrency": InFlight, "request_rate": Threshold, "requests": Requests, "input_len": Length,
    "output_len": Length, "api": Annotated[str, OneOf(APIS)], "dataset": Dataset, "trace_time_scale": TimeScale,
    "request_timeout_s": Timeout, "load_timeout_s": Timeout, "cancel_rate": CancelRate,
    "cancel_after_tokens": CancelAfter, "max_drain_s": DrainSeconds,
}
Gate = Callable[..., GateOutcome]


def load_keywords(**defaults: int | None) -> Callable[[Gate], Gate]:
    """Declare a load gate's load-shape keywords (:class:`LoadShape`'s fields), with this gate's ``defaults``.

    The gate's ``shape: LoadShape`` parameter stands where the keywords go in its signature (the order
    ``pytest --markers`` and the usage errors list them); the plugin sees them as keyword-only parameters
    (validated as declared here), the gate receives them as one :class:`LoadShape`.
    """
    unknown = set(defaults) - set(LOAD_SHAPE)
    if unknown:
        raise TypeError(f"load_keywords: no load-shape keyword {sorted(unknown)}; they are {', '.join(LOAD_SHAPE)}")
    base = dataclasses.replace(LoadShape(), **cast("dict[str, Any]", defaults))

    def declare(fn: Gate) -> Gate:
        hints = get_type_hints(fn, include_extras=True)
        params: list[inspect.Parameter] = []
        for p in inspect.signature(fn).parameters.values():
            if p.name == "shape":
                params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=getattr(base, name),
                                             annotation=LOAD_TYPES[name]) for name in LOAD_SHAPE]
            else:
                params.append(p.replace(annotation=hints.get(p.name, p.annotation)))

        @functools.wraps(fn)
        def gate(ctx: GateContext, **given: object) -> GateOutcome:
            load = {name: given.pop(name) for name in LOAD_SHAPE if name in given}
            # The values were checked as LOAD_TYPES declares them (the plugin, at collection).
            return fn(ctx, shape=dataclasses.replace(base, **cast("dict[str, Any]", load)), **given)

        gate.__signature__ = inspect.Signature(params, return_annotation=hints.get("return"))  # type: ignore[attr-defined]
        gate.__annotations__ = {**{p.name: p.annotation for p in params}, "return": hints.get("return")}
        return gate

    return declare


#: The rule every load gate with a load shape states: a drain is measured only after cancelled requests.
DRAIN_NEEDS_CANCEL = keywords.Requires("max_drain_s", ("cancel_rate",), "the drain after cancelled requests",
                                       "give cancel_rate=0.2 too, or drop max_drain_s")


@keywords.rules(keywords.AnyOf((*FLOORS, "max_error_rate"), vacuous={"max_error_rate": 1.0}), DRAIN_NEEDS_CANCEL)
@load_keywords(requests=128, input_len=1024, output_len=256)
def run_marker(
    ctx: GateContext,
    *,
    min_output_tok_s: Threshold = None,
    min_request_s: Threshold = None,
    max_ttft_ms_median: Threshold = None,
    max_ttft_ms_p99: Threshold = None,
    max_itl_ms_p99: Threshold = None,
    max_tpot_ms_median: Threshold = None,
    max_e2e_ms_p99: Threshold = None,
    max_error_rate: Annotated[float, Fraction()] = 0.0,
    proven: bool = False,
    repeats: Count = 1,
    load_nodes: OptionalCount = None,
    prompt_token_tolerance_pct: Tolerance = None,
    shape: LoadShape,
) -> GateOutcome:
    """``@pytest.mark.sglang_throughput``: run the load ``repeats`` times and judge the median run.

    ``load_nodes=N`` spreads each run over N Ray nodes (``--sglang-ray``); unset, the run's ``--sglang-load-nodes``.

    Each floor is judged with the noise of those runs (the module's docstring): it fails only when the
    whole 95% interval misses it, or, with ``proven=True``, passes only when the whole interval meets it.

    On a fleet the load goes through the gateway, and the outcome also records each worker's share of
    the requests (``context["worker_shares"]``, from the workers' own /metrics: :mod:`.shares`).
    This signature declares the marker's keywords (types, defaults, ranges): the plugin validates a
    marker against it at collection and shows it in ``pytest --markers``.
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ConfigError(
            "sglang_throughput(repeats=...)",
            repeats,
            "must be a whole number >= 1",
            "use repeats=3 to judge the median of three runs",
        )
    spec = load_spec(shape, nodes=load_nodes, prompt_token_tolerance_pct=prompt_token_tolerance_pct)
    from pytest_sglang.gates.load.shares import run_loads

    # cancel_rate=0 with max_drain_s: judged too, and its "requests cancelled" check fails (it cancels nothing)
    storm = drain.Storm.before(ctx.server, shape.max_drain_s) if shape.storm_wanted() else None

    # Each repeat sends other prompts (seed + k): with the same prompts, repeat 1 would fill the radix
    # cache (and a cache-aware gateway's tree) that repeats 2.. then hit, so the runs would not be
    # samples of one thing and their spread would not be the noise. A baseline's repeats used the same seeds.
    results, shares = run_loads(
        ctx.server, lambda: [ctx.load(dataclasses.replace(spec, seed=spec.seed + k)) for k in range(repeats)])
    result = median_result(results)
    given = floors_given(keywords.given())
    outcome = judge(result, given, max_error_rate, server_check(ctx.server, result), runs=results,
                    reading="proven" if proven else "favourable")
    if storm is not None:
        storm.judge(GATE, result, outcome)
    if shares is not None:
        shares.record(outcome)
        if not result.server_view:  # the sampler read the gateway's /metrics, which is not a worker's
            outcome.context["server view (/metrics peaks)"] = "not sampled through the gateway (see worker_shares)"
    if repeats > 1:
        outcome.context["repeats"] = f"median of {repeats} runs; output tok/s per run: " + ", ".join(
            f"{r.output_throughput:.1f}" for r in results
        )
    return outcome
