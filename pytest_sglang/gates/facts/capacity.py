"""KV-capacity gate: ``@pytest.mark.sglang_capacity(...)`` and :func:`assert_capacity`.

Every figure is read where SGLang 0.5.23 really reports it (reference §2.2): the KV pool per DP
rank from ``internal_states[i].memory_usage.token_capacity`` (else top-level ``max_total_num_tokens``),
the effective running-request limit from ``internal_states[i].effective_max_running_requests_per_dp``
(the top-level ``max_running_requests`` is only the CLI value, usually null), the effective context
from ``/v1/models`` ``max_model_len`` or ``max_req_input_len`` (= min(context, pool) - 6).
Static numbers can lie, so ``verify_live=True`` also sends the requests and checks they ran at once.

The loop over the handle's members (``evaluate_fleet_capacity``: a lone server is its own one member, a
fleet's workers each) is at the end of this module, not in one of its own: the marker and the assert
helper call it, and it calls the single-server evaluation, so a module of its own made a circle (issue
31). Hence ~400 lines; shared per-member helpers: gates/facts/workers.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_sglang.formatting import fmt
from pytest_sglang.gates import keywords
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.facts.workers import (
    fact_int,
    for_worker,
    info_of,
    merge_context,
    name_of,
    no_workers,
    not_checked,
    unreachable_why,
)
from pytest_sglang.gates.keywords import AnyOf, OptionalCount, Requires
from pytest_sglang.gates.registry import GateContext

if TYPE_CHECKING:
    from pytest_sglang.loadgen import LoadResult, LoadSpec
    from pytest_sglang.server.members import Handle, Member

GATE = "capacity"
_INFO = "/server_info"


@dataclass(frozen=True)
class Figure:
    """One figure per DP rank, and where it came from."""

    per_rank: tuple[int, ...]
    source: str

    @property
    def least(self) -> int | None:
        """The smallest per-rank figure (the one that limits), or None when unknown."""
        return min(self.per_rank) if self.per_rank else None

    def detail(self) -> str:
        """The per-rank figures as text, empty for a single rank."""
        if len(self.per_rank) <= 1:
            return ""
        return "per DP rank: " + ", ".join(fmt(v) for v in self.per_rank)


def _states(info: Mapping[str, object]) -> list[Mapping[str, Any]]:
    states = info.get("internal_states")
    return [s for s in states if isinstance(s, Mapping)] if isinstance(states, list) else []


def _ints(values: Sequence[object]) -> tuple[int, ...] | None:
    ints = tuple(v for v in values if isinstance(v, int) and not isinstance(v, bool))
    return ints if values and len(ints) == len(values) else None


def token_capacity(info: Mapping[str, object]) -> Figure:
    """KV pool tokens per DP rank."""
    states = _states(info)
    caps = _ints([(s.get("memory_usage") or {}).get("token_capacity") for s in states])
    if caps is not None:
        return Figure(caps, f"{_INFO} internal_states[i].memory_usage.token_capacity")
    top = _ints([info.get("max_total_num_tokens")])
    if top is not None:
        return Figure(top, f"{_INFO} max_total_num_tokens")
    return Figure((), f"not reported: {_INFO} has neither internal_states[i].memory_usage.token_capacity "
                      "nor max_total_num_tokens")


def running_requests(info: Mapping[str, object]) -> Figure:
    """The effective max running requests per DP rank."""
    values = _ints([s.get("effective_max_running_requests_per_dp") for s in _states(info)])
    if values is not None:
        return Figure(values, f"{_INFO} internal_states[i].effective_max_running_requests_per_dp")
    top = _ints([info.get("max_running_requests")])
    if top is not None:
        return Figure(top, f"{_INFO} max_running_requests (the CLI value: older SGLang without "
                           "effective_max_running_requests_per_dp)")
    return Figure((), f"not reported: {_INFO} internal_states[i].effective_max_running_requests_per_dp is "
                      "missing and the top-level max_running_requests is null (resolved at startup)")


def context_length(info: Mapping[str, object], max_model_len: int | None) -> Figure:
    """The longest request the server accepts: min(model context, KV pool)."""
    pool = token_capacity(info).least
    if max_model_len is not None:
        value = max_model_len if pool is None else min(max_model_len, pool)
        return Figure((value,), f"/v1/models max_model_len {fmt(max_model_len)}, bounded by the KV pool "
                                f"{fmt(pool)}")
    limit = _ints([info.get("max_req_input_len")])
    if limit is not None:
        # SGLang: max_req_input_len = min(context_len - 1, max_total_num_tokens - 1) - 5.
        return Figure((limit[0] + 6,), f"{_INFO} max_req_input_len {fmt(limit[0])} + 6 "
                                       "(= min(context_len, max_total_num_tokens))")
    top = _ints([info.get("context_length")])
    if top is not None:
        return Figure(top, f"{_INFO} context_length (the CLI value)")
    return Figure((), "not reported: /v1/models max_model_len and /server_info max_req_input_len are missing")


def concurrent_requests(info: Mapping[str, object], avg_request_tokens: int) -> Figure:
    """Requests of ``avg_request_tokens`` that fit at once, summed over DP ranks."""
    caps, running = token_capacity(info), running_requests(info)
    if not caps.per_rank:
        return Figure((), caps.source)
    limits = running.per_rank if len(running.per_rank) == len(caps.per_rank) else (None,) * len(caps.per_rank)
    fits = [c // avg_request_tokens if r is None else min(c // avg_request_tokens, r)
            for c, r in zip(caps.per_rank, limits, strict=True)]
    return Figure((sum(fits),), f"sum over DP ranks of min(token_capacity // {fmt(avg_request_tokens)}, "
                                f"effective max running requests) [{caps.source}]")


def _tokens_remedy(info: Mapping[str, object]) -> str:
    cap = info.get("max_total_tokens")
    capped = (f"raise or drop --max-total-tokens (now {cap}: it caps the pool)" if cap
              else "--max-total-tokens only lowers it")
    return (f"raise --mem-fraction-static (now {info.get('mem_fraction_static')}: the GPU share for weights "
            f"+ KV pool); {capped}; estimate first with: python -m pytest_sglang plan -- <launch args>")


def _check(keyword: str, metric: str, figure: Figure, required: int, unit: str, remedy: str) -> Check:
    return compare(GATE, metric, figure.least, ">=", required, unit=unit, source=figure.source,
                   remedy=remedy, detail=figure.detail(), keyword=keyword)


def evaluate_capacity(
    info: Mapping[str, object], *, min_total_tokens: int | None = None, min_running_requests: int | None = None,
    min_context_length: int | None = None, min_concurrent_requests: int | None = None,
    avg_request_tokens: int | None = None, max_model_len: int | None = None,
    min_fleet_total_tokens: int | None = None,
) -> GateOutcome:
    """Compare the server's KV capacity (``/server_info``) with these floors (per DP rank).

    ``max_model_len`` is ``/v1/models`` ``data[0].max_model_len`` when the caller has it. The
    keywords are checked as the ``sglang_capacity`` marker declares them (:func:`run_marker`).
    ``min_fleet_total_tokens`` on one server is the sum over its DP ranks (a fleet of one; a fleet's
    sum is :func:`evaluate_fleet_capacity`'s).
    """
    keywords.check(run_marker, "evaluate_capacity", {
        k: v for k, v in (("min_total_tokens", min_total_tokens), ("min_running_requests", min_running_requests),
                          ("min_context_length", min_context_length),
                          ("min_concurrent_requests", min_concurrent_requests),
                          ("avg_request_tokens", avg_request_tokens),
                          ("min_fleet_total_tokens", min_fleet_total_tokens)) if v is not None})
    out = GateOutcome(GATE)
    if min_fleet_total_tokens is not None:
        out.add(_one_server_total(token_capacity(info), info, min_fleet_total_tokens))
    if min_total_tokens is not None:
        out.add(_check("min_total_tokens", "max_total_num_tokens", token_capacity(info), min_total_tokens,
                       "tokens", _tokens_remedy(info)))
    if min_running_requests is not None:
        out.add(_check("min_running_requests", "max_running_requests", running_requests(info),
                       min_running_requests, "requests",
                       "set --max-running-requests (SGLang also caps it at max_total_num_tokens // 2: "
                       + _tokens_remedy(info) + ")"))
    if min_context_length is not None:
        out.add(_check("min_context_length", "context_length", context_length(info, max_model_len),
                       min_context_length, "tokens",
                       "set --context-length (up to the model's own limit); if the KV pool is the limit, "
                       + _tokens_remedy(info)))
    if min_concurrent_requests is not None and avg_request_tokens is not None:
        out.add(_check("min_concurrent_requests", "concurrent_requests",
                       concurrent_requests(info, avg_request_tokens), min_concurrent_requests, "requests",
                       _tokens_remedy(info) + "; or --max-running-requests if that is the limit"))
        out.context["request size"] = f"{fmt(avg_request_tokens)} tokens (prompt + output)"
    _add_context(out, info)
    return out


def _add_context(out: GateOutcome, info: Mapping[str, object]) -> None:
    keys = ("mem_fraction_static", "max_total_tokens", "max_running_requests", "context_length", "dp_size",
            "tp_size")
    view = ", ".join(f"{k}={info.get(k)}" for k in keys if k in info)
    if view:
        out.context["server args"] = view


def assert_capacity(
    info: Mapping[str, object] | Handle, *, min_total_tokens: int | None = None,
    min_running_requests: int | None = None, min_context_length: int | None = None,
    min_concurrent_requests: int | None = None, avg_request_tokens: int | None = None,
    min_fleet_total_tokens: int | None = None, max_model_len: int | None = None,
) -> GateOutcome:
    """:func:`evaluate_capacity`, raising ``AssertionError(outcome.message())`` on a miss.

    ``info`` is a ``/server_info`` payload, or a server or fleet (``sglang_server``, ``sglang_fleet``):
    on a fleet every worker is checked (one record per worker), as the marker does.
    """
    __tracebackhide__ = True
    floors = {"min_total_tokens": min_total_tokens, "min_running_requests": min_running_requests,
              "min_context_length": min_context_length, "min_concurrent_requests": min_concurrent_requests,
              "avg_request_tokens": avg_request_tokens, "min_fleet_total_tokens": min_fleet_total_tokens}
    given = {k: v for k, v in floors.items() if v is not None}  # unset keywords stay unset (as before)
    if isinstance(info, Mapping):
        outcome = evaluate_capacity(info, max_model_len=max_model_len, **given)
    else:
        outcome = _evaluate_handle(info, given)
    outcome.raise_for_failures()
    return outcome


def _evaluate_handle(handle: Handle, floors: Mapping[str, int | None]) -> GateOutcome:
    """Each member of ``handle`` judged on its own figures (:func:`evaluate_fleet_capacity`)."""
    return evaluate_fleet_capacity(handle, **floors)


def peak_overlap(intervals: Sequence[tuple[float, float]]) -> int:
    """The largest number of intervals open at one instant (sweep line; ends sort before starts)."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def live_spec(requests: int, avg_request_tokens: int) -> LoadSpec:
    """``requests`` concurrent requests holding ``avg_request_tokens`` each (prompt + output).

    Half of each request is output so that the decode phase, where all of them must be running
    together, lasts long enough to be seen (prefill of later requests is not mistaken for overlap).
    """
    from pytest_sglang.loadgen import LoadSpec  # lazy: the static gate needs no load generator

    output = max(1, min(avg_request_tokens // 2, 1024))
    return LoadSpec(requests=requests, concurrency=requests, input_len=max(1, avg_request_tokens - output),
                    output_len=output, warmup=0, sample_server_metrics=True)


def verify_live_checks(result: LoadResult, required: int) -> list[Check]:
    """Check a :class:`LoadResult`: every request completed and ``required`` decoded at the same instant.

    Concurrency is counted from each request's first-token and last-token times.
    """
    records = [r for r in result.records if r.success]
    running = peak_overlap([(r.start + r.ttft, r.start + r.e2e) for r in records])
    view = result.server_view
    server = (f"; server's /metrics peaks: running {fmt(view.get('peak_num_running_reqs'))}, queued "
              f"{fmt(view.get('peak_num_queue_reqs'))} ({fmt(int(view.get('samples', 0)))} samples)"
              if view else "; /metrics not sampled (start the server with --enable-metrics to see its view)")
    remedy = ("the advertised capacity did not hold under load (requests queued instead of running "
              "together): compare max_total_num_tokens with the pool in the server log ('KV Cache is "
              "allocated ... #tokens'), then raise --mem-fraction-static")
    return [
        compare(GATE, "live_completed_requests", result.completed, ">=", required, unit="requests",
                source="load generator", remedy="see the load errors: " + str(result.errors or "none"),
                detail=result.spec.shape()),
        compare(GATE, "live_concurrent_requests", running, ">=", required, unit="requests",
                source="request timings: most requests between first token and last token at one instant"
                       + server, remedy=remedy, detail=result.spec.shape()),
    ]


def served_max_model_len(server: Handle) -> int | None:
    """``/v1/models`` ``data[0].max_model_len``, or None when it cannot be read."""
    try:
        with server.client() as client:
            data = client.get("/v1/models").json()
        value = data["data"][0]["max_model_len"]
    except Exception:  # the figure is optional: fall back to max_req_input_len
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@keywords.rules(
    AnyOf(("min_total_tokens", "min_running_requests", "min_context_length", "min_concurrent_requests",
           "min_fleet_total_tokens")),
    Requires("min_concurrent_requests", needs=("avg_request_tokens",),
             why="how many tokens one request holds: prompt + output",
             fix="add avg_request_tokens=4000 (or your typical request size)"),
    Requires("verify_live", needs=("min_concurrent_requests", "avg_request_tokens"), why="what to send",
             fix="add e.g. min_concurrent_requests=50, avg_request_tokens=4000"),
)
def run_marker(
    ctx: GateContext, *, min_total_tokens: OptionalCount = None, min_running_requests: OptionalCount = None,
    min_context_length: OptionalCount = None, min_concurrent_requests: OptionalCount = None,
    avg_request_tokens: OptionalCount = None, verify_live: bool = False,
    min_fleet_total_tokens: OptionalCount = None,
) -> GateOutcome:
    """The ``sglang_capacity`` marker: the static gate, then (``verify_live=True``) the live check.

    On a fleet (a gateway) every floor applies to every worker (one record per worker) and
    ``min_fleet_total_tokens`` to the sum of the workers' KV pools; the live check goes through the gateway.
    This signature declares the marker's keywords (types, defaults, ranges, relations): the plugin
    validates a marker against it at collection and shows it in ``pytest --markers``.
    """
    floors = {"min_total_tokens": min_total_tokens, "min_running_requests": min_running_requests,
              "min_context_length": min_context_length, "min_concurrent_requests": min_concurrent_requests,
              "avg_request_tokens": avg_request_tokens, "min_fleet_total_tokens": min_fleet_total_tokens}
    outcome = _evaluate_handle(ctx.server, floors)
    if verify_live and min_concurrent_requests is not None and avg_request_tokens is not None:
        result = ctx.load(live_spec(min_concurrent_requests, avg_request_tokens))
        for check in verify_live_checks(result, min_concurrent_requests):
            outcome.add(check)
    return outcome


#: capacity keyword -> (metric, unit): what the single-server gate calls each figure.
_CAPACITY = {"min_total_tokens": ("max_total_num_tokens", "tokens"),
             "min_running_requests": ("max_running_requests", "requests"),
             "min_context_length": ("context_length", "tokens"),
             "min_concurrent_requests": ("concurrent_requests", "requests")}


def _unreachable_capacity(out: GateOutcome, worker: Member, why: str, floors: Mapping[str, int]) -> None:
    for keyword, required in floors.items():
        metric, unit = _CAPACITY[keyword]
        context = fact_int(worker, "max_model_len") if keyword == "min_context_length" else None
        if context is not None and worker.server is None:
            out.add(compare(GATE, f"{metric} of {name_of(worker)}", context, ">=", required, unit=unit,
                            keyword=keyword, remedy="set --context-length (up to the model's own limit)",
                            source=f"the gateway's /workers labels.max_model_len ({why}; its KV pool, which may "
                                   "bound the context, is not visible from here)"))
        else:
            what = "this figure" if worker.server is not None else f"{metric} (only the worker's /server_info does)"
            out.add(not_checked(GATE, metric, worker, required, keyword=keyword,
                                why=why if worker.server is not None else unreachable_why(worker, what)))


def evaluate_fleet_capacity(
    fleet: Handle, *, min_total_tokens: int | None = None, min_running_requests: int | None = None,
    min_context_length: int | None = None, min_concurrent_requests: int | None = None,
    avg_request_tokens: int | None = None, min_fleet_total_tokens: int | None = None,
) -> GateOutcome:
    """Every member's KV capacity against the per-member floors, and their sum (``min_fleet_total_tokens``).

    The keywords mean what they mean for one server (:func:`evaluate_capacity`), applied to each member of
    the handle (``members()``: a lone server is its own one member, its records keep plain names; a
    fleet's workers each get theirs, named).
    """
    floors = {k: v for k, v in (("min_total_tokens", min_total_tokens), ("min_running_requests", min_running_requests),
                                ("min_context_length", min_context_length),
                                ("min_concurrent_requests", min_concurrent_requests)) if v is not None}
    given = {**floors, "avg_request_tokens": avg_request_tokens, "min_fleet_total_tokens": min_fleet_total_tokens}
    keywords.check(run_marker, "evaluate_fleet_capacity", {k: v for k, v in given.items() if v is not None})
    out = GateOutcome(GATE)
    members = fleet.members()
    if not members:
        out.add(no_workers(GATE, fleet))
    parts: list[tuple[Member, GateOutcome]] = []
    pools: list[tuple[Member, int | None]] = []
    alone: tuple[Figure, Mapping[str, Any]] | None = None  # a lone server's pool and info: its total's wording
    for worker in members:
        info, why = info_of(worker)
        figure = token_capacity(info) if info is not None else None
        pools.append((worker, sum(figure.per_rank) if figure is not None and figure.per_rank else None))
        if figure is not None and info is not None and worker.label() is None:
            alone = figure, info
        if info is None or worker.server is None:
            _unreachable_capacity(out, worker, why, floors)
            continue
        if floors:
            part = evaluate_capacity(info, max_model_len=served_max_model_len(worker.server),
                                     avg_request_tokens=avg_request_tokens, **floors)
            out.checks += [for_worker(c, worker) for c in part.checks]
            parts.append((worker, part))
    if min_fleet_total_tokens is not None and alone is not None:
        out.add(_one_server_total(*alone, min_fleet_total_tokens))
    elif min_fleet_total_tokens is not None:
        out.add(_fleet_total(pools, min_fleet_total_tokens))
    merge_context(out, parts)
    return out


def _one_server_total(pools: Figure, info: Mapping[str, object], required: int) -> Check:
    """A lone server (a fleet of one, unlabelled): the sum over its DP ranks."""
    return compare(GATE, "fleet_total_tokens", sum(pools.per_rank) if pools.per_rank else None, ">=", required,
                   unit="tokens", keyword="min_fleet_total_tokens",
                   source=f"one server (no gateway): sum over its DP ranks of {pools.source}",
                   remedy=_tokens_remedy(info) + "; or serve from more workers (--sglang-workers N)")


def _fleet_total(pools: Sequence[tuple[Member, int | None]], required: int) -> Check:
    # In a prefill-decode fleet a request's KV lives on its decode worker for the whole generation; a
    # prefill pool holds a prompt only until it is transferred. So the fleet's capacity is the decode pools.
    pd = any(w.role == "decode" for w, _ in pools)
    counted = [(w, p) for w, p in pools if not (pd and w.role == "prefill")]
    known = [(w, p) for w, p in counted if p is not None]
    unknown = [name_of(w) for w, p in counted if p is None]
    terms = " + ".join(f"{name_of(w)} {fmt(p)}" for w, p in known) or "no worker's pool is known"
    which = "decode workers (prefill pools only hold prompts until the transfer)" if pd else "workers"
    source = (f"sum over the {len(counted)} {which} (and their DP ranks) of each worker's /server_info "
              f"internal_states[i].memory_usage.token_capacity: {terms}")
    if unknown:
        source += f"; not known (so the sum is a lower bound): {', '.join(unknown)}"
    more = "--sglang-decode M" if pd else "--sglang-workers N"
    return compare(GATE, "fleet_total_tokens", sum(p for _, p in known) if known else None, ">=", required,
                   unit="tokens", keyword="min_fleet_total_tokens", source=source,
                   remedy="raise each worker's KV pool (--mem-fraction-static; python -m pytest_sglang plan -- "
                          f"<launch args>) or add workers ({more})")
