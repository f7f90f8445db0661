"""``@pytest.mark.sglang_fleet(...)``: the workers behind SGLang's gateway are healthy, alike and evenly used.

Four checks, each on by its keyword:

* ``min_healthy=N``: workers healthy in the gateway's view (``GET /workers`` ``is_healthy``) **and** on
  their own ``GET /health`` (200) are at least N; None (default) = every listed worker. A worker this
  machine cannot reach is judged by the gateway's view alone (and the message says so).
* ``consistent=True`` (default): every worker runs the same SGLang version, model and launch
  configuration, and loaded the same weights (``/weights_checker`` checksums, :mod:`.consistency`);
  ``ignore=[...]`` leaves fields out (``"weights_checksum"`` the weights). The gateway registered each worker
  as what it serves (``GET /workers`` model_id, worker_type, labels), and none as the model ``unknown``
  (:mod:`.registration`).
* ``max_imbalance=X``: a load sent through the gateway (the ``sglang_throughput`` load keywords), and
  each worker's share of the requests it served (its own ``/metrics``, :mod:`.shares`). With N workers
  of a role the fair share is 1/N, and the imbalance is ``max |share - 1/N| / (1/N)``: 0 is a perfect
  spread, 0.25 allows 37.5 %/62.5 % between two workers, 1 allows a worker twice its fair share (or none).
* ``cache_aware=True``: a prefix-sharing workload through the gateway gets clearly more cached tokens than
  the same workload routed at random (:mod:`.cache_routing`). The gateway must run ``--policy cache_aware``.

It needs a gateway: ``--sglang-url`` pointing at one, or ``--sglang-workers N``; on a single server it fails.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pytest_sglang.errors import SGLangError
from pytest_sglang.fleet.handle import fleet_of
from pytest_sglang.formatting import fmt
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.correctness.consistency import FIELDS, compare_workers, views
from pytest_sglang.gates.fleet.registration import registration_check
from pytest_sglang.gates.keywords import (
    Always,
    AtLeast,
    EachOneOf,
    OptionalCount,
    Requires,
    rules,
)
from pytest_sglang.gates.load.drain import Storm
from pytest_sglang.gates.load.shares import WorkerShares, measure
from pytest_sglang.gates.load.throughput import DRAIN_NEEDS_CANCEL, load_keywords, load_spec
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen.shape.load import LoadShape

if TYPE_CHECKING:
    from pytest_sglang.fleet.handle import SGLangFleet, WorkerHandle
    from pytest_sglang.loadgen import LoadResult

__all__ = ["imbalance", "run_marker"]

GATE = "fleet"
#: ``ignore=[...]``: names of the compared fields (a typo is a usage error naming the closest one).
FieldNames = Annotated[list[str] | None, EachOneOf(FIELDS, "fields sglang_fleet compares (see docs/fleet.md)")]
_GATEWAY_FIX = ("point --sglang-url at SGLang's gateway (smg or sglang-router), or launch a fleet with "
                "--sglang-workers N (and --sglang-gateway \"ARGS\")")
_BALANCE_FIX = ("check the gateway's --policy (cache_aware routes by prefix and balances only past "
                "--balance-abs-threshold/--balance-rel-threshold; round_robin and power_of_two spread requests) and "
                "that every worker is healthy")
_CACHE_FIX = ("run the gateway with --policy cache_aware (--sglang-gateway \"--policy cache_aware\"); keep the "
              "workers' radix cache on (no --disable-radix-cache); see --cache-threshold")


def _no_gateway(ctx: GateContext) -> GateOutcome:
    out = GateOutcome(GATE)
    out.add(compare(GATE, "gateway", "a single SGLang server (no gateway in front)", "==",
                    "SGLang's gateway with its workers", source=f"{ctx.server.url}: GET /workers is not a worker list",
                    remedy=_GATEWAY_FIX))
    return out


def _direct(worker: WorkerHandle | None) -> tuple[bool | None, str]:
    """Whether the worker's own /health is 200 (None: not probed), and what it said."""
    if worker is None or worker.server is None:
        why = "listed after the start" if worker is None else worker.unreachable or "not reachable from here"
        return None, f"own /health not probed ({why})"
    try:
        status = worker.health()
    except SGLangError as exc:
        return False, f"own /health failed ({str(exc).splitlines()[0]})"
    return status == 200, f"own /health {status}"


def health_check(fleet: SGLangFleet, min_healthy: int | None, out: GateOutcome) -> None:
    """Count workers healthy in the gateway's view and on their own /health; notes say each one's state."""
    handles = {w.url: w for w in fleet.workers}
    # In the fleet's numbering (the start-up display's), not the gateway's listing order.
    listed = sorted(fleet.discover().workers,
                    key=lambda e: handles[e.url].index if e.url in handles else len(handles))
    healthy, seen = 0, set[str]()
    for index, entry in enumerate(listed):
        if entry.key in seen:  # one worker under a second spelling (issue 22): one worker, counted once
            out.notes.append(f"worker {index}: the gateway lists {entry.key} a second time: counted once")
            continue
        seen.add(entry.key)
        worker = handles.get(entry.url)
        direct, said = _direct(worker)
        ok = entry.is_healthy and direct is not False
        healthy += ok
        name = worker.name() if worker is not None else f"worker {index} ({entry.url})"
        view = "healthy" if entry.is_healthy else "UNHEALTHY"
        out.notes.append(f"{name}: gateway says {view}, {said}{'' if ok else ': not counted'}")
    required = min_healthy if min_healthy is not None else max(1, len(seen))  # no worker is no fleet
    out.add(compare(GATE, "healthy_workers", healthy, ">=", required, unit="workers",
                    keyword="min_healthy" if min_healthy is not None else "",
                    source="the gateway's GET /workers is_healthy and each worker's own GET /health (200)"
                           + ("" if min_healthy is not None else f"; required: every listed worker ({len(seen)})"),
                    remedy="restart the worker(s) not counted below; a gateway notices a dead worker only at its "
                           "next health check (--health-check-interval-secs, default 60 s)"))
    out.context["gateway"] = f"{fleet.summary()}; {_readiness(fleet)}"


def _readiness(fleet: SGLangFleet) -> str:
    import httpx

    try:
        return fleet.readiness().describe()
    except httpx.HTTPError as exc:
        return f"GET /readiness failed: {type(exc).__name__}"


def imbalance(requests: dict[str, int]) -> float | None:
    """``max |share - 1/N| / (1/N)`` over the N workers of ``requests`` (None when nothing was served)."""
    total = sum(requests.values())
    if not requests or total == 0:
        return None
    fair = 1 / len(requests)
    return max(abs(n / total - fair) / fair for n in requests.values())


def balance_checks(fleet: SGLangFleet, shares: WorkerShares, result: LoadResult, limit: float) -> list[Check]:
    """One imbalance check per role that received requests (regular; or prefill and decode)."""
    roles = dict.fromkeys(w.role for w in fleet.workers)
    checks = []
    for role in roles:
        members = [w for w in fleet.workers if w.role == role]
        group = {w.url: shares.requests[w.url] for w in members if w.url in shares.requests}
        measured = imbalance(group) if shares.complete else None
        metric = "request_imbalance" if role == "regular" else f"request_imbalance ({role} workers)"
        said = shares.describe() if shares.complete else "unknown (see 'worker shares' below)"
        checks.append(compare(GATE, metric, None if measured is None else round(measured, 4), "<=", limit,
                              keyword="max_imbalance", remedy=_BALANCE_FIX, detail=result.spec.shape(),
                              source=f"each worker's own /metrics sglang:num_requests_total during the load; fair "
                                     f"share {1 / len(members):.1%} each of {len(members)} {role} workers; "
                                     f"shares: {said}"))
    return checks


def cache_check(ctx: GateContext, fleet: SGLangFleet, out: GateOutcome) -> None:
    """Prefix-sharing traffic through the gateway against the same traffic routed at random."""
    from pytest_sglang.gates.facts.capacity import token_capacity
    from pytest_sglang.gates.fleet.cache_routing import run_cache_routing, workload_for

    regular = [w for w in fleet.workers if w.role == "regular"]
    servers = [w.server for w in regular if w.server is not None]
    if not regular or len(servers) < len(regular) or len(fleet.workers) != len(regular):
        why = ("a prefill/decode fleet (routing of PD pairs is not compared)" if len(fleet.workers) != len(regular)
               else "the random baseline sends to each worker directly, and "
                    + "; ".join(f"{w.name()}: {w.unreachable}" for w in regular if w.server is None))
        out.add(compare(GATE, "cached_tokens_via_gateway", None, ">=", 1, unit="tokens", source=f"not run: {why}",
                        remedy="run where every worker is reachable"))
        return
    infos = [s.info() for s in servers]
    pool = min((token_capacity(i).least or 0) for i in infos)
    max_input = min(int(i.get("max_req_input_len") or 0) or 4096 for i in infos)
    workload = workload_for(len(servers), pool, max_input)
    with ctx.load_lock():
        result = run_cache_routing(ctx.server, servers, [w.name() for w in regular], workload)
    out.add(compare(GATE, "cached_tokens_via_gateway", result.gateway_cached, ">=", result.required,
                    unit="tokens", source=result.source(), detail=workload.shape(), remedy=_CACHE_FIX))
    out.context["cache-aware routing"] = (f"{workload.shape()}: cached through the gateway "
                                          f"{fmt(result.gateway_cached)} tokens, routed at random "
                                          f"{fmt(result.random_cached)}, ideal {fmt(workload.reusable)}")
    if result.unflushed:
        out.notes.append(f"/flush_cache did not answer 200 on {', '.join(result.unflushed)}: earlier traffic may "
                         "have been cached there")


@rules(Always("the workers behind the gateway are healthy (min_healthy, or all of them)"),
       Requires("cancel_rate", needs=("max_imbalance",),
                why="the cancelled requests are part of the max_imbalance load",
                fix="give max_imbalance too (the load is sent for it), or drop cancel_rate"),
       DRAIN_NEEDS_CANCEL)
@load_keywords(concurrency=8, requests=64, input_len=128, output_len=16)
def run_marker(
    ctx: GateContext,
    *,
    min_healthy: OptionalCount = None,
    consistent: bool = True,
    ignore: FieldNames = None,
    max_imbalance: Annotated[float | None, AtLeast(0)] = None,
    cache_aware: bool = False,
    shape: LoadShape,
) -> GateOutcome:
    """``@pytest.mark.sglang_fleet``: health, consistency, request shares and cache-aware routing of a fleet.

    See the module docstring for each check. The load keywords (``concurrency`` ... ``load_timeout_s``)
    shape the ``max_imbalance`` load, as for ``sglang_throughput``. This signature declares the
    marker's keywords: the plugin validates a marker against it at collection and shows it in ``--markers``.
    """
    fleet = fleet_of(ctx.server)
    if fleet is None:
        return _no_gateway(ctx)
    out = GateOutcome(GATE)
    health_check(fleet, min_healthy, out)
    if consistent:
        seen = views(fleet.workers)
        same = compare_workers(seen, list(ignore or ()), GATE)
        out.checks += [*same.checks, registration_check(seen, GATE)]
        out.notes += same.notes
        out.unchecked += same.unchecked
    if max_imbalance is not None:
        spec = load_spec(shape, marker="sglang_fleet")
        storm = Storm.before(fleet, shape.max_drain_s) if shape.storm_wanted() else None
        result, shares = measure(fleet, lambda: ctx.load(spec))
        out.checks += balance_checks(fleet, shares, result, max_imbalance)
        if storm is not None:  # each worker's own /metrics: the gateway's has no running requests or KV
            storm.judge(GATE, result, out)
        shares.record(out)
        out.context["load"] = (f"{result.spec.shape()} through the gateway: {result.completed} completed, "
                               f"{result.failed} failed {dict(result.errors) or ''}".rstrip())
    if cache_aware:
        cache_check(ctx, fleet, out)
    return out
