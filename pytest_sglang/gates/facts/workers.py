"""Per-member records: what the capacity and hicache gates share when they judge each member of a handle.

A lone server is its own one member (its records keep plain names). A fleet's worker's checks are the
single-server checks with ``of worker <i> (<url>)`` (its label) appended to the metric, so a failure names
the worker and its figure::

    min_total_tokens=8192: measured 4,096 tokens (max_total_num_tokens of worker 1 (http://10.0.0.2:30000))

A worker this machine cannot reach (``--sglang-fleet-direct auto``: a cluster's pod IPs) is judged from
what the gateway lists about it where the figure is there; every other floor gets a record measured as
"not checked" with the reason, which fails: a floor nobody could verify never passes silently.
This module imports no gate (the gates import it), so the gates keep no circle (pyproject's contract).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_sglang.errors import SGLangError
from pytest_sglang.formatting import Value
from pytest_sglang.gates.base import Check, GateOutcome, compare

if TYPE_CHECKING:
    from pytest_sglang.server.members import Handle, Member

__all__ = ["NOT_CHECKED", "fact_int", "for_worker", "info_of", "merge_context", "name_of", "no_workers",
           "not_checked", "unreachable_why"]

#: What a record shows as measured when the worker's figure could not be read.
NOT_CHECKED = "not checked"
_UNREACHABLE_FIX = ("run the tests where the workers' addresses are reachable (--sglang-fleet-direct require "
                    "makes an unreachable worker an error at start)")


def name_of(member: Member) -> str:
    """The member's label in records (``worker 1 (URL)``); ``the server`` for a lone server."""
    return member.label() or "the server"


def for_worker(check: Check, member: Member) -> Check:
    """``check`` as ``member``'s record: a fleet's worker is named (index and URL), a lone server kept as is."""
    label = member.label()
    return check if label is None else dataclasses.replace(check, metric=f"{check.metric} of {label}")


def not_checked(gate: str, metric: str, worker: Member, required: Value, *, why: str, keyword: str = "",
                op: str = ">=") -> Check:
    """A failing record for a figure of ``worker`` that could not be read (``why``): measured "not checked"."""
    return Check(gate=gate, metric=f"{metric} of {name_of(worker)}", measured=NOT_CHECKED, required=required, op=op,
                 source=f"not checked: {why}", passed=False, remedy=_UNREACHABLE_FIX, keyword=keyword)


def unreachable_why(worker: Member, what: str) -> str:
    """Why ``what`` of an unreachable worker is not known."""
    return f"{worker.unreachable or 'not reachable from here'}; the gateway does not report {what}"


def info_of(member: Member) -> tuple[dict[str, Any] | None, str]:
    """The member's own /server_info, or why it is not available.

    A lone server's failure is the gate's error (raised, as for any request to it); a fleet's worker's is
    noted on its records and the others are still judged.
    """
    if member.server is None:
        return None, member.unreachable or "not reachable from here"
    if member.label() is None:
        return member.server.info(), ""
    try:
        return member.server.info(), ""
    except SGLangError as exc:
        return None, f"GET /server_info failed: {str(exc).splitlines()[0]}"


def no_workers(gate: str, handle: Handle) -> Check:
    """A gateway listing no worker: nothing meets a floor (a vacuous pass would hide an empty fleet)."""
    return compare(gate, "workers", len(handle.members()), ">=", 1, unit="workers",
                   source=f"the gateway's GET /workers at {handle.url}",
                   remedy="register workers with the gateway (its --worker-urls, or POST /workers)")


def merge_context(out: GateOutcome, parts: Sequence[tuple[Member, GateOutcome]]) -> None:
    """Context lines shared by every member once; those that differ once per member (a lone server: as is)."""
    keys = list(dict.fromkeys(k for _, part in parts for k in part.context))
    for key in keys:
        values = [part.context.get(key) for _, part in parts]
        if len(parts) > 1 and all(v == values[0] for v in values):
            out.context[f"{key} (every worker)"] = values[0]
            continue
        for member, part in parts:
            if key in part.context:
                label = member.label()
                out.context[key if label is None else f"{key} ({label})"] = part.context[key]


def fact_int(member: Member, name: str) -> int | None:
    """A whole-number fact the gateway lists about ``member`` (smg 1.x labels), or None (a lone server)."""
    text = member.fact(name)
    return int(text) if text is not None and text.isdigit() else None
