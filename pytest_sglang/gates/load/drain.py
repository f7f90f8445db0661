"""After a cancellation storm, the server gives back what the cancelled requests held (``max_drain_s``).

A load with ``cancel_rate`` closes that share of its streams mid-answer (:mod:`..loadgen.cancel`). SGLang
0.5.23 aborts a request whose client went away, freeing its slot and its KV; a leak keeps
``sglang:num_running_reqs`` and ``sglang:kv_used_tokens`` above idle until a restart, and the server
serves fewer requests at once for ever. Both gauges are read from ``/metrics`` before the load (the idle
values) and polled after it until they are back, for at most ``max_drain_s``. On a fleet each worker's
own ``/metrics`` is read (the gateway's holds no such gauge). ``kv_used_tokens`` counts the slots locked
by running requests, not the radix cache's evictable ones (0.5.23's ``metrics_collector.py``), so a warm
prefix cache does not count as a leak; where it is missing, ``sglang:token_usage`` (a fraction) is read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_sglang.formatting import fmt
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.sglang import metrics_text
from pytest_sglang.sglang.metrics_text import Sample

if TYPE_CHECKING:
    from pytest_sglang.server.members import Handle

RUNNING = "sglang:num_running_reqs"
KV_USED = "sglang:kv_used_tokens"
USAGE = "sglang:token_usage"
#: Seconds the gauges may take to come back after the load (the default of ``max_drain_s``). SGLang 0.5.23
#: notices a silent disconnect when a request's wait times out (tokenizer_manager: every 4 s) and
#: republishes the idle gauges at once; 30 s leaves room for a busy host.
DEFAULT_DRAIN_S = 30.0
POLL_S = 0.25
_FIX_METRICS = "launch the server with --enable-metrics: the drain is judged from its /metrics gauges"
_FIX_LEAK = ("a request whose client went away still holds its slot and KV: SGLang must abort it on the "
             "disconnect (0.5.23 does: tokenizer_manager aborts a disconnected request); check the SGLang "
             "version, and that a proxy or gateway in front closes the upstream connection when the client does")

Metrics = dict[str, list[Sample]]
#: One server's /metrics read within the seconds given (None: the client's own timeout): parsed, or why not.
Reader = Callable[[float | None], "Metrics | str"]
#: The least time a poll's read is given, even at the deadline: the last reading must be able to answer.
MIN_READ_S = 1.0


@dataclass(frozen=True)
class Gauges:
    """Running requests and KV in use on one server at one instant (None: not reported, ``why`` says why)."""

    running: float | None
    kv: float | None
    kv_name: str
    why: str = ""

    def within(self, idle: Gauges) -> bool:
        """Whether these readings are back at (or below) ``idle``'s."""
        return (self.running is not None and idle.running is not None and self.running <= idle.running
                and self.kv is not None and idle.kv is not None and self.kv <= idle.kv)


def targets(server: Handle) -> dict[str, Reader]:
    """The /metrics to judge: each worker's on a fleet, else the server's own (by name)."""
    return {member.label() or server.url: member.metrics_or_why for member in server.members()}


def read_gauges(reader: Reader, timeout_s: float | None = None) -> Gauges:
    """The two gauges now, summed over ranks (the KV one: ``kv_used_tokens``, else ``token_usage``)."""
    got = reader(timeout_s)
    if isinstance(got, str):
        return Gauges(None, None, KV_USED, got)
    kv_name = KV_USED if metrics_text.value(got, KV_USED) is not None else USAGE
    running, kv = metrics_text.value(got, RUNNING), metrics_text.value(got, kv_name)
    why = "" if running is not None and kv is not None else f"its /metrics has no {RUNNING} or {KV_USED}"
    return Gauges(running, kv, kv_name, why)


def idle(readers: dict[str, Reader]) -> dict[str, Gauges]:
    """Each server's gauges before the load: the values it must come back to."""
    return {name: read_gauges(reader) for name, reader in readers.items()}


def wait_drained(readers: dict[str, Reader], before: dict[str, Gauges],
                 max_drain_s: float) -> dict[str, tuple[Gauges, float]]:
    """Poll every server until it is back at its idle gauges or ``max_drain_s`` passes: (last reading, seconds).

    One deadline: each read gets what is left of ``max_drain_s`` (at least :data:`MIN_READ_S`), and a
    server still pending at the deadline is judged on its last reading, not read again: the wait ends by
    ``max_drain_s`` plus one short read per server, whatever the HTTP client's own timeout.
    """
    start = time.monotonic()
    deadline = start + max_drain_s
    out: dict[str, tuple[Gauges, float]] = {}
    last: dict[str, Gauges] = {}
    pending = dict(readers)
    while True:
        for name, reader in list(pending.items()):
            now = last[name] = read_gauges(reader, max(deadline - time.monotonic(), MIN_READ_S))
            if now.within(before[name]) or now.why or before[name].why:
                out[name] = (now, time.monotonic() - start)
                del pending[name]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(min(POLL_S, max(deadline - time.monotonic(), 0.0)))
    waited = time.monotonic() - start
    for name in pending:
        out[name] = (last[name], waited)
    return out


def drain_checks(gate: str, result: LoadResult, before: dict[str, Gauges],
                 after: dict[str, tuple[Gauges, float]], max_drain_s: float) -> list[Check]:
    """The checks: a request was cancelled at all, and each server came back to idle within ``max_drain_s``."""
    spec = result.spec
    checks = [compare(gate, "requests cancelled (cancel_rate)", result.cancelled, ">=", 1,
                      source=f"the load's clients ({_shape(spec)})",
                      remedy="no client went away, so the drain checks nothing: give cancel_rate > 0, and a "
                             "cancel_after_tokens below the answers' lengths (an EOS or a dataset's own lengths "
                             "can end them first)")]
    if not before:
        checks.append(compare(gate, "drain (max_drain_s)", None, "<=", max_drain_s, unit="s",
                              source="no /metrics to read", remedy=_FIX_METRICS))
    for name, idle_gauges in before.items():
        now, waited = after[name]
        checks += _server_checks(gate, name, idle_gauges, now, waited, max_drain_s)
    return checks


def _server_checks(gate: str, name: str, idle_gauges: Gauges, now: Gauges, waited: float,
                   max_drain_s: float) -> list[Check]:
    why = idle_gauges.why or now.why
    source = f"{name}/metrics, read before the load (idle) and every {POLL_S:g} s after it"
    within = f"within max_drain_s={max_drain_s:g}"
    if why:
        return [compare(gate, f"drain {within} ({name})", None, "<=", max_drain_s, unit="s",
                        source=f"{name}: {why}", remedy=_FIX_METRICS)]
    drained = now.within(idle_gauges)
    detail = f"back at idle after {waited:.2f} s" if drained else f"still above idle after {waited:.2f} s"
    return [
        compare(gate, f"{RUNNING} {within} ({name})", now.running, "<=", idle_gauges.running,
                source=source, remedy=_FIX_LEAK, detail=f"idle {fmt(idle_gauges.running)}; {detail}"),
        compare(gate, f"{now.kv_name} {within} ({name})", now.kv, "<=", idle_gauges.kv,
                source=source, remedy=_FIX_LEAK, detail=f"idle {fmt(idle_gauges.kv)}; {detail}"),
    ]


def _shape(spec: LoadSpec) -> str:
    return (f"cancel_rate={spec.cancel_rate:g} of {spec.requests} requests, cancel_after_tokens={spec.cancel_after()} "
            f"of output_len={spec.output_len}")


def context_line(result: LoadResult, before: dict[str, Gauges], after: dict[str, tuple[Gauges, float]]) -> str:
    """One line for the report, beside the load's figures: what was cancelled and how long the drain took."""
    spec = result.spec
    drains = "; ".join(_drain_text(name, before[name], *after[name]) for name in after)
    return (f"{result.cancelled} requests cancelled after {spec.cancel_after()} tokens (cancel_rate="
            f"{spec.cancel_rate:g}; counted apart: not errors, not in latency or throughput figures); "
            f"drain: {drains or 'no /metrics'}")


def _drain_text(name: str, idle_gauges: Gauges, now: Gauges, waited: float) -> str:
    if idle_gauges.why or now.why:
        return f"{name} not judged ({idle_gauges.why or now.why})"
    state = "back at idle" if now.within(idle_gauges) else "NOT back at idle"
    return (f"{name} {state} after {waited:.2f} s (running {fmt(now.running)}, idle {fmt(idle_gauges.running)}; "
            f"{now.kv_name} {fmt(now.kv)}, idle {fmt(idle_gauges.kv)})")


@dataclass
class Storm:
    """A cancellation storm's drain: the idle gauges read before the load, judged after it."""

    readers: dict[str, Reader]
    idle: dict[str, Gauges]
    max_drain_s: float

    @classmethod
    def before(cls, server: Handle, max_drain_s: float | None) -> Storm:
        """Read each server's idle gauges now, before the load (``max_drain_s`` None: :data:`DEFAULT_DRAIN_S`)."""
        readers = targets(server)
        return cls(readers, idle(readers), DEFAULT_DRAIN_S if max_drain_s is None else max_drain_s)

    def judge(self, gate: str, result: LoadResult, outcome: GateOutcome) -> None:
        """Wait for the drain (one deadline: ``max_drain_s``) and add its checks and line to ``outcome``."""
        after = wait_drained(self.readers, self.idle, self.max_drain_s)
        outcome.checks += drain_checks(gate, result, self.idle, after, self.max_drain_s)
        outcome.context["cancellation"] = context_line(result, self.idle, after)
