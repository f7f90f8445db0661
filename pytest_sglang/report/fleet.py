"""The fleet section of the reports: one row per worker, the request shares gates measured, failover timelines.

:func:`identify_fleet` reads the fleet once when the server starts (the gateway's view of each worker,
and each reachable worker's own ``/server_info`` for its version and KV capacity);
:func:`refresh_health` adds each worker's health at the end of the run; :func:`fleet_section` joins
that with what the tests recorded: request shares (from any gate's outcome that measured them) and
failover timelines (``sglang_failover``). Like the server identity this never raises: a report must
not fail because a fact is missing. Text from the servers is scrubbed and cleaned.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from pytest_sglang.fleet.handle import fleet_of
from pytest_sglang.redaction import clean_text, scrub
from pytest_sglang.report.identity import int_or_none

if TYPE_CHECKING:
    from pytest_sglang.fleet import WorkerHandle
    from pytest_sglang.report.records import TestRecord
    from pytest_sglang.server.members import Handle

__all__ = ["fleet_section", "identify_fleet", "refresh_health", "shares_of"]

_MAX_PARALLEL = 8


def identify_fleet(server: Handle) -> dict[str, object] | None:
    """The fleet ``server`` (a gateway with its workers) as report data, or None for a single server.

    One of the places that asks for the fleet: the gateway's flavor, version and its view of each worker
    (``GET /workers``) exist only on a fleet, not on the members a gate loops over.
    """
    fleet = fleet_of(server)
    if fleet is None:
        return None
    with ThreadPoolExecutor(max_workers=min(_MAX_PARALLEL, max(1, len(fleet.workers)))) as pool:
        workers = list(pool.map(_worker, fleet.workers))
    return {"gateway": {"flavor": fleet.flavor, "version": fleet.version, "url": scrub(server.url) or None,
                        "mode": fleet.mode, "launched": fleet.launched},
            "workers": workers}


def _worker(worker: WorkerHandle) -> dict[str, object]:
    # The /server_info its direct probe read and validated at attach or launch: not asked again.
    info: Mapping[str, Any] = (worker.server.initial_info if worker.server is not None else None) or {}
    if not info and worker.reachable:
        try:
            info = worker.info()
        except Exception:  # best effort: the fleet gates report a worker that does not answer
            info = {}
    return {"index": worker.index, "role": worker.role, "url": scrub(worker.url),
            "healthy": worker.entry.is_healthy, "healthy_at_end": None, "reachable": worker.reachable,
            "sglang_version": _text(info.get("version") or worker.entry.fact("version")),
            "model": _text(info.get("model_path") or worker.entry.model_id),
            "max_total_num_tokens": int_or_none(info.get("max_total_num_tokens")), "share": None, "share_source": None}


def refresh_health(server: Handle, fleet: Mapping[str, object]) -> None:
    """Set each worker's ``healthy_at_end`` from the gateway's ``/workers`` now (left None when it fails)."""
    fleet_handle = fleet_of(server)
    if fleet_handle is None:
        return
    try:
        found = fleet_handle.discover()
    except Exception:  # the gateway may be gone at the end of a run; the row keeps its start state
        return
    health = {scrub(w.url): w.is_healthy for w in found.workers}
    for row in _list(fleet.get("workers")):
        if isinstance(row, dict):
            row["healthy_at_end"] = health.get(str(row.get("url")))


def shares_of(outcome: Mapping[str, object]) -> dict[str, float] | None:
    """The per-worker request shares a gate outcome (its ``to_dict``) recorded, or None.

    Every gate that measures them (throughput, SLO, fleet, failover) records them under the same
    context key (:data:`pytest_sglang.gates.load.shares.SHARES_KEY`).
    """
    from pytest_sglang.gates.load.shares import worker_shares  # the load generator: at the end of the run only

    shares = worker_shares(outcome)
    return {scrub(url): share for url, share in shares.items()} if shares else None


def fleet_section(fleet: Mapping[str, object] | None, tests: Iterable[TestRecord]) -> dict[str, object] | None:
    """The report's ``fleet`` object: the workers, each gate's shares, every failover; None without a fleet."""
    shares: list[dict[str, Any]] = []
    failovers: list[dict[str, Any]] = []
    for test in tests:
        for gate in test.gates:
            data = gate.to_dict()
            found = shares_of(data)
            if found is not None:
                shares.append({"nodeid": test.nodeid, "gate": gate.gate, "by_url": found})
            record = data["context"].get("failover")
            if gate.gate == "failover" and isinstance(record, Mapping):
                failovers.append(_failover(test, record))
    if fleet is None and not failovers:
        return None
    workers = [dict(w) for w in _list((fleet or {}).get("workers")) if isinstance(w, Mapping)]
    for measured in shares:  # the last measurement of the run wins; each is kept in ``shares``
        for row in workers:
            if row["url"] in measured["by_url"]:
                row["share"], row["share_source"] = measured["by_url"][row["url"]], measured["nodeid"]
    return {"gateway": dict(_mapping((fleet or {}).get("gateway"))), "workers": workers, "shares": shares,
            "failovers": failovers}


def _failover(test: TestRecord, record: Mapping[str, object]) -> dict[str, object]:
    timeline = record.get("timeline_s")
    return {"nodeid": test.nodeid, "outcome": test.outcome, **{k: v for k, v in record.items() if k != "timeline_s"},
            "timeline_s": {str(k): v if _is_num(v) else None for k, v in (timeline or {}).items()}
            if isinstance(timeline, Mapping) else {}}


# ---- shared by the renderers ------------------------------------------------------------------------
def health(row: Mapping[str, object]) -> str:
    """``healthy``, ``DOWN``, or ``healthy -> DOWN`` when the gateway's word changed by the end of the run."""
    def word(value: object) -> str:
        return "?" if value is None else ("healthy" if value else "DOWN")

    start, end = row.get("healthy"), row.get("healthy_at_end")
    return word(start) if end is None or end == start else f"{word(start)} -> {word(end)}"


def share(row: Mapping[str, object]) -> str:
    value = row.get("share")
    return f"{value:.0%}" if _is_num(value) else "-"


def capacity(row: Mapping[str, object]) -> str:
    value = row.get("max_total_num_tokens")
    return f"{value:,}" if isinstance(value, int) else "?"


def gateway_line(fleet: Mapping[str, object]) -> str:
    """``smg 1.13.0 (launched) at http://... with 2 workers``."""
    gw = _mapping(fleet.get("gateway"))
    what = " ".join(str(x) for x in (gw.get("flavor"), gw.get("version")) if x) or "gateway"
    mode = " (launched)" if gw.get("launched") else " (attached)" if gw else ""
    where = f" at {gw['url']}" if gw.get("url") else ""
    n = len(_list(fleet.get("workers")))
    return f"{what}{mode}{where} with {n} worker{'' if n == 1 else 's'}"


#: Timeline events as shown, in order (the failover gate's names).
EVENTS = (("kill", "kill"), ("first_error", "first error"), ("last_error", "last error"),
          ("cb_open", "breaker open"), ("detected", "detected"), ("restarted", "restarted"),
          ("recovered", "recovered"), ("load_end", "load end"))


def timeline_text(failover: Mapping[str, object]) -> str:
    """``kill 5.44 s, first error 5.45 s, ..., load end 17.50 s`` (events that happened)."""
    times = _mapping(failover.get("timeline_s"))
    parts = [f"{label} {times[key]:.2f} s" for key, label in EVENTS if _is_num(times.get(key))]
    return ", ".join(parts) or "no event recorded"


def failover_head(failover: Mapping[str, object]) -> str:
    """``worker 0 SIGKILL: 8 errors (2.7%) [stream_error=8], detected in 0.15 s, ...``."""
    who = "gateway" if failover.get("target") == "gateway" else f"worker {failover.get('worker')}"
    return f"{who} {failover.get('signal', '')}: {failover_summary(failover)}"


def failover_summary(failover: Mapping[str, object]) -> str:
    """``8 errors (2.7%) [stream_error=8], detected in 0.15 s, serving again 4.38 s after the restart``."""
    errors = _mapping(failover.get("errors"))
    count = sum(v for v in errors.values() if isinstance(v, int))
    rate = failover.get("error_rate")
    kinds = ", ".join(f"{k}={v}" for k, v in errors.items())
    detect, recover = failover.get("detect_s"), failover.get("recover_s")
    return (f"{count} errors" + (f" ({rate:.1%})" if _is_num(rate) else "") + (f" [{kinds}]" if kinds else "")
            + ("" if failover.get("target") == "gateway"  # a restarted gateway is not "detected"
               else f", detected in {detect:.2f} s" if _is_num(detect) else ", not detected within the run")
            + (f", serving again {recover:.2f} s after the restart" if _is_num(recover) else ""))


def _is_num(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _text(value: object) -> str | None:
    return None if value is None or value == "" else clean_text(scrub(str(value))) or None


def rows(fleet: Mapping[str, object]) -> Sequence[Mapping[str, object]]:
    """The worker rows, in index order."""
    found = [r for r in _list(fleet.get("workers")) if isinstance(r, Mapping)]
    return sorted(found, key=lambda r: int(r.get("index", 0)))


def _mapping(value: object) -> Mapping[str, object]:
    """``value`` when it is a JSON object (a report read back may hold anything), else empty."""
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[object]:
    """``value`` when it is a JSON array, else empty."""
    return value if isinstance(value, list) else []
