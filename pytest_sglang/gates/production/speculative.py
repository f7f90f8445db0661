"""``@pytest.mark.sglang_speculative(...)``: speculative decoding still accepts drafts, and still pays off.

A collapse is silent: with acceptance length 1.00 every answer is still right (speculation is lossless,
so accuracy gates cannot see it) and the server is slower than without speculation (sglang PR#21272).

* ``min_accept_length``: accepted tokens per verify step (drafts + the bonus token), over ``samples``
  greedy ``/generate`` requests' ``meta_info`` (``completion_tokens / spec_verify_ct`` summed, SGLang's
  own average; :mod:`pytest_sglang.loadgen.client.spec_sample`). The server's ``sglang:spec_accept_length``
  gauge (either spelling; the last batch only) and ``/server_info`` ``avg_spec_accept_length`` (since
  the start) are shown beside it.
* ``min_accept_rate``: accepted / proposed drafts (``meta_info.spec_accept_rate``), averaged per request.
* ``min_speedup``: output throughput of a load (the load keywords) on this server over the same load on
  the same model without speculation: ``reference_url``, or a server the gate launches with
  ``sglang_server_factory`` from this server's launch args minus every ``--speculative-*`` flag. A
  reference that speculates, or serves another model, SGLang version, dtype, quantization or parallel
  layout (:mod:`.comparable`) fails the check before any load is sent: its speedup would mean nothing.

Speculation that helps short prompts only (sglang#30763: MTP's accept rate 0.19 beyond 32K tokens) and
acceptance that falls on one data-parallel rank (sglang#16274: EAGLE's accept length 2.35 -> 1.48 with DP
attention) pass a gate measured at one prompt length on the whole server, so:

* ``context_lens=[1024, 32768]``: acceptance (and the speedup) is measured per context-length bucket,
  ``samples`` requests with prompts of that many tokens each (the speedup load's ``input_len`` is the
  bucket). Each floor is a number (every bucket) or a mapping ``{1024: 2.5, 32768: 1.8}`` (a floor per
  bucket; its keys are the buckets when ``context_lens`` is left out).
* with ``dp_size`` > 1 (``/server_info``), each bucket's samples are sent to every DP rank in turn, pinned
  by ``routed_dp_rank``, and each rank is held to the floor on its own; the check names the rank.
  ``/server_info`` ``internal_states[rank].avg_spec_accept_length`` is shown beside it.

A server launched without ``--speculative-algorithm`` fails the gate: there is nothing to judge.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Annotated

from pytest_sglang.errors import ServerUnavailable, SGLangError
from pytest_sglang.formatting import fmt
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.keywords import Above, AnyOf, AtLeast, AtMost, Count, Fraction, Relation, rules
from pytest_sglang.gates.load.comparable import comparable
from pytest_sglang.gates.load.throughput import InFlight, Length, Requests, Timeout, load_spec
from pytest_sglang.gates.production.spec_buckets import (
    FLOORS,
    Floor,
    bucket_label,
    bucket_lens,
    bucket_problem,
    floor_of,
)
from pytest_sglang.gates.registry import GateContext, LockingLoad
from pytest_sglang.loadgen import LoadResult, LoadSpec, run_load
from pytest_sglang.loadgen.client.spec_sample import SpecSample, sample_acceptance
from pytest_sglang.loadgen.shape.spec import MAX_LEN
from pytest_sglang.server.start import attach
from pytest_sglang.sglang import metrics_text as promtext

if TYPE_CHECKING:
    from pytest_sglang.server.members import Handle

__all__ = ["run_marker"]

GATE = "speculative"
_SAMPLE_TIMEOUT_S = 300.0
_SPEC_FIX = ("acceptance collapses when the draft does not match the target (an EAGLE/EAGLE3 draft trained for "
             "another revision, a wrong --speculative-draft-model-path or --speculative-token-map, a changed "
             "chat template or tokenizer); check the draft model and --speculative-num-steps/-eagle-topk/"
             "-num-draft-tokens")
_BUCKET_FIX = ("; where acceptance falls at long contexts only, compare the draft's max_position_embeddings and rope "
               "scaling with the target's (a draft trained on shorter sequences, sglang#30763), or serve long prompts "
               "without speculation")
_RANK_FIX = ("; where one DP rank accepts less than the others, compare that rank's log and its internal_states with "
             "the others' (sglang#16274: EAGLE's acceptance fell with --enable-dp-attention)")
_SPEEDUP_FIX = ("speculation costs more than it gains here: lower --speculative-num-steps/--speculative-num-draft-"
                "tokens, raise acceptance (a better-matched draft), or turn it off at this batch size")
_LENGTH_NOT_RATE = ("the rate is accepted / proposed drafts; for {value} accepted tokens per verify step write "
                    "min_accept_length={value}")
_COMPARABLE_FIX = ("or leave reference_url out on a launched server: the gate then launches its args without "
                   "--speculative-*")
_REFERENCE_FIX = ("give reference_url=URL (the same model launched without --speculative-*), or launch the server "
                  "with --sglang-launch so the gate can launch the reference itself")


def _lock(ctx: GateContext) -> contextlib.AbstractContextManager[None]:
    return ctx.load.lock() if isinstance(ctx.load, LockingLoad) else contextlib.nullcontext()


def _server_side(server: Handle) -> str:
    """The server's own figures: the last-batch gauge and the since-start average (each DP rank's)."""
    parts = []
    try:
        metrics = server.metrics()
    except SGLangError as exc:
        parts.append(f"/metrics not read ({str(exc).splitlines()[0][:120]})")
    else:
        samples = metrics.get(promtext.canonical("sglang:spec_accept_length"), [])
        shown = f"{sum(s.value for s in samples) / len(samples):.2f}" if samples else "absent"
        parts.append(f"sglang:spec_accept_length (last batch) {shown}")
    try:
        states = server.info().get("internal_states") or []
    except SGLangError:
        states = []
    averages = [(i, s.get("avg_spec_accept_length")) for i, s in enumerate(states) if isinstance(s, dict)]
    numbers = [(i, a) for i, a in averages if isinstance(a, (int, float))]
    per_rank = len(states) > 1
    parts.append("/server_info avg_spec_accept_length (since start) " + (", ".join(
        f"rank {i} {a:.2f}" if per_rank else f"{a:.2f}" for i, a in numbers) if numbers else "absent"))
    return "; ".join(parts)


def _acceptance_checks(sample: SpecSample, min_length: float | None, min_rate: float | None,
                       source: str, bucket: int | None = None, rank: int | None = None) -> list[Check]:
    checks = []
    shown = f"{source}; {sample.distribution()}"
    where = bucket_label(bucket, rank)
    remedy = _SPEC_FIX + (_BUCKET_FIX if bucket is not None else "") + (_RANK_FIX if rank is not None else "")
    if sample.prompt_tokens and where:
        shown += f"; prompt_tokens (meta_info) median {sorted(sample.prompt_tokens)[len(sample.prompt_tokens) // 2]:,}"
    if min_length is not None:
        length = None if sample.mean_length is None else round(sample.mean_length, 3)
        checks.append(compare(GATE, "spec_accept_length" + where, length, ">=", min_length, unit="tokens/step",
                              keyword="min_accept_length", source=shown, remedy=remedy))
    if min_rate is not None:
        rate = None if sample.mean_rate is None else round(sample.mean_rate, 3)
        checks.append(compare(GATE, "spec_accept_rate" + where, rate, ">=", min_rate, keyword="min_accept_rate",
                              source=shown, remedy=remedy))
    return checks


def _dp_ranks(server: Handle) -> list[int | None]:
    """Each DP rank of a server with ``dp_size`` > 1 (``/server_info``), else one unpinned sample."""
    size = server.info().get("dp_size")
    return list(range(size)) if isinstance(size, int) and not isinstance(size, bool) and size > 1 else [None]


def _attach_reference(ctx: GateContext, url: str) -> Handle:
    """The server at ``reference_url``; one that does not answer is an error naming the keyword, not the option."""
    try:
        return attach(url, api_key=ctx.server.api_key, validate=ctx.server.validate)
    except ServerUnavailable as exc:
        what = str(exc).split("\nFix:")[0]
        raise ServerUnavailable(f"reference_url: {what}\nFix: give reference_url the URL of a running SGLang server "
                                "of the same model launched without --speculative-* (start it, or correct the URL); "
                                "or leave reference_url out on a launched server, and the gate launches one") from None


def _reference(ctx: GateContext, url: str | None) -> tuple[Handle | None, str]:
    if url is not None:
        server = _attach_reference(ctx, url)
        return server, f"reference_url {server.server_url}"
    config = ctx.server.config
    if ctx.factory is None or config is None:
        return None, "the server was attached and no reference_url was given"
    args = config.launch_args
    spec_flags = {t.dest for t in args.tokens if t.dest is not None and t.dest.startswith("speculative_")}
    server = ctx.factory(args.without(*spec_flags))
    return server, f"launched by the gate without --speculative-* ({server.url})"


def _speedup_check(ctx: GateContext, loads: list[tuple[int | None, LoadSpec, float]], url: str | None,
                   out: GateOutcome) -> None:
    """The speedup of each (bucket, load, floor) over one reference server."""
    reference, how = _reference(ctx, url)
    if reference is None:
        for bucket, _, minimum in loads:
            out.checks.append(compare(GATE, "speedup" + bucket_label(bucket, None), None, ">=", minimum,
                                      keyword="min_speedup", source=f"no server without speculation: {how}",
                                      remedy=_REFERENCE_FIX))
        return
    theirs_info = reference.info()
    algorithm = theirs_info.get("speculative_algorithm")
    if algorithm:
        out.checks.append(compare(GATE, "speculative_algorithm of the reference", algorithm, "==", None,
                                  source=how, remedy=_REFERENCE_FIX))
        return
    same = out.add(comparable(GATE, ctx.server.info(), theirs_info, here="this server", there="the reference",
                              source=how, remedy=_COMPARABLE_FIX))
    if not same.passed:  # a speedup over another model or layout would mean nothing: no load is sent
        return
    for bucket, spec, minimum in loads:
        mine = ctx.load(spec)
        with _lock(ctx):
            theirs = run_load(reference.url, spec, api_key=reference.api_key)
        out.checks.append(_ratio(mine, theirs, minimum, how, bucket_label(bucket, None)))
        out.context["throughput" + bucket_label(bucket, None)] = (
            f"{spec.shape()}: with speculation {fmt(mine.output_throughput)} tok/s (ITL median "
            f"{fmt(mine.median_itl_ms)} ms, {mine.failed} failed); without {fmt(theirs.output_throughput)} tok/s "
            f"(ITL median {fmt(theirs.median_itl_ms)} ms, {theirs.failed} failed)")


def _ratio(mine: LoadResult, theirs: LoadResult, minimum: float, how: str, where: str = "") -> Check:
    ratio = mine.output_throughput / theirs.output_throughput if theirs.output_throughput > 0 else None
    return compare(GATE, "speedup" + where, None if ratio is None else round(ratio, 3), ">=", minimum, unit="x",
                   keyword="min_speedup", remedy=_SPEEDUP_FIX, detail=mine.spec.shape(),
                   source=f"output throughput with speculation {fmt(mine.output_throughput)} tok/s over without "
                          f"{fmt(theirs.output_throughput)} tok/s, same load; reference: {how}")


def _measure_acceptance(ctx: GateContext, out: GateOutcome, buckets: list[int | None], length: Floor,
                        rate: Floor, samples: int, output_len: int, timeout_s: float) -> None:
    ranks = _dp_ranks(ctx.server)
    for bucket in buckets:
        min_length, min_rate = floor_of(length, bucket), floor_of(rate, bucket)
        if min_length is None and min_rate is None:
            continue
        for rank in ranks:
            with _lock(ctx):
                sample = sample_acceptance(ctx.server, samples=samples, output_len=output_len, timeout_s=timeout_s,
                                           input_len=bucket, rank=rank)
            prompts = f", prompts of {bucket:,} token ids" if bucket is not None else ""
            pinned = f", pinned to DP rank {rank} (routed_dp_rank)" if rank is not None else ""
            source = f"meta_info of {samples} greedy /generate requests of {output_len} tokens{prompts}{pinned}"
            out.checks += _acceptance_checks(sample, min_length, min_rate, source, bucket, rank)
            if sample.failed:
                out.notes.append(f"{len(sample.failed)} sampled request(s){bucket_label(bucket, rank)} failed: "
                                 f"{', '.join(sample.failed[:3])}")
    out.context["server's figures"] = _server_side(ctx.server)


@rules(AnyOf(FLOORS), Relation(bucket_problem))
def run_marker(
    ctx: GateContext,
    *,
    min_accept_length: Annotated[float | dict[int, float] | None, Above(1)] = None,
    min_accept_rate: Annotated[float | dict[int, float] | None, Fraction(over_one=_LENGTH_NOT_RATE)] = None,
    min_speedup: Annotated[float | dict[int, float] | None, Above(0)] = None,
    context_lens: Annotated[list[int] | None, AtLeast(1), AtMost(MAX_LEN)] = None,
    reference_url: str | None = None,
    samples: Count = 16,
    concurrency: InFlight = 8,
    requests: Requests = 64,
    input_len: Length = 256,
    output_len: Length = 128,
    request_timeout_s: Timeout = None,
    load_timeout_s: Timeout = None,
) -> GateOutcome:
    """``@pytest.mark.sglang_speculative``: acceptance floors and the speedup over no speculation.

    See the module docstring. ``samples`` greedy requests of ``output_len`` tokens measure acceptance
    (per context length of ``context_lens``, per DP rank); the load keywords (``concurrency`` ...
    ``load_timeout_s``) shape the ``min_speedup`` load, run on both servers (``input_len`` is each context
    length when there are buckets). This signature declares the marker's keywords.
    """
    out = GateOutcome(GATE)
    algorithm = ctx.server.info().get("speculative_algorithm")
    if not algorithm:
        out.add(compare(GATE, "speculative_algorithm", None, "!=", None, source="/server_info speculative_algorithm",
                        remedy="launch SGLang with --speculative-algorithm EAGLE|EAGLE3|NEXTN|NGRAM|STANDALONE"))
        return out
    out.context["speculation"] = f"{algorithm} ({_flags(ctx.server)})"
    given = {"context_lens": context_lens, "min_accept_length": min_accept_length,
             "min_accept_rate": min_accept_rate, "min_speedup": min_speedup}
    buckets: list[int | None] = list(bucket_lens(given)) or [None]
    if min_accept_length is not None or min_accept_rate is not None:
        _measure_acceptance(ctx, out, buckets, min_accept_length, min_accept_rate, samples, output_len,
                            request_timeout_s or _SAMPLE_TIMEOUT_S)
    loads = []
    for bucket in buckets:
        minimum = floor_of(min_speedup, bucket)
        if minimum is not None:
            spec = load_spec(requests=requests, concurrency=concurrency, request_rate=None,
                             input_len=bucket or input_len, output_len=output_len, api="native",
                             request_timeout_s=request_timeout_s, load_timeout_s=load_timeout_s)
            loads.append((bucket, spec, minimum))
    if loads:
        _speedup_check(ctx, loads, reference_url, out)
    return out


def _flags(server: Handle) -> str:
    info = server.info()
    names = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    return ", ".join(f"{n.removeprefix('speculative_')}={info.get(n)}" for n in names)
