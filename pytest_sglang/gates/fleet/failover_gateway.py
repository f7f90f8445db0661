"""``sglang_failover(target="gateway")``: the verdict on a gateway restart under load (:mod:`.gateway_restart_run`).

Checks: the load's errors (``max_error_rate``), every worker the gateway listed healthy before the restart
is listed healthy after it (smg#752, smg#1419: a gateway that comes up empty), every one of them is routed a
request again, and (``max_recover_s``) how long after the restart that took. The context holds each worker's
share of what the new gateway routed, and the timeline.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_sglang.formatting import fmt
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.fleet.failover_run import never_check
from pytest_sglang.gates.fleet.gateway_restart_run import GatewayRestartRun
from pytest_sglang.gates.load import throughput as tput
from pytest_sglang.gates.load.shares import SHARES_KEY

GATE = "failover"
_SOURCE = "gateway GET /workers and smg_* metrics, polled every 0.1 s after the restart"
_EMPTY_FIX = ("the restarted gateway did not list every worker again (smg#752, smg#1419: a gateway that comes up "
              "empty): give the workers at its start (--worker-urls) or by service discovery that re-lists them, "
              "and read the gateway's log after the restart")
_ROUTED_FIX = ("the restarted gateway lists the workers but routes some no request: check the routing policy and "
               "each worker's registration (model_id 'unknown': sglang PR #37555; sglang_fleet(consistent=True) "
               "names it)")
_ERRORS_FIX = ("requests sent while the gateway was down fail (connection refused) and streams it carried are cut: "
               "allow for them with max_error_rate, or put a retrying load balancer in front of the gateway")
_RECOVER_FIX = ("the gateway re-checks its workers every --health-check-interval-secs before routing them: lower it, "
                "e.g. --sglang-gateway \"--health-check-interval-secs 1\"")


def judge_gateway(run: GatewayRestartRun, *, kill: str, at: float, max_error_rate: float,
                  max_recover_s: float | None) -> GateOutcome:
    """The outcome of a finished :class:`GatewayRestartRun`."""
    result = run.result
    assert result is not None
    outcome = GateOutcome(GATE)
    if "restart" not in run.times:
        outcome.add(never_check(GATE, "gateway_restart", at, run.spec.requests))
        return outcome
    outcome.add(dataclasses.replace(tput.error_check(result, max_error_rate), gate=GATE, remedy=_ERRORS_FIX))
    missing = [u for u in run.before if u not in run.healthy_after]
    outcome.add(compare(GATE, "workers_after_restart", len(run.before) - len(missing), ">=", len(run.before),
                        unit="workers", source=_SOURCE, remedy=_EMPTY_FIX,
                        detail=f"listed before: {', '.join(run.before) or 'none'}; not listed healthy after: "
                               f"{', '.join(missing) or 'none'}"))
    if run.routed_known:
        unrouted = [u for u in run.before if run.routed_after.get(u, 0.0) <= 0]
        outcome.add(compare(GATE, "workers_routed_after_restart", len(run.before) - len(unrouted), ">=",
                            len(run.before), unit="workers", source=_SOURCE, remedy=_ROUTED_FIX,
                            detail=f"routed no request after the restart: {', '.join(unrouted) or 'none'}"))
    else:
        outcome.notes.append("the gateway exposes no per-worker request counter: recovery is when it lists every "
                             "worker healthy; no shares after the restart")
    if max_recover_s is not None:
        recover = run.seconds("restart", "recovered")
        if recover is None:
            outcome.add(Check(GATE, "recover_s", f"not within {run.window():.0f} s", max_recover_s, "<=",
                              source=_SOURCE, passed=False, remedy=_RECOVER_FIX, keyword="max_recover_s"))
        else:
            outcome.add(compare(GATE, "recover_s", recover, "<=", max_recover_s, unit="s", source=_SOURCE,
                                remedy=_RECOVER_FIX, keyword="max_recover_s"))
    outcome.context.update(_context(run, kill))
    return outcome


def _timeline(run: GatewayRestartRun) -> dict[str, float | None]:
    """The events in seconds from the start of the timed load (the reports' failover timeline keys)."""
    records = run.result.records if run.result is not None else []
    origin = records[0].start_time - records[0].start if records else run.times.get("restart", 0.0)
    failed = sorted(r.start + r.e2e for r in records if r.error_kind)
    out = {k: round(run.times[k] - origin, 3) if k in run.times else None for k in ("restart", "restarted",
                                                                                   "recovered")}
    out.update(first_error=round(failed[0], 3) if failed else None, last_error=round(failed[-1], 3) if failed
               else None, load_end=round(run.result.duration, 3) if run.result is not None else None)
    return out


def _context(run: GatewayRestartRun, kill: str) -> dict[str, Any]:
    result = run.result
    assert result is not None
    described = tput.describe(result)
    described.pop("server view (/metrics peaks)", None)  # the gateway has no SGLang /metrics
    shares = run.shares()
    events = {k: run.seconds("restart", k) for k in ("restarted", "answered", "listed", "recovered")}
    context: dict[str, Any] = {
        **described,
        "gateway restart": (f"{run.fleet.flavor} {run.fleet.version or ''}".strip() + f" sent {kill} after "
                            f"{run.done_at_restart} of {run.spec.requests} requests finished, then started again on "
                            "the same ports"),
        "after the restart (s)": ", ".join(f"{k} {fmt(v)}" for k, v in events.items() if v is not None)
        or "the gateway never listed a worker again",
    }
    if shares:
        context[SHARES_KEY] = shares
    context["failover"] = {
        "target": "gateway", "signal": kill, "requests": run.spec.requests, "restarted_after": run.done_at_restart,
        "errors": dict(result.errors), "error_rate": round(result.error_rate, 6) if result.completed + result.failed
        else None, "workers_before": list(run.before), "workers_after": list(run.healthy_after),
        "recover_s": run.seconds("restart", "recovered"), "shares_after_restart": shares,
        "timeline_s": _timeline(run),
    }
    return context
