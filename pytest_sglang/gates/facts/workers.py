"""Per-worker records: what the capacity and hicache gates share when they judge each worker of a fleet.

Each worker's checks are the single-server checks with ``of worker <i> (<url>)`` appended to the
metric, so a failure names the worker and its figure::

    min_total_tokens=8192: measured 4,096 tokens (max_total_num_tokens of worker 1 (http://10.0.0.2:30000))

A worker this machine cannot reach (``--sglang-fleet-direct auto``: a cluster's pod IPs) is judged from
what the gateway lists about it where the figure is there; every other floor gets a record measured as
"not checked" with the reason, which fails: a floor nobody could verify never passes silently.
This module imports no gate (the gates import it), so the gates keep no circle (pyproject's contract).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pytest_sglang.errors import SGLangError
from pytest_sglang.gates.base import Check, GateOutcome, compare

if TYPE_CHECKING:
    from pytest_sglang.fleet.handle import SGLangFleet, WorkerHandle

__all__ = ["NOT_CHECKED", "fact_int", "for_worker", "info_of", "merge_context", "no_workers", "not_checked",
           "unreachable_why"]

#: What a record shows as measured when the worker's figure could not be read.
NOT_CHECKED = "not checked"
_UNREACHABLE_FIX = ("run the tests where the workers' addresses are reachable (--sglang-fleet-direct require "
                    "makes an unreachable worker an error at start)")


def for_worker(check: Check, worker: WorkerHandle) -> Check:
    """``check`` as worker ``worker``'s record: its metric names the worker (index and URL)."""
    return dataclasses.replace(check, metric=f"{check.metric} of {worker.name()}")


def not_checked(gate: str, metric: str, worker: WorkerHandle, required: Any, *, why: str, keyword: str = "",
                op: str = ">=") -> Check:
    """A failing record for a figure of ``worker`` that could not be read (``why``): measured "not checked"."""
    return Check(gate=gate, metric=f"{metric} of {worker.name()}", measured=NOT_CHECKED, required=required, op=op,
                 source=f"not checked: {why}", passed=False, remedy=_UNREACHABLE_FIX, keyword=keyword)


def unreachable_why(worker: WorkerHandle, what: str) -> str:
    """Why ``what`` of an unreachable worker is not known."""
    return f"{worker.unreachable or 'not reachable from here'}; the gateway does not report {what}"


def info_of(worker: WorkerHandle) -> tuple[dict[str, Any] | None, str]:
    """The worker's own /server_info, or why it is not available."""
    if not worker.reachable:
        return None, worker.unreachable or "not reachable from here"
    try:
        return worker.info(), ""
    except SGLangError as exc:
        return None, f"GET /server_info failed: {str(exc).splitlines()[0]}"


def no_workers(gate: str, fleet: SGLangFleet) -> Check:
    """A gateway listing no worker: nothing meets a floor (a vacuous pass would hide an empty fleet)."""
    return compare(gate, "workers", len(fleet.workers), ">=", 1, unit="workers",
                   source=f"the gateway's GET /workers at {fleet.gateway.url}",
                   remedy="register workers with the gateway (its --worker-urls, or POST /workers)")


def merge_context(out: GateOutcome, parts: list[tuple[WorkerHandle, GateOutcome]]) -> None:
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


def fact_int(worker: WorkerHandle, name: str) -> int | None:
    """A whole-number fact the gateway lists about ``worker`` (smg 1.x labels), or None."""
    text = worker.entry.fact(name)
    return int(text) if text is not None and text.isdigit() else None
