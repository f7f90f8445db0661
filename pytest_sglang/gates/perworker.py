"""The capacity and hicache gates on a fleet: every worker is judged, one record per worker.

Each worker's checks are the single-server checks with ``of worker <i> (<url>)`` appended to the
metric, so a failure names the worker and its figure::

    min_total_tokens=8192: measured 4,096 tokens (max_total_num_tokens of worker 1 (http://10.0.0.2:30000))

A worker this machine cannot reach (``--sglang-fleet-direct auto``: a cluster's pod IPs) is judged from
what the gateway lists about it where the figure is there (smg 1.x labels carry ``max_model_len``);
every other floor gets a record measured as None with the reason ("not checked: ..."), which fails:
a floor nobody could verify never passes silently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_sglang.errors import SGLangError
from pytest_sglang.formatting import fmt
from pytest_sglang.gates import capacity, hicache, keywords
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.capacity import served_max_model_len, token_capacity

if TYPE_CHECKING:
    from pytest_sglang.fleet.handle import SGLangFleet, WorkerHandle
    from pytest_sglang.gates.registry import GateContext

__all__ = ["NOT_CHECKED", "effective_per_worker", "evaluate_fleet_capacity", "evaluate_fleet_hicache",
           "for_worker", "not_checked"]

#: What a record shows as measured when the worker's figure could not be read.
NOT_CHECKED = "not checked"
_UNREACHABLE_FIX = ("run the tests where the workers' addresses are reachable (--sglang-fleet-direct require "
                    "makes an unreachable worker an error at start)")
#: capacity keyword -> (metric, unit): what the single-server gate calls each figure.
_CAPACITY = {"min_total_tokens": ("max_total_num_tokens", "tokens"),
             "min_running_requests": ("max_running_requests", "requests"),
             "min_context_length": ("context_length", "tokens"),
             "min_concurrent_requests": ("concurrent_requests", "requests")}
_HICACHE_SIZES = {"min_host_tokens": "host_pool_tokens", "min_host_gb_per_rank": "host_pool_gb_per_rank",
                  "min_ratio": "host_device_ratio"}


def for_worker(check: Check, worker: WorkerHandle) -> Check:
    """``check`` as worker ``worker``'s record: its metric names the worker (index and URL)."""
    return dataclasses.replace(check, metric=f"{check.metric} of {worker.name()}")


def not_checked(gate: str, metric: str, worker: WorkerHandle, required: Any, *, why: str, keyword: str = "",
                op: str = ">=") -> Check:
    """A failing record for a figure of ``worker`` that could not be read (``why``): measured "not checked"."""
    return Check(gate=gate, metric=f"{metric} of {worker.name()}", measured=NOT_CHECKED, required=required, op=op,
                 source=f"not checked: {why}", passed=False, remedy=_UNREACHABLE_FIX, keyword=keyword)


def _unreachable_why(worker: WorkerHandle, what: str) -> str:
    return f"{worker.unreachable or 'not reachable from here'}; the gateway does not report {what}"


def _info(worker: WorkerHandle) -> tuple[dict[str, Any] | None, str]:
    """The worker's own /server_info, or why it is not available."""
    if not worker.reachable:
        return None, worker.unreachable or "not reachable from here"
    try:
        return worker.info(), ""
    except SGLangError as exc:
        return None, f"GET /server_info failed: {str(exc).splitlines()[0]}"


def _no_workers(gate: str, fleet: SGLangFleet) -> Check:
    """A gateway listing no worker: nothing meets a floor (a vacuous pass would hide an empty fleet)."""
    return compare(gate, "workers", len(fleet.workers), ">=", 1, unit="workers",
                   source=f"the gateway's GET /workers at {fleet.gateway.url}",
                   remedy="register workers with the gateway (its --worker-urls, or POST /workers)")


def _merge_context(out: GateOutcome, parts: list[tuple[WorkerHandle, GateOutcome]]) -> None:
    """Context lines shared by every worker once; those that differ once per worker."""
    keys = list(dict.fromkeys(k for _, part in parts for k in part.context))
    for key in keys:
        values = [part.context.get(key) for _, part in parts]
        if len(parts) > 1 and all(v == values[0] for v in values):
            out.context[f"{key} (every worker)"] = values[0]
            continue
        for worker, part in parts:
            if key in part.context:
                out.context[f"{key} ({worker.name()})"] = part.context[key]


def _fact_int(worker: WorkerHandle, name: str) -> int | None:
    text = worker.entry.fact(name)
    return int(text) if text is not None and text.isdigit() else None


def _unreachable_capacity(out: GateOutcome, worker: WorkerHandle, why: str, floors: Mapping[str, int]) -> None:
    for keyword, required in floors.items():
        metric, unit = _CAPACITY[keyword]
        context = _fact_int(worker, "max_model_len") if keyword == "min_context_length" else None
        if context is not None and worker.server is None:
            out.add(compare(capacity.GATE, f"{metric} of {worker.name()}", context, ">=", required, unit=unit,
                            keyword=keyword, remedy="set --context-length (up to the model's own limit)",
                            source=f"the gateway's /workers labels.max_model_len ({why}; its KV pool, which may "
                                   "bound the context, is not visible from here)"))
        else:
            what = "this figure" if worker.server is not None else f"{metric} (only the worker's /server_info does)"
            out.add(not_checked(capacity.GATE, metric, worker, required, keyword=keyword,
                                why=why if worker.server is not None else _unreachable_why(worker, what)))


def evaluate_fleet_capacity(
    fleet: SGLangFleet, *, min_total_tokens: int | None = None, min_running_requests: int | None = None,
    min_context_length: int | None = None, min_concurrent_requests: int | None = None,
    avg_request_tokens: int | None = None, min_fleet_total_tokens: int | None = None,
) -> GateOutcome:
    """Every worker's KV capacity against the per-worker floors, and the fleet's sum (``min_fleet_total_tokens``).

    The keywords mean what they mean for one server (:func:`~pytest_sglang.gates.capacity.evaluate_capacity`),
    applied to each worker.
    """
    floors = {k: v for k, v in (("min_total_tokens", min_total_tokens), ("min_running_requests", min_running_requests),
                                ("min_context_length", min_context_length),
                                ("min_concurrent_requests", min_concurrent_requests)) if v is not None}
    given = {**floors, "avg_request_tokens": avg_request_tokens, "min_fleet_total_tokens": min_fleet_total_tokens}
    keywords.check(capacity.run_marker, "evaluate_fleet_capacity", {k: v for k, v in given.items() if v is not None})
    out = GateOutcome(capacity.GATE)
    if not fleet.workers:
        out.add(_no_workers(capacity.GATE, fleet))
    parts: list[tuple[WorkerHandle, GateOutcome]] = []
    pools: dict[int, int | None] = {}
    for worker in fleet.workers:
        info, why = _info(worker)
        figure = token_capacity(info) if info is not None else None
        pools[worker.index] = sum(figure.per_rank) if figure is not None and figure.per_rank else None
        if info is None or worker.server is None:
            _unreachable_capacity(out, worker, why, floors)
            continue
        if floors:
            part = capacity.evaluate_capacity(info, max_model_len=served_max_model_len(worker.server),
                                              avg_request_tokens=avg_request_tokens, **floors)
            out.checks += [for_worker(c, worker) for c in part.checks]
            parts.append((worker, part))
    if min_fleet_total_tokens is not None:
        out.add(_fleet_total(fleet, pools, min_fleet_total_tokens))
    _merge_context(out, parts)
    return out


def _fleet_total(fleet: SGLangFleet, pools: Mapping[int, int | None], required: int) -> Check:
    # In a prefill-decode fleet a request's KV lives on its decode worker for the whole generation; a
    # prefill pool holds a prompt only until it is transferred. So the fleet's capacity is the decode pools.
    pd = any(w.role == "decode" for w in fleet.workers)
    counted = {i: p for i, p in pools.items() if not (pd and fleet.workers[i].role == "prefill")}
    known = {i: p for i, p in counted.items() if p is not None}
    unknown = [fleet.workers[i].name() for i, p in counted.items() if p is None]
    terms = " + ".join(f"{fleet.workers[i].name()} {fmt(p)}" for i, p in known.items()) or "no worker's pool is known"
    which = "decode workers (prefill pools only hold prompts until the transfer)" if pd else "workers"
    source = (f"sum over the {len(counted)} {which} (and their DP ranks) of each worker's /server_info "
              f"internal_states[i].memory_usage.token_capacity: {terms}")
    if unknown:
        source += f"; not known (so the sum is a lower bound): {', '.join(unknown)}"
    more = "--sglang-decode M" if pd else "--sglang-workers N"
    return compare(capacity.GATE, "fleet_total_tokens", sum(known.values()) if known else None, ">=", required,
                   unit="tokens", keyword="min_fleet_total_tokens", source=source,
                   remedy="raise each worker's KV pool (--mem-fraction-static; python -m pytest_sglang plan -- "
                          f"<launch args>) or add workers ({more})")


def _unreachable_hicache(out: GateOutcome, worker: WorkerHandle, why: str, kwargs: Mapping[str, Any]) -> None:
    why = why if worker.server is not None else _unreachable_why(worker, "hierarchical-cache settings")
    out.add(not_checked(hicache.GATE, "enable_hierarchical_cache", worker, kwargs.get("enabled", True), op="==",
                        keyword="enabled", why=why))
    for key in ("write_policy", "io_backend", "mem_layout", "storage_backend"):
        if kwargs.get(key) is not None:
            out.add(not_checked(hicache.GATE, f"hicache_{key}", worker, kwargs[key], op="==", keyword=key, why=why))
    for key, metric in _HICACHE_SIZES.items():
        if kwargs.get(key) is not None and kwargs.get("enabled", True):
            out.add(not_checked(hicache.GATE, metric, worker, kwargs[key], keyword=key, why=why))


def evaluate_fleet_hicache(fleet: SGLangFleet, **kwargs: Any) -> GateOutcome:
    """:func:`~pytest_sglang.gates.hicache.evaluate_hicache` on every worker (its keywords), one record each."""
    keywords.check(hicache.run_marker, "evaluate_fleet_hicache", {k: v for k, v in kwargs.items() if v is not None})
    out = GateOutcome(hicache.GATE)
    if not fleet.workers:
        out.add(_no_workers(hicache.GATE, fleet))
    parts: list[tuple[WorkerHandle, GateOutcome]] = []
    for worker in fleet.workers:
        server = worker.server
        why = worker.unreachable or "not reachable from here"
        part = None
        if server is not None:
            try:
                part = hicache.evaluate_hicache(server, **kwargs)
            except SGLangError as exc:
                why = f"its /server_info or /metrics could not be read: {str(exc).splitlines()[0]}"
        if part is None:
            _unreachable_hicache(out, worker, why, kwargs)
            continue
        out.checks += [for_worker(c, worker) for c in part.checks]
        parts.append((worker, part))
    _merge_context(out, parts)
    return out


def effective_per_worker(ctx: GateContext, fleet: SGLangFleet, outcome: GateOutcome, min_gain: float | None) -> None:
    """``effective=True`` on a fleet: the reuse workload sent to each worker directly, one record each.

    Through the gateway the prefixes would be spread over the workers and no single host tier would
    be shown to work, so each reachable worker runs it in turn.
    """
    for worker in fleet.workers:
        if worker.server is None:
            outcome.add(not_checked(hicache.GATE, "host_hit_tokens", worker, 1,
                                    why=_unreachable_why(worker, "host-tier hits (the workload is sent to "
                                                                 "each worker directly)")))
            continue
        part = GateOutcome(hicache.GATE)
        hicache.run_effective(ctx, worker.server, part, min_gain)
        outcome.checks += [for_worker(c, worker) for c in part.checks]
        for key, value in part.context.items():
            outcome.context[f"{key} ({worker.name()})"] = value
