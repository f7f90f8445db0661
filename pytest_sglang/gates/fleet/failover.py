"""Failover gate: ``@pytest.mark.sglang_failover`` kills one worker of a launched fleet under load.

The load (the ``sglang_throughput`` keywords) runs through the gateway; worker ``worker`` gets signal
``kill`` once ``at`` x ``requests`` have *finished* (completed or failed): a point in the work, not in
a guessed duration, so the kill lands at the same place of the run on any hardware. The gate judges
what clients saw (``max_error_rate``), how long the gateway took to mark the worker unhealthy
(``max_detect_s``) and, with ``restart=True``, how long until the restarted worker served again
(``max_recover_s``: from the restart, its start-up included, until the gateway lists it healthy and
routes it a request). The mechanics are :class:`~pytest_sglang.gates.fleet.failover_run.FailoverRun`'s.

Launch mode only: an attached fleet is not ours to kill (the test is skipped, saying why); a single
server fails ("needs a fleet"). The fleet is whole again when the gate returns: with ``restart=False``
the worker is restarted all the same, unmeasured, and ``worker_restored`` fails if the gateway does not
list it healthy again, so no later test runs on a dead worker silently.
"""

from __future__ import annotations

import dataclasses
import signal
from typing import TYPE_CHECKING, Annotated, Any

from pytest_sglang.errors import ConfigError
from pytest_sglang.fleet.handle import fleet_of
from pytest_sglang.formatting import fmt
from pytest_sglang.gates import keywords
from pytest_sglang.gates.base import Check, GateNotApplicable, GateOutcome, compare
from pytest_sglang.gates.fleet.failover_run import RECOVER_WINDOW_S, TIMELINE, FailoverRun, never_check
from pytest_sglang.gates.keywords import AtLeast, AtMost, Fraction, KeywordError, OneOf, Requires, Threshold
from pytest_sglang.gates.load import throughput as tput
from pytest_sglang.gates.load.drain import Storm
from pytest_sglang.gates.load.shares import REQUESTS_KEY, SHARES_KEY
from pytest_sglang.gates.load.throughput import DRAIN_NEEDS_CANCEL, load_keywords
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen import LoadSpec
from pytest_sglang.loadgen.shape.load import LoadShape

if TYPE_CHECKING:
    from pytest_sglang.fleet.handle import Handle, SGLangFleet

GATE = "failover"
MARKER = "@pytest.mark.sglang_failover"
#: Signals a failover test may send: death (KILL), shutdowns (TERM, INT, QUIT), a hang (STOP).
SIGNALS = ("SIGKILL", "SIGTERM", "SIGINT", "SIGQUIT", "SIGSTOP")
#: What the gate takes down: one worker (default) or the gateway in front of them.
TARGETS = ("worker", "gateway")
Signal = Annotated[str, OneOf(SIGNALS, origin="signals a worker can be sent")]
#: A fraction of the requests finished: 1.0 would kill after the load, when nothing can be seen.
At = Annotated[float, AtLeast(0.01), AtMost(0.99)]
Worker = Annotated[int, AtLeast(0)]
_SOURCE = "gateway GET /workers and smg_* metrics, polled every 0.1 s"
_DETECT_FIX = ("fast gateway health checks: --sglang-gateway \"--health-check-interval-secs 1 "
               "--health-failure-threshold 1\" (the default, 60 s x 3 failures, takes about 3 minutes)")
_ERRORS_FIX = ("streams already running on the killed worker fail (a gateway retries only requests it has not "
               "started streaming; about concurrency / workers are in flight there): allow for them with "
               "max_error_rate, and read the failures above for any other kind")
_RECOVER_FIX = ("the gateway re-admits a worker after --health-success-threshold checks every "
                "--health-check-interval-secs and closes an open circuit breaker after --cb-timeout-duration-secs: "
                "lower them, e.g. --sglang-gateway \"--health-check-interval-secs 1 --cb-timeout-duration-secs 5\"")
_RESTORE_FIX = ("read the restarted worker's log and the gateway's; later tests run with one worker fewer "
                "until it is back")


@keywords.rules(keywords.Always("the killed worker was killed and is restored, and the load's errors"),
                 Requires("max_recover_s", needs=("restart",), why="recovery is measured on the restarted worker",
                         fix="drop max_recover_s, or leave restart at True"),
                 DRAIN_NEEDS_CANCEL)
@load_keywords(concurrency=16, requests=256, input_len=256, output_len=64)
def run_marker(
    ctx: GateContext,
    *,
    kill: Signal = "SIGKILL",
    at: At = 0.3,
    worker: Worker = 0,
    restart: bool = True,
    max_error_rate: Annotated[float, Fraction()] = 0.0,
    max_detect_s: Threshold = None,
    max_recover_s: Threshold = None,
    shape: LoadShape,
    target: Annotated[str, OneOf(TARGETS, origin="what the gate restarts")] = "worker",
) -> GateOutcome:
    """``@pytest.mark.sglang_failover``: kill a worker under load, judge errors, detection and recovery.

    ``target="gateway"`` restarts the gateway instead (:mod:`.failover_gateway`): errors, every worker listed and
    routed again, ``max_recover_s`` from the restart, and each worker's share afterwards.

    This signature declares the marker's keywords (types, defaults, ranges): the plugin validates a
    marker against it at collection and shows it in ``pytest --markers``.
    """
    # The keywords first: a typo is named whatever the server turns out to be.
    try:
        spec = _spec(ctx, shape.spec(sample_server_metrics=False))  # a gateway has no SGLang /metrics
    except ConfigError as exc:  # the load's own checks (e.g. the dataset's form): name the marker's keyword
        raise KeywordError(MARKER, {exc.source.removeprefix("LoadSpec."): exc.value}, exc.problem, exc.fix) from None
    if target == "gateway":
        _check_gateway_keywords(worker=worker, restart=restart, max_detect_s=max_detect_s,
                                cancel_rate=shape.cancel_rate, max_drain_s=shape.max_drain_s)
    fleet = fleet_of(ctx.server)
    if fleet is None:
        return _no_fleet(ctx.server)
    if not fleet.launched:
        raise GateNotApplicable(
            f"sglang_failover: the fleet behind {ctx.server.server_url} was attached, not launched, and "
            "pytest-sglang never kills workers it did not start (launch it with --sglang-workers N; under "
            "xdist only the controller launches: run failover tests without -n)")
    if target == "gateway":
        return _restart_gateway(ctx, fleet, signal.Signals[kill].value, spec, kill=kill, at=at,
                                max_error_rate=max_error_rate, max_recover_s=max_recover_s)
    if worker >= len(fleet.workers):
        raise KeywordError(MARKER, {"worker": worker}, f"is not a worker of this fleet of {len(fleet.workers)}",
                           f"give worker=0 to worker={len(fleet.workers) - 1}")
    run = FailoverRun(fleet, worker, signal.Signals[kill].value, spec, restart=restart, max_detect_s=max_detect_s,
                      max_recover_s=max_recover_s, api_key=ctx.server.api_key)
    storm = Storm.before(fleet, shape.max_drain_s) if shape.storm_wanted() else None
    if storm is not None and not restart:  # the killed worker stays down: only the others can drain
        storm.readers.pop(fleet.workers[worker].name(), None)
        storm.idle.pop(fleet.workers[worker].name(), None)
    # The run-wide load lock: nothing else may load the fleet while one of its workers is down.
    with ctx.load_lock():
        try:
            run.execute(at)
        except Exception:
            run.restore()
            raise
        run.restore()
    outcome = judge(run, kill=kill, at=at, max_error_rate=max_error_rate, max_detect_s=max_detect_s,
                    max_recover_s=max_recover_s)
    if storm is not None and run.result is not None:
        storm.judge(GATE, run.result, outcome)
    return outcome


def _check_gateway_keywords(*, worker: int, restart: bool, max_detect_s: float | None, cancel_rate: float | None,
                            max_drain_s: float | None) -> None:
    """Keywords of a worker failover that mean nothing when the gateway is restarted: a usage error."""
    killed = "target='gateway' restarts the gateway: no worker is killed, detected or restarted"
    # The drain after a cancellation storm is judged on a worker failover only: here it would check nothing.
    drained = "target='gateway' does not judge the workers' drain after cancelled requests"
    for name, value, ok, problem in (("worker", worker, worker == 0, killed), ("restart", restart, restart, killed),
                                     ("max_detect_s", max_detect_s, max_detect_s is None, killed),
                                     ("cancel_rate", cancel_rate, not cancel_rate, drained),
                                     ("max_drain_s", max_drain_s, max_drain_s is None, drained)):
        if not ok:
            raise KeywordError(MARKER, {"target": "gateway", name: value}, problem, f"drop {name}, or target='gateway'")


def _restart_gateway(ctx: GateContext, fleet: SGLangFleet, signum: int, spec: LoadSpec, *, kill: str, at: float,
                     max_error_rate: float, max_recover_s: float | None) -> GateOutcome:
    from pytest_sglang.gates.fleet.failover_gateway import judge_gateway
    from pytest_sglang.gates.fleet.gateway_restart_run import GatewayRestartRun

    run = GatewayRestartRun(fleet, signum, spec, max_recover_s=max_recover_s, api_key=ctx.server.api_key)
    with ctx.load_lock():
        run.execute(at)
    return judge_gateway(run, kill=kill, at=at, max_error_rate=max_error_rate, max_recover_s=max_recover_s)


def _spec(ctx: GateContext, spec: LoadSpec) -> LoadSpec:
    """The run's --sglang-request-timeout / --sglang-load-timeout for what the marker leaves unset."""
    return spec.with_timeouts(ctx.request_timeout_s, ctx.load_timeout_s)


def _no_fleet(server: Handle) -> GateOutcome:
    check = Check(GATE, "fleet", "a single SGLang server (sglang_failover needs a fleet)",
                  "SGLang's gateway in front of workers", "==", source=server.describe(), passed=False,
                  remedy="launch a fleet, e.g. --sglang-workers 2: the gate kills one of its workers")
    return GateOutcome(GATE, [check])


def judge(run: FailoverRun, *, kill: str, at: float, max_error_rate: float, max_detect_s: float | None,
          max_recover_s: float | None) -> GateOutcome:
    """The outcome of a finished :class:`FailoverRun`: each figure against its limit, and the timeline."""
    result = run.result
    assert result is not None
    outcome = GateOutcome(GATE)
    if "kill" not in run.times:
        outcome.add(never_check(GATE, "kill", at, run.spec.requests))
    timeouts = tput.timeout_check(result, max_error_rate)
    if timeouts is not None:  # a hung worker (SIGSTOP) shows here
        outcome.add(dataclasses.replace(timeouts, gate=GATE))
    outcome.add(dataclasses.replace(tput.error_check(result, max_error_rate), gate=GATE, remedy=_ERRORS_FIX))
    detect = run.seconds("kill", "detected")
    if max_detect_s is not None:
        outcome.add(_limit("detect_s", detect, max_detect_s, _unseen(run, "detected"), _DETECT_FIX))
    if max_recover_s is not None:
        outcome.add(_limit("recover_s", run.seconds("restart", "recovered"), max_recover_s,
                           run.restore_error or "not seen", _RECOVER_FIX))
    outcome.add(compare(GATE, "worker_restored", run.restored, "==", True, source=_SOURCE,
                        detail=run.restore_error or "listed healthy by the gateway again", remedy=_RESTORE_FIX))
    outcome.context.update(_context(run, kill))
    if not run.routed_known:
        outcome.notes.append("the gateway exposes no per-worker request counter: recovery is when it lists the "
                             "worker healthy; no request shares")
    return outcome


def _limit(metric: str, measured: float | None, limit: float, unseen: str, remedy: str) -> Check:
    keyword = "max_" + metric
    if measured is None:
        return Check(GATE, metric, unseen, limit, "<=", source=_SOURCE, passed=False, remedy=remedy, keyword=keyword)
    return compare(GATE, metric, measured, "<=", limit, unit="s", source=_SOURCE, remedy=remedy, keyword=keyword)


def _unseen(run: FailoverRun, event: str) -> str:
    if "kill" not in run.times:
        return "no kill"
    end = run.times.get("restart", run.times.get("load_end_poll"))
    watched = f" ({end - run.times['kill']:.1f} s watched after the kill)" if end is not None else ""
    return f"not within the run{watched}"


def _context(run: FailoverRun, kill: str) -> dict[str, Any]:
    result = run.result
    assert result is not None
    described = tput.describe(result)
    described.pop("server view (/metrics peaks)", None)  # the gateway has no SGLang /metrics
    handle = run.fleet.worker(run.index)
    timeline = run.timeline()
    shares = run.shares()
    context: dict[str, Any] = {
        **described,
        "killed": (f"worker {run.index} ({run.url}, {handle.role}) with {kill} after {run.done_at_kill} of "
                   f"{run.spec.requests} requests finished" if "kill" in run.times else "nothing"),
        "gateway": _gateway_line(run),
        "timeline (s from the load start)": ", ".join(
            f"{k.replace('_', ' ')} {v:.2f}" for k, v in timeline.items() if v is not None) or "nothing happened",
    }
    if shares:  # the same keys as the throughput and fleet gates' (the reports read them alike)
        context[SHARES_KEY], context[REQUESTS_KEY] = shares, run.routed_during_load()
    context["failover"] = {
        "worker": run.index, "url": run.url, "role": handle.role, "signal": kill,
        "gateway": f"{run.fleet.flavor} {run.fleet.version or ''}".strip(),
        "requests": run.spec.requests, "killed_after": run.done_at_kill if "kill" in run.times else None,
        "errors": dict(result.errors), "error_rate": round(result.error_rate, 6) if result.completed + result.failed
        else None, "detect_s": run.seconds("kill", "detected"), "recover_s": run.seconds("restart", "recovered"),
        "routed_after_kill": int(run.routed_after_kill) if run.routed_known else None, "restored": run.restored,
        "timeline_s": timeline, "shares": shares,
    }
    return context


def _gateway_line(run: FailoverRun) -> str:
    if "kill" not in run.times:
        return "not watched (no kill)"
    parts = [f"{run.fleet.flavor} {run.fleet.version or ''}".strip() + ":"]
    detect = run.seconds("kill", "detected")
    parts.append(f"marked it unhealthy {fmt(detect)} s after the kill" if detect is not None
                 else f"did not mark it unhealthy ({_unseen(run, 'detected')})")
    breaker = run.seconds("kill", "cb_open")
    if breaker is not None:
        parts.append(f"; circuit breaker open after {fmt(breaker)} s")
    if run.routed_known:
        last = run.seconds("kill", "last_routed")
        parts.append(f"; requests routed to the dead worker after the kill: {fmt(run.routed_after_kill)}"
                     + (f" (the last {fmt(last)} s after it)" if last is not None else ""))
    recover = run.seconds("restart", "recovered")
    if "restart" in run.times and run.restart:
        parts.append(f"; serving again {fmt(recover)} s after the restart" if recover is not None
                     else f"; not serving again ({run.restore_error})")
    return " ".join(parts).replace(" ;", ";")


__all__ = ["GATE", "RECOVER_WINDOW_S", "SIGNALS", "TIMELINE", "judge", "run_marker"]
