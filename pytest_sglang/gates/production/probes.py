"""``@pytest.mark.sglang_probes(...)``: would Kubernetes keep this pod while it serves a load?

The readiness and liveness probes are given as a Kubernetes user writes them (``httpGet.path``,
``timeoutSeconds``, ``periodSeconds``, ``failureThreshold``; the keywords ``readiness_path``,
``readiness_timeout_seconds``, ...). During a load (the load keywords) every target (the server, or
each reachable worker of a fleet) is probed at each probe's period (:mod:`pytest_sglang.loadgen.client.probing`).
Each answer is awaited longer than the probe's timeout, so the real latency is known: a probe counts
as failed, as the kubelet counts it, when it answered later than ``timeoutSeconds`` or outside 200-399.
``failureThreshold`` failures in a row mark the pod unready (readiness) or restart it (liveness): the
gate fails naming the probe, the moment in the load and the latencies, and suggests the settings that
would have held (a timeout above the slowest answer, or a threshold above the longest run of failures).

0.5.23's ``/health`` runs a generation (sglang#22511): under long prefills it answers late, or 503 after
``SGLANG_HEALTH_CHECK_TIMEOUT`` (20 s). The opposite failure, a stalled data-parallel rank while
``/health`` stays 200 (sglang PR#32949), no probe sees: with ``check_dp_ranks=True`` the gate also sends
one-token requests pinned to each DP rank (``routed_dp_rank``) and fails when a rank produces nothing
within ``rank_timeout_s`` while the probes pass.

A probe can fail only when ``failureThreshold`` of its probes fall in the load (``periodSeconds`` apart):
when the load given is shorter than that window and no probe failed in it, the gate runs the same load
shape again with enough requests, at the pace it measured, to last the whole window, probed afresh
(one load without gaps, as a real load is: a probe landing between two loads would reset a run of
failures), at most :data:`MAX_ROUNDS` loads in all; the probes of the last load are judged. A probe that
still got fewer probes than a failure needs (the load was cut by its deadline, or completed nothing)
could not be judged: when no check failed, the test is skipped saying so (it fails under
``--sglang-strict``), never passed.
"""

from __future__ import annotations

import concurrent.futures
import math
from typing import TYPE_CHECKING, Annotated

import httpx

from pytest_sglang.gates.base import Check, GateCannotJudge, GateOutcome, compare
from pytest_sglang.gates.keywords import Above, AnyOf, Count, KeywordError, OneOf, UrlPath, rules
from pytest_sglang.gates.load.throughput import InFlight, Length, Requests, Timeout, load_spec
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen.client.probing import Prober, ProbeResult, ProbeSpec
from pytest_sglang.loadgen.shape.spec import APIS, MAX_REQUESTS

if TYPE_CHECKING:
    from pytest_sglang.loadgen import LoadResult, LoadSpec
    from pytest_sglang.server.members import Handle

__all__ = ["first_failure", "run_marker", "suggestion"]

GATE = "probes"
MARKER = "@pytest.mark.sglang_probes"
#: Loads run to cover the probes' window: the one given, then up to this many in all, each sized from the last.
MAX_ROUNDS = 3
#: A sized load asks for this much more time than the window at the pace measured (the pace varies).
_MARGIN = 1.3
Seconds = Annotated[float, Above(0)]
#: A probe's ``httpGet.path``; None: no such probe.
ProbePath = Annotated[str | None, UrlPath()]
_VERDICT = {"readiness": "marked the pod unready (removed from the Service)", "liveness": "restarted the pod"}
_RANK_FIX = ("a DP rank that produces no token while /health answers 200 is stalled (sglang PR#32949): restart "
             "the server; probe a generation pinned to each rank (routed_dp_rank) rather than /health alone")
#: SGLang's own switch (0.5.23, default on): with it off, /health answers without running a generation.
_HEALTH_FIX = ("or start SGLang with SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false in its environment: /health then "
               "answers at once instead of running a generation behind the prefills (/health_generate still runs one)")


def first_failure(results: list[ProbeResult], spec: ProbeSpec) -> list[ProbeResult] | None:
    """The first run of ``failure_threshold`` consecutive failures (None when the probe held)."""
    run: list[ProbeResult] = []
    for result in results:
        if _failed(result, spec):
            run.append(result)
            if len(run) >= spec.failure_threshold:
                return run
        else:
            run = []
    return None


def _failed(result: ProbeResult, spec: ProbeSpec) -> bool:
    return not result.ok or result.latency_s > spec.timeout_s


def suggestion(results: list[ProbeResult], spec: ProbeSpec) -> str:
    """Settings that would have held over these results (and SGLang's switch, for a probe of ``/health``)."""
    health = f"; {_HEALTH_FIX}" if spec.path == "/health" else ""
    answered = [r for r in results if r.ok]
    if answered and all(r.ok or r.status is None for r in results) and len(answered) == len(results):
        slowest = max(r.latency_s for r in answered)
        return (f"timeoutSeconds: {math.ceil(slowest * 1.25 + 0.5)} would have held (the slowest answer took "
                f"{slowest:.2f} s){health}")
    longest, run = 0, 0
    for result in results:
        run = run + 1 if _failed(result, spec) else 0
        longest = max(longest, run)
    return (f"failureThreshold: {longest + 1} would have held at this timeout ({longest} failures in a row; some "
            f"probes got no 2xx/3xx answer at all, so a longer timeout alone does not help){health}")


def _specs(values: dict[str, object]) -> list[ProbeSpec]:
    out = []
    for kind in ("readiness", "liveness"):
        path = values[f"{kind}_path"]
        if not isinstance(path, str):  # None: no such probe (the keyword's type allows nothing else)
            continue
        out.append(ProbeSpec(kind, path, float(str(values[f"{kind}_timeout_seconds"])),
                             float(str(values[f"{kind}_period_seconds"])),
                             int(str(values[f"{kind}_failure_threshold"]))))
    return out


def _targets(ctx: GateContext) -> list[tuple[str, str, Handle]]:
    """``(name, label, handle)``: a fleet's rows say which worker (``" on worker 1 (http://...)"``)."""
    return [(label or ctx.server.url, f" on {label}" if label else "", member.server)
            for member in ctx.server.members() if member.server is not None for label in [member.label()]]


def _probe_check(name: str, label: str, spec: ProbeSpec, results: list[ProbeResult], load_s: float,
                 unjudged: list[str]) -> Check:
    """The probe's row; when it held but got fewer probes than a failure needs, why goes to ``unjudged``."""
    run = first_failure(results, spec)
    measured = "held" if run is None else f"failed {len(run)} times in a row"
    sent = sum(r.at_s <= load_s for r in results)
    source = f"{name}: {sent} probes during the {load_s:.1f} s load"
    if run is not None:
        source += (f"; from {run[0].at_s:.1f} s to {run[-1].at_s:.1f} s into the load, latencies "
                   f"{', '.join(r.describe() for r in run)}: Kubernetes would have {_VERDICT[spec.kind]}")
    elif sent <= spec.failure_threshold:  # the first one went out before the load's requests
        unjudged.append(f"{spec.describe()}{label}: {sent} probe(s) during the {load_s:.1f} s load, too few for the "
                        f"{spec.failure_threshold} failures in a row a failure needs (after the first: "
                        f"{spec.window_s:g} s of load)")
    slowest = max((r.latency_s for r in results), default=0.0)
    return compare(GATE, spec.describe() + label, measured, "==", "held", source=source,
                   detail=f"slowest answer {slowest:.2f} s",
                   remedy=suggestion(results, spec) if run is not None else "")


def _dp_size(server: Handle) -> int:
    return int(server.info().get("dp_size") or 1)


def _paced(result: LoadResult) -> bool:
    """The load ran to its end and completed requests: its pace can size the next one."""
    return result.completed > 0 and not result.not_sent and not result.stopped


def _sized(spec: LoadSpec, last: LoadResult, window_s: float) -> LoadSpec:
    """The same load shape with enough requests to last ``window_s`` at ``last``'s pace (with a margin)."""
    rate = last.completed / max(last.duration, 0.1)
    requests = math.ceil(rate * window_s * _MARGIN) + (spec.concurrency or 1)
    return spec.replace(requests=min(MAX_REQUESTS, max(requests, last.spec.requests + 1)))


def _why_short(loads: list[LoadResult], load_s: float, window_s: float) -> str:
    """Why the probes got fewer chances than a failure needs."""
    stopped = next((r.stopped for r in loads if r.stopped), "")
    if stopped:
        return f"the load was cut: {stopped}"
    if not loads[-1].completed:
        return "the load completed no request, so its pace could not size a longer one"
    if load_s < window_s:
        return f"{len(loads)} loads ran, the most the gate runs, the last {load_s:.1f} s long"
    return "answers took longer than periodSeconds, so fewer probes were sent"


def _failed_any(prober: Prober, specs: list[ProbeSpec]) -> bool:
    return any(first_failure(prober.results[(name, spec.kind)], spec) is not None
               for name, _ in prober.targets for spec in specs)


def _probed_load(ctx: GateContext, targets: list[tuple[str, Handle]], specs: list[ProbeSpec],
                 spec: LoadSpec) -> tuple[Prober, list[LoadResult], float]:
    """The load given, probed; while it was too short for a probe to fail, a longer one probed afresh.

    Returns the prober and length of the last load (the one judged) and every load run.
    """
    # awaited past the probe's timeout, so the real latency is measured and suggestions can use it
    measured = [ProbeSpec(s.kind, s.path, s.timeout_s * 5 + 5, s.period_s, s.failure_threshold) for s in specs]
    window_s = max((s.window_s for s in specs), default=0.0)
    loads: list[LoadResult] = []
    current = spec
    while True:
        prober = Prober(targets, measured).start()
        try:
            loads.append(ctx.load(current))
            load_s = prober.elapsed()
        finally:
            prober.stop()
        if (load_s >= window_s or len(loads) >= MAX_ROUNDS or not _paced(loads[-1])
                or _failed_any(prober, specs)):
            return prober, loads, load_s
        current = _sized(spec, loads[-1], window_s)


def _rank_check(server: Handle, timeout_s: float, label: str) -> Check:
    """One-token generations pinned to each DP rank: how many ranks answered."""
    dp = _dp_size(server)
    body = {"text": "ping", "sampling_params": {"max_new_tokens": 1}}

    def ask(rank: int) -> bool:
        try:
            with server.client(timeout=httpx.Timeout(timeout_s, connect=5.0)) as client:
                return client.post("/generate", json={**body, "routed_dp_rank": rank}).status_code == 200
        except httpx.HTTPError:
            return False

    ranks = list(range(dp)) * 2  # twice: a round-robin balancer that ignores the pin still reaches every rank
    with concurrent.futures.ThreadPoolExecutor(len(ranks)) as pool:
        answers = list(pool.map(ask, ranks))
    silent = sorted({r for r, ok in zip(ranks, answers, strict=True) if not ok})
    return compare(GATE, "DP ranks producing tokens" + label, dp - len(silent), "==", dp, unit="ranks",
                   source=f"{server.url}: 2 one-token /generate requests per rank (routed_dp_rank), {timeout_s:g} s "
                          f"each" + (f"; rank(s) {', '.join(map(str, silent))} answered nothing" if silent else ""),
                   remedy=_RANK_FIX)


@rules(AnyOf(("readiness_path", "liveness_path", "check_dp_ranks"),
             fix="give readiness_path='/health' or liveness_path='/health' (a probe to judge), or leave "
                 "check_dp_ranks=True on a server with dp_size > 1"))
def run_marker(
    ctx: GateContext,
    *,
    readiness_path: ProbePath = "/health",
    readiness_timeout_seconds: Seconds = 1.0,
    readiness_period_seconds: Seconds = 10.0,
    readiness_failure_threshold: Count = 3,
    liveness_path: ProbePath = "/health",
    liveness_timeout_seconds: Seconds = 1.0,
    liveness_period_seconds: Seconds = 10.0,
    liveness_failure_threshold: Count = 3,
    check_dp_ranks: bool = True,
    rank_timeout_s: Seconds = 30.0,
    concurrency: InFlight = 16,
    requests: Requests = 64,
    input_len: Length = 2048,
    output_len: Length = 64,
    api: Annotated[str, OneOf(APIS)] = "native",
    request_timeout_s: Timeout = None,
    load_timeout_s: Timeout = None,
) -> GateOutcome:
    """``@pytest.mark.sglang_probes``: the probes hold during the load, and every DP rank answers.

    Defaults are Kubernetes' own (``timeoutSeconds`` 1, ``periodSeconds`` 10, ``failureThreshold`` 3);
    a path of None drops that probe. See the module docstring. This signature declares the keywords.
    """
    specs = _specs(dict(locals()))
    out = GateOutcome(GATE)
    targets = _targets(ctx)
    ranked = [(server, label) for _, label, server in targets if check_dp_ranks and _dp_size(server) > 1]
    if not specs and not ranked:  # known only now: the server's dp_size
        raise KeywordError(MARKER, {"readiness_path": None, "liveness_path": None, "check_dp_ranks": check_dp_ranks},
                           f"checks nothing on {ctx.server.describe()}: no probe, and the DP-rank check needs "
                           "dp_size > 1 (every server here has one DP rank), so it would always pass",
                           "give readiness_path='/health' or liveness_path='/health'")
    spec = load_spec(requests=requests, concurrency=concurrency, request_rate=None, input_len=input_len,
                     output_len=output_len, api=api, request_timeout_s=request_timeout_s,
                     load_timeout_s=load_timeout_s)
    prober, loads, load_s = _probed_load(ctx, [(name, server) for name, _, server in targets], specs, spec)
    unjudged: list[str] = []
    for name, label, _ in targets:
        for probe in specs:
            out.checks.append(_probe_check(name, label, probe, prober.results[(name, probe.kind)], load_s, unjudged))
    out.context["load"] = f"{loads[-1].spec.shape()}: {loads[-1].completed} completed, {loads[-1].failed} failed"
    if len(loads) > 1:
        window_s = max(s.window_s for s in specs)
        out.context["load"] += (f"; the probes of this load, {load_s:.1f} s long, are judged: the {len(loads) - 1} "
                                f"load(s) before it ({', '.join(f'{r.spec.requests} requests' for r in loads[:-1])}) "
                                f"were too short for a probe to fail (the first probe and failureThreshold more, "
                                f"periodSeconds apart, need {window_s:g} s)")
    for server, label in ranked:
        out.checks.append(_rank_check(server, rank_timeout_s, label))
    if unjudged and out.passed:
        window_s = max(s.window_s for s in specs)
        raise GateCannotJudge("; ".join(unjudged) + f" ({_why_short(loads, load_s, window_s)}). Fix: give the load "
                              "more time (a larger load_timeout_s, or requests), or a shorter periodSeconds")
    return out
